"""pystorm components that use every part of the component API, for the parity tests of
our pystorm runner against pystorm's own JSON loop (tests/unit/multilang/
test_pystorm_runner.py): run as ``python -m streamparse.run parity_components.ParityBolt``
under both protocols, they must send the same messages."""

import collections
import sys

from pystorm import Bolt, Spout

Pair = collections.namedtuple("Pair", "a b")


class ParityBolt(Bolt):
    """Each tuple's first value names what to do with it."""

    def initialize(self, conf, context):
        self.log(f"ready as task {context['taskid']}")

    def process(self, tup):
        op, arg = tup.values[0], tup.values[1]
        if op == "plain":  # auto-anchored, default stream
            self.emit([arg, len(arg)])
        elif op == "stream":
            self.emit([arg], stream="words", anchors=[])
        elif op == "anchors":
            self.emit([arg], anchors=[tup, "other-id"])
        elif op == "direct":
            tasks = self.emit([arg], direct_task=5, need_task_ids=True)
            self.emit([repr(tasks)])
        elif op == "ids":  # a round trip: the host answers with the task ids
            tasks = self.emit([arg], need_task_ids=True)
            self.emit([repr(tasks)])
        elif op == "values":  # a namedtuple, a tuple of values: JSON carries lists
            self.emit(Pair(arg, [1.5, None, True]))
            self.emit(tup.values)
        elif op == "log":
            self.log(f"log {arg}", level="warn")
            self.logger.info("logger %s", arg)
        elif op == "print":  # pystorm's JSON loop writes this into the protocol stream
            print(f"printed {arg}")
            sys.stdout.flush()
            import os

            os.write(1, b"straight to fd 1\n")
        elif op == "metric":
            self.report_metric("seen", arg)
        elif op == "fail":
            self.fail(tup)
        elif op == "raise":
            raise ValueError(f"asked to raise at {arg}")
        else:
            sys.stderr.write(f"unknown op {op!r}\n")

    def process_tick(self, tup):
        self.emit(["tick", tup.values[0]])


class ManualBolt(Bolt):
    """auto_ack and auto_anchor off: acks and anchors are the component's own."""

    auto_ack = False
    auto_anchor = False

    def initialize(self, conf, context):
        self.held = []

    def process(self, tup):
        self.held.append(tup)
        self.emit([tup.values[0]])  # not anchored
        if len(self.held) == 2:
            for held in self.held:
                self.emit([held.values[0], "late"], anchors=[held])
                self.ack(held)
            self.held = []


class ParitySpout(Spout):
    """Three reliable emits (id = the number), re-emitted on fail; ack/fail/activate/
    deactivate are logged."""

    def initialize(self, conf, context):
        self.next_n = 0

    def next_tuple(self):
        if self.next_n < 3:
            self.emit([self.next_n], tup_id=self.next_n)
            self.next_n += 1

    def ack(self, tup_id):
        self.log(f"ack {tup_id}")

    def fail(self, tup_id):
        self.emit([tup_id], tup_id=tup_id, stream="again")

    def activate(self):
        self.log("activated")

    def deactivate(self):
        self.log("deactivated")


from pystorm.bolt import BatchingBolt  # noqa: E402


class GroupBolt(BatchingBolt):
    """pystorm's BatchingBolt (its own _run and emit): tuples grouped by their first
    value, a batch emitted and acked at every tick."""

    ticks_between_batches = 0

    def group_key(self, tup):
        return tup.values[0]

    def process_batch(self, key, tups):
        self.emit([key, len(tups)])


class SlowSpout(Spout):
    """Always has a tuple, 5 ms per next_tuple call."""

    def initialize(self, conf, context):
        self.n = 0

    def next_tuple(self):
        import time

        time.sleep(0.005)
        self.emit([self.n], tup_id=self.n)
        self.n += 1


class CallerBolt(Bolt):
    """Emits the name of the function that called its ``process``: the runner's batch loop
    (``_bolt_run``) or pystorm's per-message loop (``_run``)."""

    def process(self, tup):
        self.emit([tup.values[0], sys._getframe(1).f_code.co_name])


class BusyBolt(Bolt):
    """Emits ``values[1]`` tuples for one input over about half a second: the runner's
    flusher sends them while ``process`` still runs."""

    def process(self, tup):
        import time

        for k in range(tup.values[1]):
            self.emit([tup.values[0], k])
            if k % 50 == 0:
                time.sleep(0.005)


class PairBolt(Bolt):
    """(word,) -> (word, len(word)); the word "bad" is emitted alone (one value for the
    stream's two fields)."""

    def process(self, tup):
        word = tup.values[0]
        self.emit([word] if word == "bad" else [word, len(word)])
