"""Drive compiled dataflow bolts without processes: Tuples in, emitted tuples collected."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.batch import rows_from_columns
from jstormpy.api.component import TopologyContext, Tuple, bind_task
from jstormpy.dataflow.records import ITEM_FIELDS, KEYED_FIELDS
from jstormpy.window import FIRING_FIELDS


@dataclass
class Collector:
    """Stands in for the engine's collector."""

    emitted: list[tuple[str, tuple]] = field(default_factory=list)
    watermarks: list[float] = field(default_factory=list)

    def emit(self, values: Any, stream: str = "default") -> None:
        self.emitted.append((stream, tuple(values)))

    def emit_batch(self, columns: Any, stream: str = "default") -> None:
        # a window's firings (5 columns), else a chain's items (1 or 2 columns)
        fields = FIRING_FIELDS if stream == "default" and len(columns) == len(FIRING_FIELDS) \
            else tuple(range(len(columns)))
        for row in rows_from_columns(columns, fields, "w", stream):  # type: ignore[arg-type]
            self.emitted.append((stream, tuple(row)))

    def emit_watermark(self, watermark_ms: float) -> None:
        self.watermarks.append(watermark_ms)

    def stream(self, name: str = "default") -> list[tuple]:
        return [v for s, v in self.emitted if s == name]


def prepare(bolt: Any, input_tasks: Sequence[int] = (1,), component: str = "op") -> Collector:
    """Attach a collector and call prepare as the engine would."""
    col = Collector()
    bind_task(bolt, col, None)
    ctx = TopologyContext("t", component, 10, 0, 0, {component: (10,)}, tuple(input_tasks))
    bolt.prepare({}, ctx)
    return col


def item_tuple(item: Any, source: str = "up", task: int = 1) -> Tuple:
    return Tuple((item,), {f: i for i, f in enumerate(ITEM_FIELDS)}, source, "default", task)


def keyed_tuple(key: Any, item: Any, source: str = "up", task: int = 1) -> Tuple:
    return Tuple((key, item), {f: i for i, f in enumerate(KEYED_FIELDS)}, source, "default",
                 task)


def bounded_shuffle(events: Iterable[Any], ts_of: Any, lag: int, rng: random.Random) -> list:
    """``events`` in an arrival order out of order by at most ``lag``: sorted by
    timestamp plus a jitter in ``[0, lag]``, so every event is at most ``lag`` behind the
    newest one when it arrives (on time for ``out_of_orderness_ms=lag``)."""
    keyed = [(ts_of(e) + rng.randint(0, lag), i, e) for i, e in enumerate(events)]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [e for _, _, e in keyed]


def raw_tuple(values: Sequence[Any], fields: Sequence[str] = ("key", "seq", "value"),
              source: str = "src", task: int = 1) -> Tuple:
    """A spout's own tuple (the dataflow item is ``{field: value}``)."""
    return Tuple(tuple(values), {f: i for i, f in enumerate(fields)}, source, "default", task)
