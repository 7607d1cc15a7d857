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


class Sessions(KeyedProcessFunction):
    """q11's session windows as a keyed process function (state and event-time timers).

    PyFlink 2.3's Python session-window operator (``EventTimeSessionWindows``) fails
    every checkpoint (``ClassCastException: VoidNamespace cannot be cast to TimeWindow``),
    so with checkpoints on the job restarts forever. This keeps Flink's semantics: a
    record opens ``[t, t + gap)`` and merges every session it touches (ends inclusive);
    a session is emitted when the watermark reaches its end - 1, as Flink fires it.
    State: the key's open sessions ``[[start, last, count], ...]``.
    """

    def __init__(self, gap_ms: int) -> None:
        self.gap = gap_ms

    def open(self, runtime_context: Any) -> None:
        self.sessions = runtime_context.get_state(
            ValueStateDescriptor("sessions", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        t, gap = value["dateTime"], self.gap
        start, last, count = t, t, 1
        kept = []
        for s in self.sessions.value() or []:
            if s[0] <= last + gap and start <= s[1] + gap:  # touching: merge
                start, last, count = min(start, s[0]), max(last, s[1]), count + s[2]
            else:
                kept.append(s)
        kept.append([start, last, count])
        self.sessions.update(kept)
        ctx.timer_service().register_event_time_timer(last + gap - 1)
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        gap, kept = self.gap, []
        for s in self.sessions.value() or []:
            if s[1] + gap - 1 <= timestamp:
                yield Q.q11_row(ctx.get_current_key(), s[2], s[0], s[1] + gap)
            else:
                kept.append(s)
        if kept:
            self.sessions.update(kept)
        else:
            self.sessions.clear()
