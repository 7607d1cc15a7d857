"""The batch path of sliced windows: process_batch / execute_batch give exactly what
per-record calls give (same results, same order), which give what the brute-force
reference gives."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.window import (
    BoundedOutOfOrderness,
    Firing,
    FiringRun,
    TumblingWindows,
    WindowedBolt,
    WindowOperator,
)
from jstormpy.window.reference import ReferenceWindows

from .helpers import SENSOR_INDEX, SetAgg, aligned, attach, canon, event_st, expand


def as_records(calls: list[tuple]) -> list[tuple[Any, float, Any, float]]:
    """(key, ts, record, watermark after it) per record; -inf where none follows."""
    out: list[list[Any]] = []
    for call in calls:
        if call[0] == "rec":
            out.append([call[1], call[2], call[3], -math.inf])
        elif call[0] == "wm" and out:
            out[-1][3] = max(out[-1][3], call[1])
    return [tuple(r) for r in out]  # type: ignore[misc]


def expand_runs(results: list[Any]) -> list[Any]:
    out: list[Any] = []
    for r in results:
        out += r.firings() if isinstance(r, FiringRun) else [r]
    return out


@settings(max_examples=200, deadline=None)
@given(assigner=aligned, raw=st.lists(event_st, max_size=80), lag=st.integers(0, 30),
       lateness=st.integers(0, 20), cuts=st.lists(st.integers(0, 80), max_size=6),
       columnar=st.booleans())
def test_process_batch_equals_per_record_and_reference(  # noqa: PLR0917
        assigner, raw, lag, lateness, cuts, columnar) -> None:
    recs = as_records(expand(raw, lag))
    one = WindowOperator(assigner, SetAgg(), allowed_lateness_ms=lateness)
    many = WindowOperator(assigner, SetAgg(), allowed_lateness_ms=lateness)
    ref = ReferenceWindows(assigner, SetAgg(), lateness)
    bounds = sorted({0, len(recs), *(c for c in cuts if c <= len(recs))})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chunk = recs[lo:hi]
        expected: list[Any] = []
        want: list[Any] = []
        for key, ts, rec, wm in chunk:
            expected += one.process(key, ts, rec)
            expected += one.advance_watermark(wm)
            want += ref.process(key, ts, rec)
            want += ref.advance_watermark(wm)
        keys, tss, records, wms = zip(*chunk, strict=True)
        got = many.process_batch(keys, tss, records, wms, columnar=columnar)
        assert expand_runs(got) == expected  # same results in the same order
        assert canon(expected) == canon(want)
        assert many.watermark == one.watermark
        assert many.window_count == one.window_count
    assert expand_runs(many.finish(columnar=columnar)) == one.finish()
    assert many.late_records == one.late_records
    assert many.window_count == 0


@settings(max_examples=60, deadline=None)
@given(assigner=aligned, raw=st.lists(event_st, max_size=60), lag=st.integers(0, 30),
       cut=st.integers(0, 60))
def test_restore_between_batches(assigner, raw, lag, cut) -> None:
    recs = as_records(expand(raw, lag))
    straight = WindowOperator(assigner, SetAgg())
    expected = straight.process_batch(*zip(*recs, strict=True)) if recs else []
    expected += straight.finish()
    op = WindowOperator(assigner, SetAgg())
    got = op.process_batch(*zip(*recs[:cut], strict=True)) if recs[:cut] else []
    restored = WindowOperator(assigner, SetAgg())
    restored.restore(op.snapshot())
    if recs[cut:]:
        got += restored.process_batch(*zip(*recs[cut:], strict=True))
    got += restored.finish()
    assert got == expected


def make_bolt(assigner: Any, lag: int, lateness: int) -> WindowedBolt:
    class IdSets(WindowedBolt):
        window = assigner
        timestamp = "ts"
        key = "sensor"
        watermark = BoundedOutOfOrderness(max_lag_ms=lag)
        allowed_lateness_ms = lateness

        def create(self) -> frozenset:
            return frozenset()

        def add(self, acc: frozenset, tup: Tuple) -> frozenset:
            return acc | {tup["temp"]}

        def merge(self, a: frozenset, b: frozenset) -> frozenset:
            return a | b

        def result(self, key: Any, window: Any, acc: frozenset) -> tuple:
            return tuple(sorted(acc))

    return IdSets()


@settings(max_examples=200, deadline=None)
@given(assigner=aligned,
       batches=st.lists(st.tuples(st.sampled_from([1, 2]), st.lists(st.tuples(
           st.integers(0, 5), st.integers(0, 6), st.integers(0, 30),
           st.sampled_from(["ok"] * 12 + ["bad_ts", "no_key"])), max_size=12)), max_size=10),
       lag=st.integers(0, 20), lateness=st.integers(0, 15))
def test_execute_batch_emits_what_execute_emits(assigner, batches, lag, lateness) -> None:
    """Two channels (watermark = min over them), bad tuples on the errors stream."""
    per_tuple = make_bolt(assigner, lag, lateness)
    batched = make_bolt(assigner, lag, lateness)
    col_t = attach(per_tuple, input_tasks=(1, 2))
    col_b = attach(batched, input_tasks=(1, 2))
    clock = {1: 0, 2: 0}
    n = 0
    index = {"sensor": 0, "ts": 1, "temp": 2}
    for task, rows in batches:
        values = []
        for key, step, jitter, kind in rows:
            clock[task] += step
            ts: Any = clock[task] - jitter
            if kind == "bad_ts":
                ts = float("nan") if n % 2 else "soon"
            values.append((key, ts, n) if kind != "no_key" else ())
            n += 1
        for v in values:
            per_tuple.execute(Tuple(v, SENSOR_INDEX, "src", "default", task))
        batched.execute_batch(Batch(values, index, "src", "default", task))
        assert col_b.take() == col_t.take()
        assert batched.current_watermark == per_tuple.current_watermark
    per_tuple.on_inputs_finished()
    batched.on_inputs_finished()
    assert col_b.take() == col_t.take()
    assert batched.late_records == per_tuple.late_records
    assert batched.error_records == per_tuple.error_records
    assert col_b.watermarks == sorted(set(col_b.watermarks))
    assert col_b.watermarks[-1] == col_t.watermarks[-1] == math.inf


def test_firing_run_is_the_firings_column_by_column() -> None:
    run = FiringRun(0, 10, ["a", "b"], [1, 2], "on_time")
    assert run.firings() == [Firing("a", 0, 10, 1, "on_time"), Firing("b", 0, 10, 2, "on_time")]
    assert run.columns() == [["a", "b"], [0, 0], [10, 10], [1, 2], ["on_time", "on_time"]]


def test_late_record_in_a_batch_goes_to_the_late_stream() -> None:
    bolt = make_bolt(TumblingWindows(10), 0, 0)
    col = attach(bolt)
    rows = [(1, 5, 0), (1, 25, 1), (1, 3, 2)]  # the third is after its window was purged
    bolt.execute_batch(Batch(rows, {"sensor": 0, "ts": 1, "temp": 2}, "src", "default", 1))
    assert col.take() == [("default", (1, 0, 10, (0,), "on_time")), ("late", (1, 3, 2))]
    assert bolt.late_records == 1


def test_subclass_overriding_execute_still_sees_every_tuple() -> None:
    base = type(make_bolt(TumblingWindows(10), 0, 0))

    class Filtered(base):  # type: ignore[misc, valid-type]
        def execute(self, tup: Tuple) -> None:
            if tup["temp"] != 1:  # user pre-filtering in execute()
                super().execute(tup)

    bolt = Filtered()
    col = attach(bolt)
    rows = [(1, 5, 0), (1, 6, 1), (1, 25, 2)]
    bolt.execute_batch(Batch(rows, {"sensor": 0, "ts": 1, "temp": 2}, "src", "default", 1))
    assert col.stream("default") == [(1, 0, 10, (0,), "on_time")]  # record 1 filtered out
