"""Built-in aggregates (window/aggregates.py): the column path (``add_many`` per slice,
C-level merges, ``results``) gives exactly what the obvious per-record Python code
gives, through the operator and through WindowedBolt.execute_batch vs execute."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.api.errors import TopologyError
from jstormpy.window import (
    BoundedOutOfOrderness,
    Count,
    FiringRun,
    LateRecord,
    Max,
    Mean,
    Min,
    SessionWindows,
    SlidingWindows,
    Sum,
    TumblingWindows,
    WindowedBolt,
    WindowOperator,
)

from .helpers import SENSOR_INDEX, aligned, attach


class Plain:
    """What each built-in computes, written the obvious way (list of the values)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def create(self) -> tuple:
        return ()

    def add(self, acc: tuple, rec: Any) -> tuple:
        return (*acc, rec)

    def merge(self, a: tuple, b: tuple) -> tuple:
        return a + b

    def result(self, key: Any, window: Any, acc: tuple) -> Any:
        return self.fn(acc)


def mean(values: tuple) -> float:
    return math.fsum(values) / len(values)


BUILTINS = {"count": (Count, len), "sum": (Sum, sum), "min": (Min, min), "max": (Max, max),
            "mean": (Mean, mean)}


def expand_runs(results: list[Any]) -> list[Any]:
    out: list[Any] = []
    for r in results:
        out += r.firings() if isinstance(r, FiringRun) else [r]
    return out


def same(a: list[Any], b: list[Any], approx: bool) -> None:
    """Same firings and late records in the same order; results equal (approx: mean)."""
    def shape(r: Any) -> Any:
        return r if isinstance(r, LateRecord) else r[:3] + r[4:]
    assert list(map(shape, a)) == list(map(shape, b))
    for x, y in zip(a, b, strict=True):
        if isinstance(x, LateRecord):
            continue
        if approx:
            assert x.result == pytest.approx(y.result)
        else:
            assert x.result == y.result


@settings(max_examples=150, deadline=None)
@given(assigner=aligned, name=st.sampled_from(sorted(BUILTINS)),
       recs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(0, 25),
                               st.integers(-50, 50), st.booleans()), max_size=80),
       lateness=st.integers(0, 10), cuts=st.lists(st.integers(0, 80), max_size=5))
def test_operator_column_path_equals_plain_code(assigner, name, recs, lateness,  # noqa: PLR0917
                                                cuts) -> None:
    builtin_cls, fn = BUILTINS[name]
    agg = builtin_cls() if builtin_cls is Count else builtin_cls(None)
    fast = WindowOperator(assigner, agg, allowed_lateness_ms=lateness)
    per_record = WindowOperator(assigner, agg, allowed_lateness_ms=lateness)
    plain = WindowOperator(assigner, Plain(fn), allowed_lateness_ms=lateness)
    rows = []
    clock, top = 0, -math.inf
    for key, step, jitter, value, wm in recs:
        clock += step
        ts = clock - jitter
        top = max(top, ts)
        rows.append((key, ts, value / 4, top - 3 if wm else -math.inf))
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chunk = rows[lo:hi]
        want: list[Any] = []
        one: list[Any] = []
        for key, ts, value, wm in chunk:
            want += plain.process(key, ts, value) + plain.advance_watermark(wm)
            one += per_record.process(key, ts, value) + per_record.advance_watermark(wm)
        keys, tss, values, wms = zip(*chunk, strict=True)
        got = expand_runs(fast.process_batch(keys, tss, values, wms, columnar=True))
        same(got, want, approx=name == "mean")
        assert got == one  # the column path and the per-record path agree exactly
        assert fast.window_count == plain.window_count
    same(expand_runs(fast.finish(columnar=True)), plain.finish(), approx=name == "mean")


def make_bolt(assigner: Any, aggregate: Any, lag: int, lateness: int) -> WindowedBolt:
    class Builtin(WindowedBolt):
        window = assigner
        timestamp = "ts"
        key = "sensor"
        watermark = BoundedOutOfOrderness(max_lag_ms=lag)
        allowed_lateness_ms = lateness

    Builtin.aggregate = aggregate
    return Builtin()


@settings(max_examples=120, deadline=None)
@given(assigner=aligned, name=st.sampled_from(sorted(BUILTINS)),
       batches=st.lists(st.tuples(st.sampled_from([1, 2]), st.lists(st.tuples(
           st.integers(0, 5), st.integers(0, 6), st.integers(0, 30), st.integers(-9, 9)),
           max_size=12)), max_size=10),
       lag=st.integers(0, 20), lateness=st.integers(0, 15))
def test_execute_batch_with_builtin_emits_what_execute_emits(  # noqa: PLR0917
        assigner, name, batches, lag, lateness) -> None:
    builtin_cls, _ = BUILTINS[name]
    agg = builtin_cls() if builtin_cls is Count else builtin_cls("temp")
    per_tuple = make_bolt(assigner, agg, lag, lateness)
    batched = make_bolt(assigner, agg, lag, lateness)
    col_t = attach(per_tuple, input_tasks=(1, 2))
    col_b = attach(batched, input_tasks=(1, 2))
    clock = {1: 0, 2: 0}
    for task, rows in batches:
        values = []
        for key, step, jitter, temp in rows:
            clock[task] += step
            values.append((key, clock[task] - jitter, temp * 1.5))
        for v in values:
            per_tuple.execute(Tuple(v, SENSOR_INDEX, "src", "default", task))
        batched.execute_batch(Batch(values, SENSOR_INDEX, "src", "default", task))
        assert col_b.take() == col_t.take()
    per_tuple.on_inputs_finished()
    batched.on_inputs_finished()
    assert col_b.take() == col_t.take()
    assert batched.late_records == per_tuple.late_records


def test_mean_of_a_sliding_window_by_hand() -> None:
    op = WindowOperator(SlidingWindows(4, 2), Mean())
    op.process_batch(["a", "a", "b", "a"], [0, 1, 1, 3], [1.0, 2.0, 10.0, 6.0])
    got = [(f.key, f.window_start, f.window_end, f.result) for f in op.finish()]
    assert got == [("a", -2, 2, 1.5), ("b", -2, 2, 10.0), ("a", 0, 4, 3.0),
                   ("b", 0, 4, 10.0), ("a", 2, 6, 6.0)]


def test_bad_aggregate_is_a_clear_error() -> None:
    class Bad(WindowedBolt):
        window = TumblingWindows(10)
        timestamp = "ts"
        aggregate = "mean"  # type: ignore[assignment]

    with pytest.raises(TopologyError, match="aggregate must be None or a built-in"):
        Bad.validate_config()
    with pytest.raises(TopologyError, match="field name"):
        Sum("")


def test_builtin_works_with_session_windows() -> None:
    class Sessions(WindowedBolt):
        window = SessionWindows(gap_ms=5)
        timestamp = "ts"
        key = "sensor"
        aggregate = Max("temp")

    bolt = Sessions()
    Sessions.validate_config()
    col = attach(bolt)
    for ts, temp in [(0, 1.0), (3, 7.0), (20, 2.0)]:
        bolt.execute(Tuple(("s", ts, temp), SENSOR_INDEX, "src", "default", 1))
    bolt.on_inputs_finished()
    assert [v[1:4] for v in col.stream("default")] == [(0, 8, 7.0), (20, 25, 2.0)]
