"""heronpy components for the integration tests (plain heronpy: nothing jstormpy in them).

KeySpout and KeyCount are stateful (Heron's StatefulComponent): the spout keeps its read
position in its state, the bolt its counts, so a rollback rewinds and restores both."""

from __future__ import annotations

import time

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.state.stateful_component import StatefulComponent


class KeySpout(Spout, StatefulComponent):
    """Emits seq, key for seq in range(keys.n) (task i of p: seq = i, i+p, ...), one per
    next_tuple, pausing keys.pause_s after each."""

    outputs = ["seq", "key"]

    def init_state(self, stateful_state):
        self.state = stateful_state

    def initialize(self, config, context):
        tasks = context.get_component_tasks(context.get_component_id())
        self.step = len(tasks)
        self.n = int(config["keys.n"])
        self.keys = int(config["keys.keys"])
        self.pause_s = float(config.get("keys.pause_s", 0))
        first = tasks.index(context.get_task_id())
        self.next = self.state.get("next")
        if self.next is None:
            self.next = first

    def pre_save(self, checkpoint_id):
        self.state.put("next", self.next)

    def next_tuple(self):
        if self.next < self.n:
            self.emit([self.next, f"K{self.next % self.keys}"], tup_id=self.next)
            self.next += self.step
            if self.pause_s:
                time.sleep(self.pause_s)


class KeyCount(Bolt, StatefulComponent):
    """Counts per key in its state; emits key, count, seq (the running count)."""

    outputs = ["key", "count", "seq"]

    def init_state(self, stateful_state):
        self.counts = stateful_state

    def pre_save(self, checkpoint_id):
        pass  # the counts live in the state already

    def initialize(self, config, context):
        pass

    def process(self, tup):
        seq, key = tup.values
        count = (self.counts.get(key) or 0) + 1
        self.counts.put(key, count)
        self.emit([key, count, seq])


class Forgetful(Spout):
    """A spout with no state: nothing to rewind it with."""

    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        self.emit([self.n])
        self.n += 1
