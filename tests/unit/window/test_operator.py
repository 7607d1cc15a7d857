"""Concrete WindowOperator cases: alignment, triggers, lateness, processing time."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jstormpy.api.errors import TopologyError
from jstormpy.window import (
    CountWindows,
    Firing,
    LateRecord,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowOperator,
)

from .helpers import CountAgg, SetAgg


def firings(results: list) -> list[tuple]:
    return [(f.key, f.window_start, f.window_end, f.result, f.kind) for f in results]


def test_tumbling_half_open_and_fires_at_end_minus_one() -> None:
    op = WindowOperator(TumblingWindows(10), CountAgg())
    for ts in (0, 9, 10):
        assert op.process("k", ts, ts) == []
    assert op.advance_watermark(8) == []
    assert firings(op.advance_watermark(9)) == [("k", 0, 10, 2, "on_time")]
    assert firings(op.finish()) == [("k", 10, 20, 1, "on_time")]


def test_sliding_windows_aligned_to_epoch_including_negative_times() -> None:
    op = WindowOperator(SlidingWindows(10, 5), SetAgg())
    op.process(None, 7, "a")
    op.process(None, -3, "b")
    got = firings(op.finish())
    assert sorted(got) == [(None, -10, 0, ("b",), "on_time"),
                           (None, -5, 5, ("b",), "on_time"),
                           (None, 0, 10, ("a",), "on_time"),
                           (None, 5, 15, ("a",), "on_time")]


def test_session_windows_merge_and_touching_sessions_join() -> None:
    op = WindowOperator(SessionWindows(5), SetAgg())
    op.process("u", 0, "a")   # [0, 5)
    op.process("u", 12, "c")  # [12, 17)
    op.process("u", 5, "b")   # [5, 10) touches [0, 5) -> [0, 10)
    assert op.window_count == 2
    op.process("u", 8, "d")   # [8, 13) bridges -> [0, 17)
    assert op.window_count == 1
    # a session is complete only once the watermark passes its end: a record at 17
    # touches [0, 17) and joins it, so the session has not fired at watermark 16
    assert firings(op.advance_watermark(16)) == []
    assert firings(op.advance_watermark(17)) == [("u", 0, 17, ("a", "b", "c", "d"), "on_time")]


def test_a_record_at_a_sessions_end_joins_it_before_it_fires_and_it_fires_once() -> None:
    """Records ``gap`` apart share a session (touching sessions merge): the session is
    not complete at watermark ``end - 1``. It fired there before, and the record at its
    end then merged into the fired session, which fired on time a second time with the
    first records in both firings (found by test_window_firings_equal_the_reference)."""
    op = WindowOperator(SessionWindows(15), SetAgg())
    op.process("x", 128, "a")
    op.process("x", 131, "b")                      # [128, 146)
    assert firings(op.advance_watermark(145)) == []
    op.process("x", 146, "c")                      # touches: [128, 161)
    assert firings(op.finish()) == [("x", 128, 161, ("a", "b", "c"), "on_time")]


def test_allowed_lateness_late_firings_then_late_records() -> None:
    op = WindowOperator(TumblingWindows(10), CountAgg(), allowed_lateness_ms=5)
    op.process("k", 1, "a")
    assert firings(op.advance_watermark(12)) == [("k", 0, 10, 1, "on_time")]
    assert firings(op.process("k", 2, "b")) == [("k", 0, 10, 2, "late")]
    assert op.advance_watermark(15) == []  # purged: wm >= end + lateness
    assert op.window_count == 0
    assert op.process("k", 3, "c") == [LateRecord("k", 3, "c")]
    assert op.late_records == 1


def test_late_record_only_if_no_window_takes_it() -> None:
    op = WindowOperator(SlidingWindows(10, 5), CountAgg())
    op.advance_watermark(12)  # [0,10) is beyond lateness, [5,15) is open
    assert op.process("k", 7, "x") == []
    assert firings(op.finish()) == [("k", 5, 15, 1, "on_time")]


def test_early_fire_every_ms_only_for_changed_windows() -> None:
    op = WindowOperator(TumblingWindows(1000), CountAgg(), early_fire_every_ms=100)
    assert op.on_processing_time(0) == []  # starts the clock
    op.process("a", 1, "r")
    op.process("b", 2, "r")
    assert sorted(firings(op.on_processing_time(100))) == [("a", 0, 1000, 1, "early"),
                                                           ("b", 0, 1000, 1, "early")]
    op.process("a", 3, "r")
    assert firings(op.on_processing_time(150)) == []  # not a new multiple of 100 yet
    assert firings(op.on_processing_time(230)) == [("a", 0, 1000, 2, "early")]
    assert op.on_processing_time(330) == []  # nothing changed


def test_processing_time_mode_closes_windows_on_ticks() -> None:
    op = WindowOperator(TumblingWindows(100), CountAgg(), processing_time=True)
    op.on_processing_time(1000)
    op.process("k", 1000, "r")
    op.process("k", 1050, "r")
    assert op.on_processing_time(1099) == []
    assert firings(op.on_processing_time(1100)) == [("k", 1000, 1100, 2, "on_time")]


def test_count_windows_sliding_and_flush_on_finish() -> None:
    op = WindowOperator(CountWindows(3, 2), SetAgg())
    out = [op.process("k", 0, i) for i in range(5)]
    assert [firings(r) for r in out] == [[], [("k", 0, 2, (0, 1), "on_time")], [],
                                         [("k", 1, 4, (1, 2, 3), "on_time")], []]
    assert firings(op.finish()) == [("k", 3, 5, (3, 4), "on_time")]


def test_watermark_is_monotone() -> None:
    op = WindowOperator(TumblingWindows(10), CountAgg())
    op.advance_watermark(50)
    assert op.advance_watermark(20) == []
    assert op.watermark == 50


@pytest.mark.parametrize("kwargs", [
    {"allowed_lateness_ms": -1}, {"early_fire_every_ms": 0}, {"early_fire_every_n": 0},
    {"early_fire_every_n": 1.5}, {"allowed_lateness_ms": float("nan")},
])
def test_operator_rejects_bad_settings(kwargs: dict) -> None:
    with pytest.raises(TopologyError):
        WindowOperator(TumblingWindows(10), CountAgg(), **kwargs)


def test_operator_rejects_early_firing_on_count_windows_and_non_assigners() -> None:
    with pytest.raises(TopologyError, match="early"):
        WindowOperator(CountWindows(3), CountAgg(), early_fire_every_n=2)
    with pytest.raises(TopologyError, match="window must be"):
        WindowOperator("tumbling", CountAgg())  # type: ignore[arg-type]


def test_firing_values_order() -> None:
    assert Firing("k", 0, 10, 3, "late").as_values() == ("k", 0, 10, 3, "late")


def test_slicing_is_automatic_and_refused_where_impossible() -> None:
    op = WindowOperator(SlidingWindows(60, 10), CountAgg())
    for ts in range(0, 100, 5):
        op.process("k", ts, ts)
    assert op.window_count == 10  # panes of gcd(60, 10) = 10 ms, not 15 windows
    assert WindowOperator(SlidingWindows(60, 10), CountAgg(),
                          early_fire_every_n=2).window_count == 0
    with pytest.raises(TopologyError, match="slicing"):
        WindowOperator(SlidingWindows(60, 10), CountAgg(), slicing=True, early_fire_every_ms=5)
    with pytest.raises(TopologyError, match="slicing"):
        WindowOperator(SlidingWindows(60.5, 10), CountAgg(), slicing=True)


def test_sliced_results_merge_panes_oldest_first() -> None:
    """Non-commutative aggregation: sliced windows see records in pane (time) order."""
    class Concat(CountAgg):
        def create(self) -> str:
            return ""

        def add(self, acc: str, rec: str) -> str:
            return acc + rec

        def merge(self, a: str, b: str) -> str:
            return a + b

        def result(self, key, window, acc: str) -> str:
            return acc

    op = WindowOperator(SlidingWindows(4, 2), Concat())
    for ts, rec in [(5, "c"), (0, "a"), (2, "b"), (7, "d"), (9, "e")]:
        op.process(None, ts, rec)
    out = sorted(firings(op.finish()))
    assert [f[3] for f in out] == ["a", "ab", "bc", "cd", "de", "e"]


def test_a_stored_sessions_timers_from_an_earlier_version_still_fire_it_once() -> None:
    """The timer index of store-kept sessions (window/stored.py) is part of the task's
    snapshot. One taken before sessions fired at their end holds timers at ``end - 1``;
    restored, its session still fires on time, once, when the watermark passes its end."""
    from jstormpy.window.stored import StoredWindows

    def sessions() -> StoredWindows:
        return StoredWindows(0.0, 0.0, 15.0, 0.0, SetAgg(), None, None)

    old = sessions()
    out: list[Any] = []
    old.process("x", 128, "a", 100, out)
    old.process("x", 131, "b", 100, out)           # [128, 146)
    snap = old.snapshot_state()
    assert snap["fire"][146] == ["x"]              # (143: the first record's, stale)
    earlier = {**snap, "fire": {t - 1: keys for t, keys in snap["fire"].items()}}
    del earlier["sessions_fire_at_end"]
    for data in (snap, earlier):
        restored = sessions()
        restored.store = copy.deepcopy(old.store)
        restored.restore_state(data)
        restored.advance(145, out)
        assert out == []
        restored.process("x", 146, "c", 145, out)  # touches: [128, 161)
        restored.advance(float("inf"), out)
        assert firings(out) == [("x", 128, 161, ("a", "b", "c"), "on_time")]
        out.clear()
