"""Shared test helpers: aggregators, a list collector, stream generators, drivers."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from jstormpy.api.batch import rows_from_columns
from jstormpy.api.component import TopologyContext, Tuple, bind_task
from jstormpy.window import (
    FIRING_FIELDS,
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)

SENSOR_INDEX = {"sensor": 0, "ts": 1, "temp": 2}


class SetAgg:
    """Accumulates the exact set of records: the strongest possible result check."""

    def create(self) -> frozenset:
        return frozenset()

    def add(self, acc: frozenset, rec: Any) -> frozenset:
        return acc | {rec}

    def merge(self, a: frozenset, b: frozenset) -> frozenset:
        return a | b

    def result(self, key: Any, window: Any, acc: frozenset) -> tuple:
        return tuple(sorted(acc))


class CountAgg:
    def create(self) -> int:
        return 0

    def add(self, acc: int, rec: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


@dataclass
class ListCollector:
    """Stands in for the engine's collector."""

    emitted: list[tuple[str, tuple]] = field(default_factory=list)
    watermarks: list[float] = field(default_factory=list)

    def emit(self, values: Any, stream: str = "default") -> None:
        self.emitted.append((stream, tuple(values)))

    def emit_direct(self, task: int, values: Any, stream: str = "default") -> None:
        self.emitted.append((stream, tuple(values)))

    def emit_batch(self, columns: Any, stream: str = "default") -> None:
        fields = FIRING_FIELDS if stream == "default" else tuple(range(len(columns)))
        for row in rows_from_columns(columns, fields, "w", stream):  # type: ignore[arg-type]
            self.emitted.append((stream, tuple(row)))

    def emit_watermark(self, watermark_ms: float) -> None:
        self.watermarks.append(watermark_ms)

    def stream(self, name: str) -> list[tuple]:
        return [v for s, v in self.emitted if s == name]

    def take(self) -> list[tuple[str, tuple]]:
        out, self.emitted = self.emitted, []
        return out


def sensor(sensor_id: Any, ts: Any, temp: Any = 20.0, task: int = 1) -> Tuple:
    return Tuple((sensor_id, ts, temp), SENSOR_INDEX, "src", "default", task)


def context(input_tasks: tuple[int, ...] = (1,)) -> TopologyContext:
    return TopologyContext(topology="t", component="w", task_id=9, task_index=0,
                           worker_id=0, input_tasks=input_tasks)


def attach(bolt: Any, input_tasks: tuple[int, ...] = (1,)) -> ListCollector:
    col = ListCollector()
    bind_task(bolt, col, None)
    bolt.prepare({}, context(input_tasks))
    return col


def canon(results: list[Any]) -> list[str]:
    """Order-insensitive form of one call's results."""
    return sorted(map(repr, results))


# tumbling and sliding windows (those that slice-major state aggregates per slice)
aligned = st.one_of(
    st.integers(1, 20).map(TumblingWindows),
    st.integers(1, 20).flatmap(
        lambda size: st.integers(1, size).map(lambda slide: SlidingWindows(size, slide))))
time_assigners = st.one_of(aligned, st.integers(1, 15).map(SessionWindows))
count_assigners = st.integers(1, 6).flatmap(
    lambda size: st.one_of(st.none(), st.integers(1, size)).map(
        lambda slide: CountWindows(size, slide)))

# one event: (advance of the stream's clock, out-of-orderness, key, action)
event_st = st.tuples(st.integers(0, 6), st.integers(0, 40), st.integers(0, 3),
                     st.sampled_from(["none", "none", "wm", "tick", "jump"]))


def expand(raw: list[tuple[int, int, int, str]], lag: int) -> list[tuple]:
    """Turn raw draws into driver calls: ("rec", key, ts, rec) / ("wm", wm) / ("tick", now)."""
    calls: list[tuple] = []
    clock = 0
    max_ts = -(10**9)
    now = 0
    for i, (step, jitter, key, action) in enumerate(raw):
        clock += step
        ts = clock - jitter
        max_ts = max(max_ts, ts)
        calls.append(("rec", key, ts, (i, key, ts)))
        if action == "wm":
            calls.append(("wm", max_ts - lag))
        elif action == "jump":
            calls.append(("wm", max_ts + jitter))
        elif action == "tick":
            now += step + 1
            calls.append(("tick", now))
    return calls


def drive(target: Any, calls: list[tuple]) -> list[list[Any]]:
    """Apply calls to an operator (or reference); one result list per call."""
    out = []
    for call in calls:
        if call[0] == "rec":
            out.append(target.process(call[1], call[2], call[3]))
        elif call[0] == "wm":
            out.append(target.advance_watermark(call[1]))
        elif hasattr(target, "on_processing_time"):
            out.append(target.on_processing_time(call[1]))
        else:
            out.append([])
    return out


class CopyingStore(dict):  # type: ignore[type-arg]
    """A window store that, like the RocksDB one, hands out copies: each value is kept
    pickled, so a window change that is not written back is lost (as it would be)."""

    def __getitem__(self, key: Any) -> Any:
        return pickle.loads(super().__getitem__(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, pickle.dumps(value))

    def values(self) -> Any:  # type: ignore[override]
        return [self[k] for k in self]

    def items(self) -> Any:  # type: ignore[override]
        return [(k, self[k]) for k in self]


def make_operator(assigner: Any, agg: Any, mode: Any = None, store: Any = None,
                  **kwargs: Any) -> Any:
    """A WindowOperator; ``mode``: the ``slicing`` argument, or "stored" for windows kept
    in ``store`` (a fresh :class:`CopyingStore` if None)."""
    from jstormpy.window import WindowOperator
    if mode == "stored":
        op = WindowOperator(assigner, agg, stored=True, **kwargs)
        if op.stored:
            op.bind_store(CopyingStore() if store is None else store)
        return op
    return WindowOperator(assigner, agg, slicing=mode, **kwargs)


@contextlib.contextmanager
def scan_from(due: int) -> Iterator[None]:
    """Stored windows read the store in one scan from ``due`` due timers (for a while)."""
    from jstormpy.window import stored
    old = stored.SCAN_MIN_DUE
    stored.SCAN_MIN_DUE = due
    try:
        yield
    finally:
        stored.SCAN_MIN_DUE = old
