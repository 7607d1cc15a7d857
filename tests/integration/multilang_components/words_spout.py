"""A pystorm spout that emits without message ids (Storm's unreliable emits): 100 words."""

from pystorm import Spout


class WordsSpout(Spout):
    def initialize(self, conf, context):
        self.left = 100

    def next_tuple(self):
        if self.left > 0:
            self.left -= 1
            self.emit([f"w{self.left}"])


if __name__ == "__main__":
    WordsSpout().run()
