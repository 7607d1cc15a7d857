"""Components of the savepoint tests: the linear keyed-sum topology at any parallelism,
and a new version of its stateful bolt whose state layout changed (``migrate_state``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jstormpy import Bolt, FileSink, SequenceSpout, TopologyBuilder
from jstormpy.api.topology import Topology
from tests.chaos.topologies import RunningSum
from tests.integration.paced_spout import ReleasableSequenceSpout


class RunningSumV2(Bolt):
    """RunningSum with state ``{key: {"sum": s, "count": c}}`` instead of tuples."""

    outputs = ("key", "seq", "value", "sum", "count")
    state_version = 2

    @staticmethod
    def migrate_state(old_version: Any, snap: dict[str, Any]) -> dict[str, Any]:
        sums = snap["states"].get("sums", {})
        return {"states": {"sums": {k: {"sum": s, "count": c} for k, (s, c) in sums.items()}}}

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.sums = self.state("sums")

    def execute(self, tup: Any) -> None:
        key, seq, value = tup["key"], tup["seq"], tup["value"]
        entry = self.sums.setdefault(key, {"sum": 0, "count": 0})
        entry["sum"] += value
        entry["count"] += 1
        self.emit((key, seq, value, entry["sum"], entry["count"]))


def linear(out: Path, sum_parallelism: int, bolt: type = RunningSum, keys: int = 12,
           per_key: int = 1500, rate: float | None = 3000,
           release_file: Path | None = None) -> Topology:
    """``release_file``: the spout runs at ``rate`` until the test releases it
    (tests/integration/paced_spout.py)."""
    b = TopologyBuilder("sp-linear")
    spout = SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate) if release_file is None \
        else ReleasableSequenceSpout(release_file, keys=keys, per_key=per_key, rate_per_s=rate)
    b.set_spout("events", spout, parallelism=2)
    b.set_bolt("sum", bolt, parallelism=sum_parallelism).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


class PartialCount(Bolt):
    """Counts the events of each key that reach this task. Fed by shuffle, so every task
    keeps a partial count of every key: managed state not partitioned by key group."""

    outputs = ("key", "task", "partial")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts = self.state("counts")
        self.task = context.task_index

    def execute(self, tup: Any) -> None:
        key = tup["key"]
        self.counts[key] = self.counts.get(key, 0) + 1
        self.emit((key, self.task, self.counts[key]))


def partial_counts(out: Path, parallelism: int, keys: int = 6, per_key: int = 1500,
                   rate: float | None = 3000) -> Topology:
    b = TopologyBuilder("sp-partial")
    b.set_spout("events", SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("count", PartialCount, parallelism=parallelism).shuffle_grouping("events")
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("count")
    return b.build()
