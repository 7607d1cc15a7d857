"""Watermark generation: bounded out-of-orderness per input channel, with idle channels.

The strategy object (:class:`BoundedOutOfOrderness`) is configuration; the per-task
state lives in :class:`ChannelWatermarks`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from jstormpy.api.errors import TopologyError

NEG_INF = -math.inf


@dataclass(frozen=True)
class BoundedOutOfOrderness:
    """Watermark = (max timestamp seen) − ``max_lag_ms``, per input channel.

    The task's watermark is the minimum over its input channels; a channel that has
    delivered nothing for ``idle_timeout_ms`` of processing time stops holding it back
    until it delivers again. ``None`` disables idleness (a silent channel holds the
    watermark back until its input ends).
    """

    max_lag_ms: float
    idle_timeout_ms: float | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise TopologyError on a negative lag or a non-positive idle timeout."""
        lag = self.max_lag_ms
        if isinstance(lag, bool) or not isinstance(lag, int | float) or not math.isfinite(lag) \
                or lag < 0:
            raise TopologyError(
                f"BoundedOutOfOrderness: max_lag_ms must be a finite number >= 0, got {lag!r}")
        idle = self.idle_timeout_ms
        if idle is not None and (isinstance(idle, bool) or not isinstance(idle, int | float)
                                 or not math.isfinite(idle) or idle <= 0):
            raise TopologyError(
                "BoundedOutOfOrderness: idle_timeout_ms must be None or a finite number > 0, "
                f"got {idle!r}")


class ChannelWatermarks:
    """Per-channel bounded-out-of-orderness watermarks combined by minimum.

    Activity is sampled at processing-time ticks: a channel that delivered a record
    since the previous :meth:`tick` counts as active at that tick's time, so idleness
    is detected within one tick interval and records never read the clock.

    Example:
        >>> w = ChannelWatermarks(max_lag_ms=10, idle_timeout_ms=None, channels=(1, 2))
        >>> w.observe(1, 100), w.current()
        (True, -inf)
        >>> w.observe(2, 50), w.current()
        (True, 40)
    """

    __slots__ = ("_active", "_cur", "_idle", "_idle_timeout", "_last_active", "_lag", "_max")

    def __init__(self, max_lag_ms: float, idle_timeout_ms: float | None,
                 channels: Iterable[Hashable] = ()) -> None:
        self._lag = max_lag_ms
        self._idle_timeout = idle_timeout_ms
        self._max: dict[Hashable, float] = {}
        self._last_active: dict[Hashable, float] = {}
        self._active: set[Hashable] = set()
        self._idle: set[Hashable] = set()
        self._cur: float | None = None
        """Cached :meth:`current` (None: recompute)."""
        self.add_channels(channels)

    def add_channels(self, channels: Iterable[Hashable]) -> None:
        """Declare input channels (a channel that never delivers holds the watermark back)."""
        for ch in channels:
            self._max.setdefault(ch, NEG_INF)
        self._cur = None

    def keep_only(self, channels: Iterable[Hashable]) -> None:
        """Forget every channel not in ``channels`` (input task ids that a rescale
        renamed: a channel that never delivers again must not hold the watermark at its
        old maximum for ever) and declare the rest."""
        wanted = set(channels)
        for ch in [ch for ch in self._max if ch not in wanted]:
            del self._max[ch]
            self._last_active.pop(ch, None)
            self._active.discard(ch)
            self._idle.discard(ch)
        self.add_channels(wanted)

    @property
    def channels(self) -> tuple[Hashable, ...]:
        """Every known channel."""
        return tuple(self._max)

    @property
    def idle_channels(self) -> frozenset[Hashable]:
        """Channels currently considered idle."""
        return frozenset(self._idle)

    def observe(self, channel: Hashable, timestamp: float) -> bool:
        """Record a timestamp seen on ``channel``; True if the channel's maximum rose
        or the channel stopped being idle (i.e. :meth:`current` may have changed)."""
        self._active.add(channel)
        prev = self._max.get(channel, NEG_INF)
        woke = False
        if self._idle and channel in self._idle:
            self._idle.discard(channel)
            woke = True
            self._cur = None
        if timestamp > prev:
            self._max[channel] = timestamp
            cur = self._cur
            if cur is not None and prev - self._lag <= cur:
                self._cur = None  # the channel may have been holding the minimum
            return True
        if channel not in self._max:
            self._max[channel] = prev
            self._cur = None
            return True
        return woke

    def observe_batch(self, channel: Hashable, timestamps: Sequence[float]) -> list[float]:
        """:meth:`observe` each timestamp of one channel in turn; returns the
        :meth:`current` watermark after each one (one list, computed in one pass)."""
        if not timestamps:
            return []
        self.observe(channel, timestamps[0])
        idle = self._idle
        others = [m for ch, m in self._max.items() if ch != channel and ch not in idle]
        floor = min(others) if others else math.inf
        lag = self._lag
        running = accumulate(timestamps, max, initial=self._max[channel])
        next(running)
        wms = [(m if m < floor else floor) - lag for m in running]
        top = max(timestamps)
        self._max[channel] = max(self._max[channel], top)
        self._cur = None
        return wms

    def tick(self, now_ms: float) -> bool:
        """Advance processing time: update activity and idleness; True if the idle set changed."""
        last = self._last_active
        self._cur = None
        for ch in self._active:
            last[ch] = now_ms
        self._active.clear()
        if self._idle_timeout is None:
            return False
        changed = False
        for ch in self._max:
            seen = last.setdefault(ch, now_ms)
            if now_ms - seen >= self._idle_timeout and ch not in self._idle:
                self._idle.add(ch)
                changed = True
        return changed

    def current(self) -> float:
        """Minimum over non-idle channels of ``max_ts − lag``; if every channel is idle,
        the furthest any channel got (nothing holds the watermark back)."""
        cur = self._cur
        if cur is not None:
            return cur
        live = [m for ch, m in self._max.items() if ch not in self._idle]
        if live:
            cur = min(live) - self._lag
        elif self._max:
            cur = max(self._max.values()) - self._lag
        else:
            cur = NEG_INF
        self._cur = cur
        return cur

    def snapshot(self) -> dict[str, Any]:
        """Per-channel maxima (activity is processing-time state and restarts fresh)."""
        return {"max": dict(self._max)}

    def restore(self, snap: dict[str, Any]) -> None:
        """Reload per-channel maxima; every channel counts as active from the next tick."""
        for ch, m in snap["max"].items():
            self._max[ch] = max(m, self._max.get(ch, NEG_INF))
        self._cur = None
        self._last_active.clear()
        self._active.clear()
        self._idle.clear()
