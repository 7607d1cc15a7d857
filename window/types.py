"""Value types shared by the window operator, the bolt and the reference implementation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

FiringKind = Literal["early", "on_time", "late"]
"""Why a window fired: a partial result, the watermark passed its end, or a late update."""

FIRING_FIELDS: Final[tuple[str, ...]] = ("key", "window_start", "window_end", "result", "kind")
"""Fields of the default stream of a :class:`~jstormpy.window.WindowedBolt`."""

ERROR_FIELDS: Final[tuple[str, ...]] = ("reason", "values")
"""Fields of the ``errors`` stream of a :class:`~jstormpy.window.WindowedBolt`."""

ERRORS_STREAM: Final[str] = "errors"
"""Stream on which a WindowedBolt reports tuples it could not window (bad timestamp, key)."""


class Window(NamedTuple):
    """A half-open window ``[start, end)`` (immutable).

    For count windows, ``start``/``end`` are element positions (0-based, per key).
    A NamedTuple rather than a frozen dataclass: one is built per firing, and a frozen
    dataclass costs ~3x more to construct.
    """

    start: float
    end: float


class Firing(NamedTuple):
    """One result of one window (immutable).

    Its values are exactly the default-stream tuple ``(key, window_start, window_end,
    result, kind)``, so the bolt emits it as is. A NamedTuple rather than a frozen
    dataclass for speed (one per firing; frozen dataclasses are ~3x slower to build).
    """

    key: Any
    window_start: float
    window_end: float
    result: Any
    kind: FiringKind

    def as_values(self) -> tuple[Any, Any, Any, Any, str]:
        """The firing as the values of a default-stream tuple (see ``FIRING_FIELDS``)."""
        return (self.key, self.window_start, self.window_end, self.result, self.kind)


class FiringRun(NamedTuple):
    """The on-time firings of one window end for many keys, column by column.

    What sliced windows return from ``WindowOperator.process_batch(..., columnar=True)``
    instead of one :class:`Firing` per key: the batch path emits it with one
    ``emit_batch`` and builds no per-firing object.
    """

    window_start: float
    window_end: float
    keys: list[Any]
    results: list[Any]
    kind: FiringKind

    def firings(self) -> list[Firing]:
        """The same firings, one :class:`Firing` per key (in key order)."""
        start, end, kind = self.window_start, self.window_end, self.kind
        return [Firing(key, start, end, res, kind)
                for key, res in zip(self.keys, self.results, strict=True)]

    def columns(self) -> list[list[Any]]:
        """The default-stream columns ``(key, window_start, window_end, result, kind)``."""
        n = len(self.keys)
        return [self.keys, [self.window_start] * n, [self.window_end] * n, self.results,
                [self.kind] * n]


@dataclass(frozen=True, slots=True)
class LateRecord:
    """A record that arrived after every window it belongs to was purged.

    ``record`` is the record exactly as it was given to ``process`` (for the bolt, the
    input ``Tuple``), so it can be re-emitted with its original values.
    """

    key: Any
    timestamp: float
    record: Any
