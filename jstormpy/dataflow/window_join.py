"""``KeyedStream.join(other, window=...)``: both sides buffered in managed state
keyed by the key, per window, and dropped once the watermark passes the window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from operator import itemgetter
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import TopologyError
from jstormpy.dataflow.event_time import check_ms, check_timestamps, event_time, watermark_lag
from jstormpy.dataflow.fusion import InputKey, Step
from jstormpy.dataflow.join_clock import JoinClock
from jstormpy.dataflow.joins import JoinBolt
from jstormpy.dataflow.results import JoinResult
from jstormpy.window import (
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)

_INF = math.inf


def join_windows(window: WindowAssigner, ts: float) -> list[tuple[float, float]]:
    """The ``[start, end)`` windows of ``window`` (tumbling or sliding) holding ``ts``.

    Example:
        >>> join_windows(SlidingWindows(size_ms=10, slide_ms=5), 12)
        [(5, 15), (10, 20)]
    """
    size, slide = window.size_ms, window.slide_ms  # type: ignore[union-attr]
    start = ts - ts % slide
    out = []
    while start > ts - size:
        out.append((start, start + size))
        start -= slide
    out.reverse()
    return out


class JoinHow(Enum):
    """Which unmatched records a window join emits (with None for the other side)."""

    INNER = "inner"
    LEFT = "left"
    OUTER = "outer"


class WindowJoinBolt(JoinBolt):
    """``KeyedStream.join(other, window=...)``: every pair of one key in one window.

    A pair is emitted as soon as its second record arrives (while the window is not
    purged); with ``how="left"`` / ``"outer"``, a record still without a partner when
    the watermark closes its window is emitted with None for the other side (a
    partner that arrives later, within the allowed lateness, is still paired).

    Session windows (``SessionWindows(gap_ms)``) span both sides: a record opens
    ``[t, t + gap)`` and merges every session of its key it overlaps, whichever side
    those sessions' records came from, so a record of either side can bridge two
    sessions. At a merge the pairs between the merged sessions' records are emitted (a
    pair is emitted once: records once in one session stay in one session).

    State: managed dict ``"join"``, key -> ``{(start, end): [lefts, rights, left_done,
    right_done, closed]}``; ``*_done`` marks a record that found a partner or was
    emitted without one (never emitted without one again). A window is dropped once
    the watermark passes ``end - 1 + allowed_lateness_ms`` (a session's: ``end +
    allowed_lateness_ms``; a session closes once the watermark passes its end, since a
    record at its end still joins it). Records for a dropped window are counted in
    :attr:`late_records` and dropped.
    """

    def __init__(self, sides: Mapping[InputKey, int], window: WindowAssigner,
                 timestamps: tuple[Callable[[Any], float], Callable[[Any], float]],
                 out_of_orderness_ms: float = 0, allowed_lateness_ms: float = 0,
                 how: str = "inner", steps: Sequence[Step] = ()) -> None:
        super().__init__(sides, steps)
        if not isinstance(window, TumblingWindows | SlidingWindows | SessionWindows):
            raise TopologyError(
                f"join(window=...) takes TumblingWindows, SlidingWindows or SessionWindows, "
                f"got {window!r}")
        window.validate()
        try:
            self.how = JoinHow(how)
        except ValueError:
            raise TopologyError(f"join how={how!r}: use 'inner', 'left' or 'outer'") from None
        check_ms("out_of_orderness_ms", out_of_orderness_ms)
        check_ms("allowed_lateness_ms", allowed_lateness_ms)
        self.sides = dict(sides)
        self.window = window
        self.timestamps = check_timestamps(timestamps)
        self.lag = out_of_orderness_ms
        self.lateness = allowed_lateness_ms
        self.error_records = 0
        """Items whose timestamp function raised or gave no finite number (dropped)."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the buffers (restored after a rollback or rescale) and rebuild timers."""
        super().prepare(conf, context)
        self._df_buf = self.state("join")
        self._df_session = isinstance(self.window, SessionWindows)
        # how long before its end a window closes: a record at end - 1 is the last an
        # aligned window takes; touching sessions merge, so a session still takes one at
        # its end (window/operator.py's module docs)
        self._df_close_offset = 0 if self._df_session else 1
        self._df_clock = JoinClock(watermark_lag(self.lag), context.input_tasks)
        held = 0
        for key, wins in self._df_buf.items():  # the timer index and count (one scan)
            for win, entry in wins.items():
                self._schedule(key, win, entry[4])
                held += len(entry[0]) + len(entry[1])
        self._df_held = held

    @property
    def buffered_records(self) -> int:
        """Records held in the join state (both sides, all keys): a count kept as they
        come and go (the heartbeat thread reads it; it never scans the store)."""
        return int(self.__dict__.get("_df_held", 0))

    def _due(self, win: tuple[float, float], closed: bool) -> float:
        close = win[1] - self._df_close_offset
        return close + self.lateness if closed else close

    def _schedule(self, key: Any, win: tuple[float, float], closed: bool) -> None:
        """Index a window's next due times: a session's by its key, an aligned window's
        as times alone (its close and its drop: a scan finds the key again)."""
        clock = self._df_clock
        if self._df_session:
            clock.add_key(self._due(win, closed), key)
            return
        if not closed:
            clock.add_time(win[1] - 1)
        clock.add_time(win[1] - 1 + self.lateness)

    def execute(self, tup: Tuple) -> None:
        """Pair the record with the other side's records of its windows, buffer it."""
        side = self.sides[(tup.source, tup.stream)]
        key, item = tup.values[0], tup.values[-1]
        ts = event_time(self.timestamps[side], item)
        if ts is None:
            self.error_records += 1
            return
        clock = self._df_clock
        if self._df_session:
            if not self._place_in_session(key, side, item, ts):
                self._drop_late(item)
            if clock.observe(tup.task, ts):
                self._advance()
            return
        wm = clock.wm
        buf = self._df_buf
        wins = buf.get(key)
        placed = False
        for win in join_windows(self.window, ts):
            if wm >= win[1] - 1 + self.lateness:
                continue  # purged
            placed = True
            if wins is None:
                wins = {}
            entry = wins.get(win)
            if entry is None:
                closed = wm >= win[1] - 1
                entry = wins[win] = [[], [], [], [], closed]
                self._schedule(key, win, closed)
            self._add(key, entry, side, item)
        if placed:
            buf[key] = wins  # written back: incremental checkpoints see the change
        else:
            self._drop_late(item)
        if clock.observe(tup.task, ts):
            self._advance()

    def _place_in_session(self, key: Any, side: int, item: Any, ts: float) -> bool:
        """Add a record to its key's session, merging the sessions it overlaps; False if
        its session would already be purged (a late record)."""
        start, end = ts, ts + self.window.gap_ms  # type: ignore[union-attr]
        clock = self._df_clock
        wm = clock.wm
        if wm >= end + self.lateness:
            return False
        buf = self._df_buf
        wins = buf.get(key)
        if wins is None:
            wins = {}
        hits = sorted(win for win in wins if win[0] <= end and win[1] >= start)
        if hits:
            start, end = min(start, hits[0][0]), max(end, *(win[1] for win in hits))
        win = (start, end)
        if hits == [win]:  # inside an existing session
            entry = wins[win]
        else:
            entry = [[], [], [], [], False]
            for old in hits:
                self._merge_into(key, entry, wins.pop(old))
            entry[4] = wm >= end
            wins[win] = entry
            self._schedule(key, win, entry[4])
        self._add(key, entry, side, item)
        buf[key] = wins  # written back: incremental checkpoints see the change
        return True

    def _merge_into(self, key: Any, entry: list[Any], part: list[Any]) -> None:
        """Add session ``part`` to ``entry``, emitting the pairs between them."""
        out = self._df_out
        for side in (0, 1):
            mine, other = part[side], entry[1 - side]
            if mine and other:
                for item in mine:
                    for partner in other:
                        out(JoinResult(key, item, partner) if side == 0 else
                            JoinResult(key, partner, item))
                part[2 + side] = [True] * len(mine)
                entry[3 - side] = [True] * len(other)
        for i in range(4):
            entry[i] = entry[i] + part[i]

    def _add(self, key: Any, entry: list[Any], side: int, item: Any) -> None:
        mine, other = entry[side], entry[1 - side]
        my_hits, other_hits = entry[2 + side], entry[3 - side]
        out = self._df_out
        for j, partner in enumerate(other):
            out(JoinResult(key, item, partner) if side == 0 else JoinResult(key, partner, item))
            other_hits[j] = True
        mine.append(item)
        self._df_held += 1
        my_hits.append(bool(other))
        if entry[4] and not other:  # a closed window: no partner now is final for now
            self._emit_unmatched(key, side, item)
            my_hits[-1] = True  # emitted: a session that closes again does not repeat it

    def _emit_unmatched(self, key: Any, side: int, item: Any) -> None:
        if self.how is JoinHow.OUTER or (self.how is JoinHow.LEFT and side == 0):
            self._df_out(JoinResult(key, item, None) if side == 0 else
                         JoinResult(key, None, item))

    def _advance(self) -> None:
        """Close and drop the windows the watermark passed: a session's by the keys
        due, aligned windows in one scan of the buffers when a due time passed."""
        buf = self._df_buf
        clock = self._df_clock
        if self._df_session:
            for key in clock.due_keys():
                wins = buf.get(key)
                if wins is not None and self._settle(key, wins):
                    _write_back(buf, key, wins)
            return
        if not clock.times_passed():
            return
        # a dict cannot change while it is iterated: its writes wait (a RocksDB scan
        # reads a snapshot of the database, so its writes go out as the scan goes)
        later: dict[Any, Any] | None = {} if isinstance(buf, dict) else None
        for key, wins in buf.items():
            if self._settle(key, wins):
                if later is None:
                    _write_back(buf, key, wins)
                else:
                    later[key] = wins
        for key, wins in (later or {}).items():
            _write_back(buf, key, wins)

    def _settle(self, key: Any, wins: dict[tuple[float, float], list[Any]]) -> bool:
        """Close (emitting the unmatched records ``how`` asks for) and drop the key's
        windows the watermark passed, in end order; whether any changed."""
        wm = self._df_clock.wm
        changed = False
        for win in sorted(wins, key=itemgetter(1)):
            entry = wins[win]
            if not entry[4]:
                if wm < win[1] - self._df_close_offset:
                    continue
                entry[4] = True
                changed = True
                for side in (0, 1):
                    hits = entry[2 + side]
                    for j, (item, hit) in enumerate(zip(entry[side], hits, strict=True)):
                        if not hit:
                            self._emit_unmatched(key, side, item)
                            hits[j] = True
                if wm < self._due(win, True):
                    if self._df_session:
                        self._df_clock.add_key(self._due(win, True), key)
                    continue
            elif wm < self._due(win, True):
                continue
            del wins[win]
            self._df_held -= len(entry[0]) + len(entry[1])
            changed = True
        return changed

    def on_inputs_finished(self) -> None:
        """Every input ended: the watermark goes to +inf, every window closes."""
        self._df_clock.wm = _INF
        self._advance()


def _write_back(buf: Any, key: Any, wins: dict[Any, Any]) -> None:
    """Store a key's changed windows, or drop the key once it has none."""
    if wins:
        buf[key] = wins
    else:
        del buf[key]


__all__ = ["JoinHow", "WindowJoinBolt", "join_windows"]
