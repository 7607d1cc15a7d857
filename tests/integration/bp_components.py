"""Components for the backpressure tests."""

from __future__ import annotations

import time

from jstormpy import Bolt


class SlowPassThrough(Bolt):
    """A bolt much slower than its spout: the workload, not a wait in the test."""

    outputs = ("key", "seq", "value")

    def execute(self, tup):
        time.sleep(0.0004)
        self.emit(tup.values)


class StampedSlowPassThrough(Bolt):
    """Like SlowPassThrough, and stamps the processing time (for per-second rates)."""

    outputs = ("key", "seq", "value", "processed_at")

    def execute(self, tup):
        time.sleep(0.0004)
        self.emit((*tup.values, time.time()))
