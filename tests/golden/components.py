"""The topology of the golden savepoint (tests/golden/savepoint-0.1.0/).

Its classes are pickled by class path into the savepoint, so they stay in this module
under these names: moving them breaks the golden savepoint, which is the point of it
being the *user's* code. The engine's own classes inside the state (window
accumulators and timers, key-group maps, sink transactions) may move freely only if
the engine still reads what today's code wrote -- test_golden_savepoint.py checks that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jstormpy import FileSink, SequenceSpout, TopologyBuilder
from jstormpy.api.topology import Topology
from jstormpy.window import BoundedOutOfOrderness, TumblingWindows, WindowedBolt
from tests.chaos.topologies import RunningSum

KEYS, PER_KEY, WINDOW = 4, 1200, 100


class SeqWindowCount(WindowedBolt):
    """Counts each key's events per tumbling window of ``WINDOW`` sequence numbers."""

    window = TumblingWindows(size_ms=WINDOW)
    time = "event"
    timestamp = "seq"
    key = "key"
    watermark = BoundedOutOfOrderness(max_lag_ms=WINDOW)

    def create(self) -> int:
        return 0

    def add(self, acc: int, tup: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


def golden(sums_out: Path, windows_out: Path, rate: float | None) -> Topology:
    """events -> sum (keyed managed state) -> file sink; events -> windows -> file sink."""
    b = TopologyBuilder("golden")
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(sums_out)), parallelism=1).fields_grouping("sum", ["key"])
    b.set_bolt("windows", SeqWindowCount, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("wout", FileSink(str(windows_out)), parallelism=1).global_grouping("windows")
    return b.build()
