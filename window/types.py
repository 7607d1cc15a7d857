"""Value types shared by the window operator, the bolt and the reference implementation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

FiringKind = Literal["early", "on_time", "late"]
"""Why a window fired: a partial result, the watermark passed its end, or a late update."""

FIRING_FIELDS: Final[tuple[str, ...]] = ("key", "window_start", "window_end", "result", "kind")
"""Fields of the default stream of a :class:`~jstormpy.window.WindowedBolt`."""

ERROR_FIELDS: Final[tuple[str, ...]] = ("reason", "values")
"""Fields of the ``errors`` stream of a :class:`~jstormpy.window.WindowedBolt`."""

ERRORS_STREAM: Final[str] = "errors"
"""Stream on which a WindowedBolt reports tuples it could not window (bad timestamp, key)."""


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open window ``[start, end)``.

    For count windows, ``start``/``end`` are element positions (0-based, per key).
    """

    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Firing:
    """One result of one window, emitted as ``(key, window_start, window_end, result, kind)``."""

    key: Any
    window_start: float
    window_end: float
    result: Any
    kind: FiringKind

    def as_values(self) -> tuple[Any, Any, Any, Any, str]:
        """The firing as the values of a default-stream tuple (see ``FIRING_FIELDS``)."""
        return (self.key, self.window_start, self.window_end, self.result, self.kind)


@dataclass(frozen=True, slots=True)
class LateRecord:
    """A record that arrived after every window it belongs to was purged.

    ``record`` is the record exactly as it was given to ``process`` (for the bolt, the
    input ``Tuple``), so it can be re-emitted with its original values.
    """

    key: Any
    timestamp: float
    record: Any
