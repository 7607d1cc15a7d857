"""Combining before the shuffle for event time on the real runtime (docs/windows.md): a
spout of out-of-order events with in-band watermarks, some records late (a late firing
each, or the late stream), counted per key in 100 ms tumbling windows by two bolt tasks.
With combining on, the spout task ships per (key, pane) partial counts for the records
on time under the watermark it sent and the others as records; every firing, the late
stream and the metrics a user reads are the same as with ``combine_before_shuffle =
False``, and the same as the window module's reference fed the spout's sequence."""

from __future__ import annotations

from collections import Counter

import pytest

from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder, read_committed
from tests.integration.window_components import (
    OUT_OF_ORDER_EVENTS,
    CountPer100,
    OutOfOrderEvents,
    out_of_order_reference,
)


class LoggedCountPer100(CountPer100):
    """Logs each combined item it folds in (what the test reads to see partials came)."""

    def execute_partials(self, task, keys, accs):
        self.log.info("folded %d partials", len(keys))
        super().execute_partials(task, keys, accs)


class PlainCountPer100(LoggedCountPer100):
    combine_before_shuffle = False


def run(tmp_path, bolt) -> tuple[Counter, list, dict, str]:
    b = TopologyBuilder("combine-event-time")
    b.set_spout("events", OutOfOrderEvents(), parallelism=1)
    b.set_bolt("count", bolt, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(tmp_path / "out")), parallelism=1).global_grouping("count")
    b.set_bolt("late", FileSink(str(tmp_path / "late")), parallelism=1).global_grouping(
        "count", stream="late")
    home = tmp_path / "home"
    with LocalCluster(home=str(home)) as cluster:
        handle = cluster.submit(b.build(), Config(workers=2, checkpoint_interval_ms=200))
        handle.wait(timeout=120)
        metrics = handle.metrics()["components"]
    firings = Counter((r["key"], r["window_start"], r["window_end"], r["result"], r["kind"])
                      for r in read_committed(tmp_path / "out"))
    late = sorted((r["key"], r["ts"]) for r in read_committed(tmp_path / "late"))
    logs = "".join(p.read_text() for p in
                   (home / "runs" / "combine-event-time" / "logs").glob("worker-*.log"))
    return firings, late, metrics, logs


@pytest.mark.parametrize("bolt", [LoggedCountPer100, PlainCountPer100])
def test_event_time_combining_on_the_runtime_gives_the_records_firings(tmp_path, bolt):
    firings, late, metrics, logs = run(tmp_path, bolt)
    want, want_late = out_of_order_reference()
    assert sum(n for (*_, kind), n in want.items() if kind == "late") > 20  # exercised
    assert want_late > 20
    assert firings == want
    assert len(late) == want_late
    assert metrics["count"]["late_records"] == want_late
    assert metrics["events"]["emitted"] == OUT_OF_ORDER_EVENTS
    assert metrics["count"]["executed"] == OUT_OF_ORDER_EVENTS
    combining = "combines before the shuffle towards 'count'" in logs
    assert combining == (bolt is LoggedCountPer100)
    assert ("folded" in logs) == combining  # partials crossed the hop
