"""PyFlink functions of the Nexmark queries (used by ``engine_pyflink.py``).

They live in an importable module so that PyFlink's workers import them by name, with
``bench.nexmark.queries`` on their path, rather than unpickling copies.
"""

from __future__ import annotations

from typing import Any

from pyflink.common import Types
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.functions import AggregateFunction, ProcessWindowFunction
from pyflink.datastream.state import ValueStateDescriptor

from bench.nexmark import queries as Q


class EventTime(TimestampAssigner):
    """An event's ``dateTime``."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value["dateTime"]  # type: ignore[no-any-return]


class ItemTime(TimestampAssigner):
    """q7's expanded items ``(ts, bid, edge)``: ``ts``."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value[0]  # type: ignore[no-any-return]


class Step(KeyedProcessFunction):
    """A keyed state machine of bench.nexmark.queries, its state in one ValueState."""

    def __init__(self, step: Any) -> None:
        self.step = step

    def open(self, runtime_context: Any) -> None:
        self.state = runtime_context.get_state(
            ValueStateDescriptor("s", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        state, out = self.step(self.state.value(), value)
        self.state.update(state)
        if isinstance(out, list):
            yield from out
        elif out is not None:
            yield out


class Fold(AggregateFunction):
    """A create/add/merge aggregate of bench.nexmark.queries as Flink's."""

    def __init__(self, agg: Any) -> None:
        self.agg = agg

    def create_accumulator(self) -> Any:
        return self.agg.create()

    def add(self, value: Any, accumulator: Any) -> Any:
        return self.agg.add(accumulator, value)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return self.agg.merge(a, b)


class CountAgg:
    """Count the items."""

    def create(self) -> int:
        return 0

    def add(self, acc: int, _item: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b


class WithWindow(ProcessWindowFunction):
    """``(key, value, window start, window end)`` of an aggregated window."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        w = context.window()
        for value in elements:
            yield (key, value, w.start, w.end)


class NewUsers(ProcessWindowFunction):
    """q8: the persons of a window (keyed by person id) who opened an auction in it."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        people, sells = [], False
        for e in elements:
            if e["type"] == "person":
                people.append(e)
            else:
                sells = True
        if sells:
            start = context.window().start
            for p in people:
                yield {"id": p["id"], "name": p["name"], "starttime": start}


class Q7Stage2(Q.Q7Merge):
    """q7's second stage over ``(key, acc, start, end)`` from the first."""

    def add(self, acc: Any, item: Any) -> Any:
        return self.merge(acc, item[1])
