"""Window assigners: which windows a record belongs to (configuration objects only).

Every assigner validates itself on construction and raises
:class:`~jstormpy.api.errors.TopologyError` naming the bad value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jstormpy.api.errors import TopologyError


def _check_positive(owner: str, name: str, value: object, *, integer: bool = False) -> None:
    """Raise TopologyError unless ``value`` is a finite positive number (an int if asked)."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an int" if integer else "a number"
        raise TopologyError(f"{owner}: {name} must be {what}, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise TopologyError(f"{owner}: {name} must be > 0 and finite, got {value!r}")


@dataclass(frozen=True)
class TumblingWindows:
    """Fixed, non-overlapping windows ``[k*size, (k+1)*size)`` aligned to epoch 0.

    Example:
        >>> TumblingWindows(size_ms=1000).slide_ms
        1000
    """

    size_ms: float

    def __post_init__(self) -> None:
        self.validate()

    @property
    def slide_ms(self) -> float:
        """Tumbling windows slide by their size."""
        return self.size_ms

    def validate(self) -> None:
        """Raise TopologyError if the size is not a positive number."""
        _check_positive("TumblingWindows", "size_ms", self.size_ms)


@dataclass(frozen=True)
class SlidingWindows:
    """Overlapping windows ``[k*slide, k*slide + size)`` aligned to epoch 0.

    A record belongs to ``ceil(size / slide)`` windows (fewer if ``slide`` does not
    divide ``size``).
    """

    size_ms: float
    slide_ms: float

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise TopologyError on non-positive sizes or a slide larger than the size."""
        _check_positive("SlidingWindows", "size_ms", self.size_ms)
        _check_positive("SlidingWindows", "slide_ms", self.slide_ms)
        if self.slide_ms > self.size_ms:
            raise TopologyError(
                f"SlidingWindows: slide_ms ({self.slide_ms}) must not exceed size_ms "
                f"({self.size_ms}); records between windows would be lost")


@dataclass(frozen=True)
class SessionWindows:
    """Per-key sessions: each record opens ``[ts, ts + gap)``; windows that overlap or
    touch are merged (as in Flink), so records at most ``gap_ms`` apart share a session."""

    gap_ms: float

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise TopologyError if the gap is not a positive number."""
        _check_positive("SessionWindows", "gap_ms", self.gap_ms)


@dataclass(frozen=True)
class CountWindows:
    """Per-key count windows: every ``slide`` elements (default ``size``), fire over the
    last ``size`` elements of that key. Time plays no role.

    Windows are reported with element positions: after the n-th element of a key the
    window is ``[max(0, n - size), n)``.
    """

    size: int
    slide: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    @property
    def step(self) -> int:
        """The effective slide (``size`` when ``slide`` is None)."""
        return self.size if self.slide is None else self.slide

    def validate(self) -> None:
        """Raise TopologyError on non-positive counts or a slide larger than the size."""
        _check_positive("CountWindows", "size", self.size, integer=True)
        if self.slide is not None:
            _check_positive("CountWindows", "slide", self.slide, integer=True)
            if self.slide > self.size:
                raise TopologyError(
                    f"CountWindows: slide ({self.slide}) must not exceed size ({self.size})")


WindowAssigner = TumblingWindows | SlidingWindows | SessionWindows | CountWindows
"""Any of the supported window assigners."""
