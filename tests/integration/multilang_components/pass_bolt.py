"""A pystorm bolt: (seq, key) -> (seq, KEY), asking for the task ids of every emit."""

from pystorm import Bolt


class UpperBolt(Bolt):
    def initialize(self, conf, context):
        self.seen = 0
        self.log(f"upper bolt task {context['taskid']} of {context['componentid']} ready")

    def process(self, tup):
        seq, key = tup.values[0], tup.values[1]
        tasks = self.emit([seq, key.upper()], need_task_ids=True)
        if not isinstance(tasks, list) or not all(isinstance(t, int) for t in tasks):
            raise ValueError(f"emit answered {tasks!r}, not a list of task ids")
        self.seen += 1
        if self.seen % 50 == 0:
            self.report_metric("seen", self.seen)


if __name__ == "__main__":
    UpperBolt().run()
