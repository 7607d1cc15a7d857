"""Event-time windows: assigners, watermarks, triggers, lateness, window state.

Example:
    >>> from jstormpy.window import WindowedBolt, TumblingWindows
    >>> class Count(WindowedBolt):
    ...     window = TumblingWindows(size_ms=1000)
    ...     timestamp = "ts"
    ...     def create(self): return 0
    ...     def add(self, acc, tup): return acc + 1
    ...     def result(self, key, window, acc): return acc
    >>> Count.validate_config()
"""

from __future__ import annotations

from jstormpy.window.aggregates import BuiltinAggregate, Count, Max, Mean, Min, Sum
from jstormpy.window.assigners import (
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)
from jstormpy.window.bolt import WindowedBolt
from jstormpy.window.operator import Aggregator, WindowOperator
from jstormpy.window.types import (
    ERROR_FIELDS,
    ERRORS_STREAM,
    FIRING_FIELDS,
    Firing,
    FiringKind,
    FiringRun,
    LateRecord,
    Window,
)
from jstormpy.window.watermarks import BoundedOutOfOrderness, ChannelWatermarks

__all__ = [
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "FIRING_FIELDS",
    "Aggregator",
    "BoundedOutOfOrderness",
    "BuiltinAggregate",
    "Count",
    "ChannelWatermarks",
    "CountWindows",
    "Firing",
    "FiringKind",
    "FiringRun",
    "LateRecord",
    "Max",
    "Mean",
    "Min",
    "SessionWindows",
    "SlidingWindows",
    "Sum",
    "TumblingWindows",
    "Window",
    "WindowAssigner",
    "WindowOperator",
    "WindowedBolt",
]
