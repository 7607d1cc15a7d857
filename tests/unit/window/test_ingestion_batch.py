"""Ingestion-time windows fed whole channel batches: ``execute_batch`` reads the clock once
per batch and must emit exactly what ``execute`` emits per tuple for the same clock
readings (the engine calls ``execute_batch`` for every WindowedBolt, so this is the path
per-tuple user code such as the peer harness's ``FinalCount`` takes)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.window import SessionWindows, SlidingWindows, TumblingWindows, WindowedBolt

from .helpers import attach

INDEX = {"sensor": 0, "temp": 1}

assigners = st.one_of(
    st.integers(1, 20).map(TumblingWindows),
    st.integers(1, 20).flatmap(
        lambda size: st.integers(1, size).map(lambda slide: SlidingWindows(size, slide))),
    st.integers(1, 10).map(SessionWindows))


def make_bolt(assigner: Any, key: Any, early_n: int | None, clock: list[float],
              keep: bool = False) -> WindowedBolt:
    class Arrivals(WindowedBolt):
        window = assigner
        time = "ingestion"

        def create(self) -> tuple:
            return ()

        def add(self, acc: tuple, tup: Tuple) -> tuple:
            # every record in arrival order; ``keep``: the Tuple itself, so an engine
            # that reused a Tuple the user kept would change what it holds
            return (*acc, tup if keep else tup["temp"])

        def merge(self, a: tuple, b: tuple) -> tuple:
            return a + b

        def result(self, k: Any, window: Any, acc: tuple) -> tuple:
            return tuple(t["temp"] for t in acc) if keep else acc

        def now_ms(self) -> float:
            return clock[0]

    Arrivals.key = key
    Arrivals.early_fire_every_n = early_n
    return Arrivals()


@settings(max_examples=150, deadline=None)
@given(assigner=assigners, key=st.sampled_from(["sensor", ("sensor",), None]),
       early_n=st.sampled_from([None, 2]), keep=st.booleans(),
       batches=st.lists(st.tuples(st.integers(-3, 15), st.lists(st.tuples(
           st.integers(0, 3), st.booleans()), max_size=10)), max_size=10))
# an early firing in a later batch forwards the watermark an earlier batch reached
@example(assigner=TumblingWindows(1), key="sensor", early_n=2, keep=False,
         batches=[(0, [(0, False)]), (0, [(0, False)])])
# a whole batch in one slice: the rows after the first are added without a Tuple each
@example(assigner=TumblingWindows(10), key="sensor", early_n=None, keep=True,
         batches=[(0, [(0, False), (1, False), (0, False), (2, False)]),
                  (20, [(1, False), (1, False)])])
def test_ingestion_execute_batch_emits_what_execute_emits(assigner, key, early_n, keep,
                                                          batches) -> None:
    clock = [100.0]
    per_tuple = make_bolt(assigner, key, early_n, clock, keep)
    batched = make_bolt(assigner, key, early_n, clock, keep)
    col_t, col_b = attach(per_tuple), attach(batched)
    n = 0
    for step, rows in batches:
        clock[0] += step  # may go back: stamps never fall behind the watermark
        values = []
        for k, short in rows:
            values.append((k, n) if not short or key is None else ())
            n += 1
        for v in values:
            per_tuple.execute(Tuple(v, INDEX, "src", "default", 1))
        batched.execute_batch(Batch(values, INDEX, "src", "default", 1))
        assert col_b.take() == col_t.take()
        assert batched.current_watermark == per_tuple.current_watermark
        assert col_b.watermarks == col_t.watermarks
    per_tuple.on_inputs_finished()
    batched.on_inputs_finished()
    assert col_b.take() == col_t.take()
    assert batched.error_records == per_tuple.error_records
    assert col_b.watermarks[-1] == col_t.watermarks[-1] == math.inf


def test_final_count_of_a_stream_fed_by_batches() -> None:
    """The peer harness's shape: one window that fires at the end of the input."""
    clock = [5.0]
    bolt = make_bolt(TumblingWindows(2 ** 62), "sensor", None, clock)
    col = attach(bolt)
    words = [("a", 0), ("b", 1), ("a", 2)]
    bolt.execute_batch(Batch(words, INDEX, "src", "default", 1))
    clock[0] = 6.0
    bolt.execute_batch(Batch([("a", 3)], INDEX, "src", "default", 1))
    assert col.take() == []
    bolt.on_inputs_finished()
    assert sorted((row[0], row[3]) for _, row in col.take()) == [("a", (0, 2, 3)), ("b", (1,))]
