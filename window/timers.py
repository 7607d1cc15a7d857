"""A timer queue keyed by due time, for watermark-driven firing and purging."""

from __future__ import annotations

import heapq
from collections.abc import Hashable


class TimerQueue:
    """Items due at a time; many items share a time, so only distinct times are heaped.

    Items due at the same time come out in the order they were added, which keeps
    firings deterministic (also across snapshot/restore).
    """

    __slots__ = ("_due", "_heap")

    def __init__(self) -> None:
        self._heap: list[float] = []
        self._due: dict[float, list[Hashable]] = {}

    def add(self, time: float, item: Hashable) -> None:
        """Schedule ``item`` at ``time``."""
        bucket = self._due.get(time)
        if bucket is None:
            self._due[time] = [item]
            heapq.heappush(self._heap, time)
        else:
            bucket.append(item)

    def pop_due(self, now: float) -> list[Hashable]:
        """Remove and return every item due at or before ``now``, earliest first."""
        heap = self._heap
        if not heap or heap[0] > now:
            return []
        out: list[Hashable] = []
        due = self._due
        while heap and heap[0] <= now:
            out.extend(due.pop(heapq.heappop(heap)))
        return out

    def pop_earliest(self, now: float) -> tuple[float, list[Hashable]] | None:
        """Remove and return ``(time, items)`` of the earliest time due at or before
        ``now`` (items in the order added), or None: one O(log n) heap pop per time, so
        a caller can handle every item of one time together."""
        heap = self._heap
        if not heap or heap[0] > now:
            return None
        t = heapq.heappop(heap)
        return t, self._due.pop(t)

    def absorb(self, other: TimerQueue) -> None:
        """Add every timer of ``other`` (after this queue's own at the same time)."""
        for t, items in other._due.items():
            bucket = self._due.get(t)
            if bucket is None:
                self._due[t] = list(items)
                heapq.heappush(self._heap, t)
            else:
                bucket.extend(items)

    def __len__(self) -> int:
        return sum(len(v) for v in self._due.values())

    def snapshot(self) -> dict[float, list[Hashable]]:
        """The pending timers as ``{time: [items]}`` (copied)."""
        return {t: list(items) for t, items in self._due.items()}

    @classmethod
    def from_snapshot(cls, data: dict[float, list[Hashable]]) -> TimerQueue:
        """Rebuild a queue from :meth:`snapshot` output."""
        queue = cls()
        queue._due = {t: list(items) for t, items in data.items()}
        queue._heap = list(queue._due)
        heapq.heapify(queue._heap)
        return queue
