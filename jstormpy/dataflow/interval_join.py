"""``KeyedStream.interval_join(other, lower_ms, upper_ms)``: both sides buffered
in managed state keyed by the key, each record for as long as a partner can still come.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import TopologyError
from jstormpy.dataflow.event_time import check_ms, check_timestamps, event_time, watermark_lag
from jstormpy.dataflow.fusion import InputKey, Step
from jstormpy.dataflow.join_clock import JoinClock
from jstormpy.dataflow.joins import JoinBolt
from jstormpy.dataflow.results import JoinResult

_INF = math.inf


class IntervalJoinBolt(JoinBolt):
    """``KeyedStream.interval_join(other, lower_ms, upper_ms)``: pairs of one key with
    ``lower_ms <= t_right - t_left <= upper_ms``, emitted when the second one arrives.

    State: managed dict ``"interval_join"``, key -> ``[[(t, left), ...], [(t, right),
    ...]]``. A left stays while ``t + upper_ms`` is above the watermark, a right while
    ``t - lower_ms`` is (no future record can pair with it after that). Records at or
    below the watermark are late: counted in :attr:`late_records` and dropped.
    """

    def __init__(self, sides: Mapping[InputKey, int], lower_ms: float, upper_ms: float,
                 timestamps: tuple[Callable[[Any], float], Callable[[Any], float]],
                 out_of_orderness_ms: float = 0, steps: Sequence[Step] = ()) -> None:
        super().__init__(sides, steps)
        for name, value in (("lower_ms", lower_ms), ("upper_ms", upper_ms)):
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value):
                raise TopologyError(f"interval_join {name} must be a finite number, "
                                    f"got {value!r}")
        if lower_ms > upper_ms:
            raise TopologyError(f"interval_join needs lower_ms <= upper_ms, got "
                                f"{lower_ms} > {upper_ms}")
        check_ms("out_of_orderness_ms", out_of_orderness_ms)
        self.sides = dict(sides)
        self.lower = lower_ms
        self.upper = upper_ms
        self.timestamps = check_timestamps(timestamps)
        self.lag = out_of_orderness_ms
        self.error_records = 0
        """Items whose timestamp function raised or gave no finite number (dropped)."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the buffers (restored after a rollback or rescale) and rebuild timers."""
        super().prepare(conf, context)
        self._df_buf = self.state("interval_join")
        self._df_clock = JoinClock(watermark_lag(self.lag), context.input_tasks)
        held = 0
        for key, sides in self._df_buf.items():  # the timer index and count (one scan)
            self._df_clock.add_key(self._first_expiry(sides), key)
            held += len(sides[0]) + len(sides[1])
        self._df_held = held

    @property
    def buffered_records(self) -> int:
        """Records held in the join state (both sides, all keys): a count kept as they
        come and go (the heartbeat thread reads it; it never scans the store)."""
        return int(self.__dict__.get("_df_held", 0))

    def _expiry(self, side: int, ts: float) -> float:
        return ts + self.upper if side == 0 else ts - self.lower

    def _head_expiry(self, sides: list[list[tuple[float, Any]]]) -> float:
        """The sooner expiry of each side's first buffered record (at or after the key's
        first expiry: a cheap bound of it)."""
        lefts, rights = sides
        return min(lefts[0][0] + self.upper if lefts else _INF,
                   rights[0][0] - self.lower if rights else _INF)

    def _first_expiry(self, sides: list[list[tuple[float, Any]]]) -> float:
        """When the key's first buffered record expires (its one timer)."""
        upper, lower = self.upper, self.lower
        return min(min((t + upper for t, _ in sides[0]), default=_INF),
                   min((t - lower for t, _ in sides[1]), default=_INF))

    def execute(self, tup: Tuple) -> None:
        """Pair the record with the other side's buffered records in range, buffer it."""
        side = self.sides[(tup.source, tup.stream)]
        key, item = tup.values[0], tup.values[-1]
        ts = event_time(self.timestamps[side], item)
        if ts is None:
            self.error_records += 1
            return
        clock = self._df_clock
        if ts <= clock.wm:
            self._drop_late(item)
        else:
            buf = self._df_buf
            sides: Any = buf.get(key)
            fresh = sides is None
            if fresh:
                sides = [[], []]
            out = self._df_out
            if side == 0:
                lo, hi = ts + self.lower, ts + self.upper
                for tr, right in sides[1]:
                    if lo <= tr <= hi:
                        out(JoinResult(key, item, right))
            else:
                lo, hi = ts - self.upper, ts - self.lower
                for tl, left in sides[0]:
                    if lo <= tl <= hi:
                        out(JoinResult(key, left, item))
            expiry = self._expiry(side, ts)
            if expiry > clock.wm:
                # one timer per key, at its first expiry: a new one only if this is sooner
                # (any buffered record's expiry bounds the first one: the heads' first)
                if fresh or (expiry < self._head_expiry(sides)
                             and expiry < self._first_expiry(sides)):
                    clock.add_key(expiry, key)
                sides[side].append((ts, item))
                self._df_held += 1
                buf[key] = sides
        if clock.observe(tup.task, ts):
            self._advance()

    def _advance(self) -> None:
        buf = self._df_buf
        wm = self._df_clock.wm
        clock = self._df_clock
        for key in clock.due_keys():
            sides = buf.get(key)
            if sides is None:
                continue
            kept = [[(t, x) for t, x in sides[s] if self._expiry(s, t) > wm] for s in (0, 1)]
            self._df_held -= len(sides[0]) + len(sides[1]) - len(kept[0]) - len(kept[1])
            if kept[0] or kept[1]:
                buf[key] = kept
                clock.add_key(self._first_expiry(kept), key)
            else:
                del buf[key]

    def on_inputs_finished(self) -> None:
        """Every input ended: the watermark goes to +inf and the buffers empty."""
        self._df_clock.wm = _INF
        self._advance()


__all__ = ["IntervalJoinBolt"]
