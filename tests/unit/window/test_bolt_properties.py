"""WindowedBolt with a per-channel watermark strategy against the reference."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.component import Tuple
from jstormpy.window import (
    BoundedOutOfOrderness,
    Firing,
    LateRecord,
    SessionWindows,
    SlidingWindows,
    WindowedBolt,
)
from jstormpy.window.reference import ReferenceWindows

from .helpers import SENSOR_INDEX, SetAgg, attach, time_assigners


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
            return acc | {tup["temp"]}  # temp carries a unique record id

        def merge(self, a: frozenset, b: frozenset) -> frozenset:
            return a | b

        def result(self, key: Any, window: Any, acc: frozenset) -> tuple:
            return tuple(sorted(acc))

    return IdSets()


def as_emitted(results: list) -> list[tuple[str, tuple]]:
    out = []
    for r in results:
        if isinstance(r, Firing):
            out.append(("default", tuple(r)))
        else:
            assert isinstance(r, LateRecord)
            out.append(("late", (r.key, r.timestamp, r.record)))
    return sorted(out, key=repr)


@settings(max_examples=200, deadline=None)
@given(assigner=st.one_of(time_assigners, st.just(SlidingWindows(20, 5)),
                          st.just(SessionWindows(7))),
       raw=st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(0, 2),
                              st.integers(0, 6), st.integers(0, 30)), max_size=60),
       lag=st.integers(0, 20), lateness=st.integers(0, 15))
def test_bolt_matches_reference_with_min_watermark_over_channels(assigner, raw, lag,
                                                                 lateness) -> None:
    bolt = make_bolt(assigner, lag, lateness)
    col = attach(bolt, input_tasks=(1, 2))
    ref = ReferenceWindows(assigner, SetAgg(), lateness)
    chan_max = {1: -math.inf, 2: -math.inf}
    clock = 0
    late_emitted = 0
    for i, (task, key, step, jitter) in enumerate(raw):
        clock += step
        ts = clock - jitter if task == 1 else clock // 2 - jitter  # channel 2 lags behind
        bolt.execute(Tuple((key, ts, i), SENSOR_INDEX, "src", "default", task))
        expected = ref.process(key, ts, i)
        chan_max[task] = max(chan_max[task], ts)
        expected += ref.advance_watermark(min(chan_max.values()) - lag)
        got = sorted(col.take(), key=repr)
        assert got == as_emitted(expected)
        late_emitted += sum(1 for stream, _ in got if stream == "late")
        assert bolt.current_watermark == max(ref.wm, -math.inf)
    bolt.on_inputs_finished()
    assert sorted(col.take(), key=repr) == as_emitted(ref.finish())
    assert col.watermarks == sorted(set(col.watermarks))  # forwarded monotonically
    assert bolt.late_records == late_emitted
