"""Validation of a WindowedBolt's class-level (or instance-level) configuration."""

from __future__ import annotations

import math
from typing import Any

from jstormpy.api.errors import TopologyError
from jstormpy.window.aggregates import BuiltinAggregate
from jstormpy.window.assigners import (
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)
from jstormpy.window.types import ERRORS_STREAM
from jstormpy.window.watermarks import BoundedOutOfOrderness

TIME_MODES = ("event", "ingestion", "processing")
DEFAULT_STREAM = "default"
WATERMARK_TICK_MS = 200.0
"""Periodic watermark forwarding / idleness check interval (Flink's auto-watermark default)."""
PROCESSING_TICK_MS = 100.0
"""Upper bound of the tick for processing/ingestion time (window close latency)."""
MIN_TICK_MS = 10.0


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) \
        and math.isfinite(value)


def _positive(value: object) -> float | None:
    """``value`` if it is a finite number > 0, else None."""
    if _is_number(value) and value > 0:  # type: ignore[operator]
        return float(value)  # type: ignore[arg-type]
    return None


def validate_window_config(src: Any, name: str) -> None:
    """Raise TopologyError naming the first bad setting of ``src`` (a class or instance)."""
    window = getattr(src, "window", None)
    if not isinstance(window, TumblingWindows | SlidingWindows | SessionWindows
                      | CountWindows):
        raise TopologyError(
            f"{name}.window must be TumblingWindows, SlidingWindows, SessionWindows or "
            f"CountWindows, got {window!r}")
    window.validate()
    time = getattr(src, "time", "event")
    if time not in TIME_MODES:
        raise TopologyError(f"{name}.time must be one of {TIME_MODES}, got {time!r}")
    ts = getattr(src, "timestamp", None)
    if time == "event" and not isinstance(window, CountWindows):
        if not (isinstance(ts, str) and ts) and not callable(ts):
            raise TopologyError(
                f"{name}: event time needs a timestamp: set timestamp = 'field' (epoch ms) "
                f"or override timestamp(self, tup); got {ts!r}")
    key = getattr(src, "key", None)
    if key is not None and not (isinstance(key, str) and key) and not (
            isinstance(key, tuple | list) and key and all(isinstance(k, str) for k in key)):
        raise TopologyError(
            f"{name}.key must be None, a field name or a tuple of field names, got {key!r}")
    lateness = getattr(src, "allowed_lateness_ms", 0)
    if not _is_number(lateness) or lateness < 0:
        raise TopologyError(
            f"{name}.allowed_lateness_ms must be a finite number >= 0, got {lateness!r}")
    early_ms = getattr(src, "early_fire_every_ms", None)
    if early_ms is not None and (not _is_number(early_ms) or early_ms <= 0):
        raise TopologyError(
            f"{name}.early_fire_every_ms must be None or a number > 0, got {early_ms!r}")
    early_n = getattr(src, "early_fire_every_n", None)
    if early_n is not None and (isinstance(early_n, bool) or not isinstance(early_n, int)
                                or early_n < 1):
        raise TopologyError(
            f"{name}.early_fire_every_n must be None or an int >= 1, got {early_n!r}")
    if isinstance(window, CountWindows) and (early_ms is not None or early_n is not None):
        raise TopologyError(f"{name}: CountWindows do not support early firing")
    idle = getattr(src, "idle_timeout_ms", None)
    if idle is not None and (not _is_number(idle) or idle <= 0):
        raise TopologyError(
            f"{name}.idle_timeout_ms must be None or a number > 0, got {idle!r}")
    wm = getattr(src, "watermark", None)
    if wm is not None:
        if not isinstance(wm, BoundedOutOfOrderness):
            raise TopologyError(
                f"{name}.watermark must be None or BoundedOutOfOrderness(...), got {wm!r}")
        wm.validate()
        if time == "processing":
            raise TopologyError(
                f"{name}: a watermark strategy has no meaning with time='processing'")
    late = getattr(src, "late_stream", "late")
    if not isinstance(late, str) or not late or late in (DEFAULT_STREAM, ERRORS_STREAM):
        raise TopologyError(
            f"{name}.late_stream must be a stream name other than 'default' and 'errors', "
            f"got {late!r}")
    aggregate = getattr(src, "aggregate", None)
    if aggregate is not None:
        if not isinstance(aggregate, BuiltinAggregate):
            raise TopologyError(
                f"{name}.aggregate must be None or a built-in aggregate (Count(), Sum(f), "
                f"Min(f), Max(f), Mean(f)), got {aggregate!r}")
        return  # create/add/merge/result come from the aggregate
    for method in ("create", "add", "result"):
        if not callable(getattr(src, method, None)):
            raise TopologyError(f"{name} must implement {method}()")
    merges = isinstance(window, SessionWindows) or (
        isinstance(window, CountWindows) and window.step != window.size)
    if merges and not callable(getattr(src, "merge", None)):
        raise TopologyError(
            f"{name} must implement merge(a, b): {type(window).__name__} combines accumulators")


def default_tick_interval(src: Any) -> float | None:
    """The ``tick_interval_ms`` a WindowedBolt needs, or None if it needs no ticks.

    The minimum of: half of ``early_fire_every_ms`` (early rounds start at most half an
    interval late); a quarter of the idle timeout (idleness detected within 25 %);
    200 ms with a watermark strategy (periodic downstream watermark forwarding, as
    Flink's auto-watermark interval); for processing/ingestion time,
    min(100 ms, the window's slide or gap) (windows close at most that late).
    Never below 10 ms.
    """
    window = getattr(src, "window", None)
    if isinstance(window, CountWindows):
        return None
    candidates: list[float] = []
    early_ms = _positive(getattr(src, "early_fire_every_ms", None))
    if early_ms is not None:
        candidates.append(early_ms / 2)
    wm = getattr(src, "watermark", None)
    idle = getattr(src, "idle_timeout_ms", None)
    if idle is None and isinstance(wm, BoundedOutOfOrderness):
        idle = wm.idle_timeout_ms
    idle = _positive(idle)
    if idle is not None:
        candidates.append(idle / 4)
    if isinstance(wm, BoundedOutOfOrderness):
        candidates.append(WATERMARK_TICK_MS)
    if getattr(src, "time", "event") in ("processing", "ingestion"):
        grain = PROCESSING_TICK_MS
        if isinstance(window, SessionWindows):
            grain = min(grain, window.gap_ms)
        elif isinstance(window, TumblingWindows | SlidingWindows):
            grain = min(grain, window.slide_ms)
        candidates.append(grain)
    if not candidates:
        return None
    return max(MIN_TICK_MS, float(min(candidates)))
