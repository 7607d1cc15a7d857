"""The event clock of the dataflow joins: per-channel watermarks and the timer index of
the buffered state, which holds times and keys, never the buffered records.

The buffered records are managed state (``self.state("join")`` /
``self.state("interval_join")``), so with ``Config(state_store="rocksdb")`` they are a
column family of the task's RocksDB (docs/state-stores.md). What stays in RAM:

* aligned windows (tumbling, sliding) of a window join: only the set of times some
  window is due to close (``end - 1``) or be dropped (``end - 1 + allowed_lateness``),
  no keys — every key's windows share their ends, so when the watermark passes one the
  join reads every key's windows in one scan of the store (:meth:`JoinClock.times_passed`);
* sessions of a window join and the interval join: the keys due at each time
  (:class:`~jstormpy.window.timers.TimerQueue`: a list slot and a reference to the key);
  an interval join keeps one timer per key, at the earliest expiry of its records.

The index is rebuilt from the managed state when the bolt is prepared (one scan), so
it is in no snapshot: the snapshot is the managed state alone, as before.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable

from jstormpy.window import ChannelWatermarks
from jstormpy.window.timers import TimerQueue


class JoinClock:
    """Watermarks of a join's input channels (bounded out-of-orderness: the watermark
    trails the newest timestamp by ``lag``) and its timers: due times without keys
    (:meth:`add_time`) and keys by due time (:meth:`add_key`)."""

    def __init__(self, lag: float, channels: Iterable[int]) -> None:
        self.marks = ChannelWatermarks(lag, None, channels)
        self.wm = -math.inf
        self.keys = TimerQueue()
        self.times: list[float] = []
        """A heap of due times (no keys)."""
        self._time_set: set[float] = set()

    def observe(self, channel: int, ts: float) -> bool:
        """Record a timestamp; True if the watermark advanced."""
        if self.marks.observe(channel, ts):
            wm = self.marks.current()
            if wm > self.wm:
                self.wm = wm
                return True
        return False

    def add_time(self, time: float) -> None:
        """Something is due at ``time`` (one entry per distinct time)."""
        if time not in self._time_set:
            self._time_set.add(time)
            heapq.heappush(self.times, time)

    def add_key(self, time: float, key: Hashable) -> None:
        """``key`` has something due at ``time``."""
        self.keys.add(time, key)

    def times_passed(self) -> bool:
        """Pop every due time at or below the watermark; whether there was one."""
        times = self.times
        if not times or times[0] > self.wm:
            return False
        while times and times[0] <= self.wm:
            self._time_set.discard(heapq.heappop(times))
        return True

    def due_keys(self) -> list[Hashable]:
        """Pop every key due at or below the watermark, each once, earliest first."""
        return list(dict.fromkeys(self.keys.pop_due(self.wm)))

    def timer_count(self) -> int:
        """Entries of the index (times and keys): what it holds in RAM."""
        return len(self.times) + len(self.keys)
