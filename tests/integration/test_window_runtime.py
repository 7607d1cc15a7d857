"""Windows on the real runtime: in-band watermarks from spouts, the minimum over input
channels, end of input firing every window, data errors on the errors stream."""

from __future__ import annotations

from collections import Counter

from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder, read_committed
from tests.integration.window_components import (
    EVENTS_PER_TASK,
    WORDS_PER_TASK,
    CountPerWindow,
    KeptTuplesPerWord,
    TimedEvents,
    Words,
    word_at,
)


def test_inband_watermarks_min_over_channels_and_errors_stream(tmp_path):
    b = TopologyBuilder("window-runtime")
    b.set_spout("events", TimedEvents(), parallelism=2)
    b.set_bolt("count", CountPerWindow, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(tmp_path / "out")), parallelism=1).global_grouping("count")
    b.set_bolt("errors", FileSink(str(tmp_path / "errors")), parallelism=1).global_grouping(
        "count", stream="errors")
    b.set_bolt("late", FileSink(str(tmp_path / "late")), parallelism=1).global_grouping(
        "count", stream="late")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), Config(workers=2, checkpoint_interval_ms=200))
        handle.wait(timeout=120)
    expected: Counter[tuple[str, int]] = Counter()
    for speed in (10, 5):
        for i in range(EVENTS_PER_TASK):
            expected[(f"k{i % 3}", i * speed // 1000 * 1000)] += 1
    results = read_committed(tmp_path / "out")
    on_time = [r for r in results if r["kind"] == "on_time"]
    got = Counter({(r["key"], r["window_start"]): r["result"] for r in on_time})
    assert len(on_time) == len(got), "a window fired on_time twice"
    # the slower channel holds the watermark back, so nothing is late and every window is
    # complete when it fires
    assert got == expected
    assert read_committed(tmp_path / "late") == []
    errors = read_committed(tmp_path / "errors")
    assert len(errors) == 1 and "not-a-number" in str(errors[0]["values"])


def test_ingestion_time_window_on_the_runtime_keeps_the_tuples_add_kept(tmp_path):
    """The peer word count's window shape (ingestion time, one window fired by the end of
    input) with an ``add`` that keeps its Tuples: every word's count and the sum of its
    sequence numbers come out exact, exactly-once with checkpoints during the run."""
    b = TopologyBuilder("ingestion-window")
    b.set_spout("words", Words(), parallelism=2)
    b.set_bolt("count", KeptTuplesPerWord, parallelism=2).fields_grouping("words", ["word"])
    b.set_bolt("out", FileSink(str(tmp_path / "out")), parallelism=2) \
        .local_or_shuffle_grouping("count")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), Config(workers=2, checkpoint_interval_ms=200))
        handle.wait(timeout=120)
    expected: dict[str, list[int]] = {}
    for task in (0, 1):
        for i in range(WORDS_PER_TASK):
            word, n = word_at(task, i)
            count, total = expected.get(word, [0, 0])
            expected[word] = [count + 1, total + n]
    rows = read_committed(tmp_path / "out")
    assert len(rows) == len(expected)
    assert {r["key"]: r["result"] for r in rows} == expected
