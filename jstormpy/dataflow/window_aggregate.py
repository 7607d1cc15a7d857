"""``KeyedStream.window(...).aggregate(agg)``: the window adapter, a
:class:`~jstormpy.window.WindowedBolt` over the dataflow's items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jstormpy.api.component import Tuple
from jstormpy.api.errors import TopologyError
from jstormpy.dataflow.event_time import watermark_lag
from jstormpy.dataflow.records import (
    KEY_FIELD,
)
from jstormpy.window import (
    BoundedOutOfOrderness,
    CountWindows,
    WindowAssigner,
    WindowedBolt,
)
from jstormpy.window.config import default_tick_interval, validate_window_config


class WindowAggregateBolt(WindowedBolt):
    """``KeyedStream.window(...).aggregate(agg)``: a WindowedBolt over the items.

    Keyed on the hidden key field, timestamps from the user's function on the item,
    watermarks per input channel with the given out-of-orderness; ``agg`` (a builtin
    such as ``Count()`` or any create/add/merge/result aggregator) sees the items.
    Firings leave on the default stream (read downstream as WindowResult), records
    beyond the allowed lateness on ``"late"`` (``.late()``). State: the WindowedBolt's
    own snapshot (accumulators, timers, watermarks).
    """

    late_stream = "late"

    def __init__(self, window: WindowAssigner, timestamp_fn: Callable[[Any], float] | None,
                 aggregator: Any, out_of_orderness_ms: float = 0,
                 allowed_lateness_ms: float = 0, early_fire_ms: float | None = None,
                 time: str = "event") -> None:
        self.window = window  # type: ignore[misc]
        self.key = KEY_FIELD  # type: ignore[misc]
        self.df_timestamp = timestamp_fn
        self.df_aggregator = aggregator
        if time not in ("event", "processing"):
            raise TopologyError(f"KeyedStream.window(time={time!r}): use 'event' (timestamps "
                                "from timestamp=f) or 'processing' (the operator's clock)")
        if time == "processing":
            if timestamp_fn is not None:
                raise TopologyError("KeyedStream.window(time='processing') takes no "
                                    "timestamp=f: windows follow the operator's clock")
            self.time = "processing"  # type: ignore[misc]
        elif not isinstance(window, CountWindows):
            self.watermark = BoundedOutOfOrderness(  # type: ignore[misc]
                max_lag_ms=watermark_lag(out_of_orderness_ms))
        self.allowed_lateness_ms = allowed_lateness_ms  # type: ignore[misc]
        self.early_fire_every_ms = early_fire_ms  # type: ignore[misc]
        for method in ("create", "add", "result"):
            if not callable(getattr(aggregator, method, None)):
                raise TopologyError(
                    f"window aggregate {aggregator!r} has no {method}(): pass a builtin "
                    "(Count(), Sum('field'), Max('field'), ...) or an object with "
                    "create/add/merge/result")
        if (time == "event" and not isinstance(window, CountWindows)
                and not callable(timestamp_fn)):
            raise TopologyError("KeyedStream.window(...) needs timestamp=f: a function "
                                "from an item to its event time in epoch ms")
        self.tick_interval_ms = default_tick_interval(self)  # type: ignore[misc]

    def validate_config(self) -> None:  # type: ignore[override]
        """Raise TopologyError naming the first bad window setting."""
        validate_window_config(self, "window")

    def timestamp(self, tup: Tuple) -> float:  # type: ignore[override]
        """The item's event time."""
        return self.df_timestamp(tup.values[-1])  # type: ignore[misc]

    def create(self) -> Any:
        """The aggregator's empty accumulator."""
        return self.df_aggregator.create()

    def add(self, acc: Any, tup: Tuple) -> Any:
        """The item added to ``acc``."""
        return self.df_aggregator.add(acc, tup.values[-1])

    def merge(self, a: Any, b: Any) -> Any:
        """Two accumulators merged (session windows)."""
        merge = getattr(self.df_aggregator, "merge", None)
        if merge is None:
            raise TopologyError(f"window aggregate {self.df_aggregator!r} needs merge(a, b) "
                                f"for {type(self.window).__name__}")
        return merge(a, b)

    def result(self, key: Any, window: Any, acc: Any) -> Any:
        """The aggregator's value for one window."""
        return self.df_aggregator.result(key, window, acc)


__all__ = ["WindowAggregateBolt"]
