"""Event time in the dataflow operators: how far a watermark trails the newest
timestamp, reading an item's time, and checking the time settings of an operator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from jstormpy.api.errors import TopologyError


def watermark_lag(out_of_orderness_ms: float) -> float:
    """How far the watermark trails the newest timestamp: ``out_of_orderness_ms + 1``.

    As in Flink's bounded-out-of-orderness watermarks (``max - bound - 1``): a record at
    most ``out_of_orderness_ms`` behind the newest one is on time, equal timestamps
    included (with ``max - bound``, the default bound 0 would make every record that
    shares the newest timestamp late).
    """
    return out_of_orderness_ms + 1


def event_time(fn: Callable[[Any], Any], item: Any) -> float | None:
    """``fn(item)`` if it is a finite number, else None (the function raised or returned
    something else): such an item cannot be placed in time.

    Example:
        >>> event_time(lambda r: r["ts"], {"ts": 5}), event_time(lambda r: r["ts"], {})
        (5, None)
    """
    try:
        ts = fn(item)
    except Exception:  # user code on bad data: counted by the caller, never a crash loop
        return None
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        return None
    return ts


def check_ms(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise TopologyError(f"{name} must be a finite number >= 0, got {value!r}")


def check_timestamps(timestamps: Any) -> tuple[Callable[[Any], float], Callable[[Any], float]]:
    if not (isinstance(timestamps, tuple) and len(timestamps) == 2
            and all(callable(f) for f in timestamps)):
        raise TopologyError("a join needs timestamp=(f_left, f_right): two functions from "
                            f"an item to its event time in epoch ms, got {timestamps!r}")
    return timestamps[0], timestamps[1]


__all__ = ["check_ms", "check_timestamps", "event_time", "watermark_lag"]
