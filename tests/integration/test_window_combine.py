"""Combining before the shuffle on the real runtime (docs/windows.md): an ingestion-time
word count whose spout tasks ship partial counts to the fields-grouped WindowedBolt. The
final counts are exact, the metrics a user reads are in records (the spout's emitted, the
bolt's executed), and the worker log says which task combines; with
``combine_before_shuffle = False`` the same run sends records."""

from __future__ import annotations

from collections import Counter

import pytest

from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder, read_committed
from tests.integration.window_components import (
    WORDS_PER_TASK,
    FinalWordCount,
    Words,
    word_at,
)


class PlainWordCount(FinalWordCount):
    combine_before_shuffle = False


@pytest.mark.parametrize("bolt", [FinalWordCount, PlainWordCount])
def test_combined_word_count_on_the_runtime(tmp_path, bolt):
    b = TopologyBuilder("combine-window")
    b.set_spout("words", Words(), parallelism=2)
    b.set_bolt("count", bolt, parallelism=2).fields_grouping("words", ["word"])
    b.set_bolt("out", FileSink(str(tmp_path / "out")), parallelism=2) \
        .local_or_shuffle_grouping("count")
    home = tmp_path / "home"
    with LocalCluster(home=str(home)) as cluster:
        handle = cluster.submit(b.build(), Config(workers=2, checkpoint_interval_ms=200))
        handle.wait(timeout=120)
        metrics = handle.metrics()["components"]
    expected = Counter(word_at(task, i)[0] for task in (0, 1) for i in range(WORDS_PER_TASK))
    rows = read_committed(tmp_path / "out")
    assert len(rows) == len(expected)
    assert {r["key"]: r["result"] for r in rows} == dict(expected)
    assert metrics["words"]["emitted"] == 2 * WORDS_PER_TASK
    assert metrics["count"]["executed"] == 2 * WORDS_PER_TASK
    assert metrics["count"].get("late_records", 0) == 0
    logs = "".join(p.read_text() for p in
                   (home / "runs" / "combine-window" / "logs").glob("worker-*.log"))
    combining = "combines before the shuffle towards 'count'" in logs
    assert combining == (bolt is FinalWordCount)
