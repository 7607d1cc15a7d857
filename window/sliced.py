"""Pane-sliced aligned windows: one accumulator per (key, pane), two-stacks for sliding.

Used by :class:`~jstormpy.window.operator.WindowOperator` for tumbling and sliding
windows with integer sizes when no early firing is configured. Windows are never
materialised: a record is added to exactly one pane (``pane = gcd(size, slide)``), and
the on-time result of window ``[S, S + size)`` is the merge of its panes, kept
incrementally per key with the two-stacks FIFO aggregation (amortised ~3 merges per
firing instead of ``size / slide`` adds per record). Late updates are merged directly.

Semantics are exactly those of the per-window path (the property tests run both
against the reference): on-time at ``wm >= end - 1`` for every window holding records,
late firings while ``wm < end + lateness``, a LateRecord when the newest window of a
record is beyond lateness. A pane is dropped once every window containing it is.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable
from typing import Any

from jstormpy.window.timers import TimerQueue
from jstormpy.window.types import Firing, LateRecord, Window


class _Key:
    """Panes and the incremental on-time aggregation of one key."""

    __slots__ = ("back", "back_agg", "front", "hi", "hot_first", "hot_pane", "lo",
                 "next_end", "panes", "starts", "valid")

    def __init__(self) -> None:
        self.panes: dict[float, Any] = {}
        self.starts: list[float] = []
        """Sorted pane starts."""
        self.next_end: float | None = None
        """End of the next window to fire on time (its timer is pending)."""
        # two-stacks over the panes in [lo, hi): front (oldest on top) holds suffix
        # aggregates, back holds newer panes with their running aggregate
        self.front: list[tuple[float, Any]] = []
        self.back: list[float] = []
        self.back_agg: Any = None
        self.lo = -math.inf
        self.hi = -math.inf
        self.valid = False
        # the pane the key last added to and the end of its earliest window: while the
        # watermark is before that end and the key's timer is no later, adding to the same
        # pane needs nothing else (process() fast path; not part of snapshots)
        self.hot_pane: float | None = None
        self.hot_first = -math.inf

    def dump(self) -> tuple[Any, ...]:
        return (dict(self.panes), list(self.starts), self.next_end, list(self.front),
                list(self.back), self.back_agg, self.lo, self.hi, self.valid)

    @classmethod
    def load(cls, data: tuple[Any, ...]) -> _Key:
        st = cls()
        (st.panes, st.starts, st.next_end, st.front, st.back, st.back_agg, st.lo, st.hi,
         st.valid) = data
        return st


class SlicedWindows:
    """State and logic of pane-sliced tumbling/sliding windows (see module doc)."""

    def __init__(self, size: int, slide: int, lateness: float, aggregator: Any) -> None:
        self.size = size
        self.slide = slide
        self.pane = math.gcd(size, slide)
        self.lateness = lateness
        self._create: Callable[[], Any] = aggregator.create
        self._add: Callable[[Any, Any], Any] = aggregator.add
        self._merge: Callable[[Any, Any], Any] = aggregator.merge
        self._result: Callable[[Any, Window, Any], Any] = aggregator.result
        self.keys: dict[Any, _Key] = {}
        self.fire_timers = TimerQueue()
        """(end - 1) -> (key, end): next on-time firing per key."""
        self.purge_timers = TimerQueue()
        """expiry -> (key, pane start): when every window of the pane is beyond lateness."""

    @property
    def pane_count(self) -> int:
        """Live panes over all keys."""
        return sum(len(st.panes) for st in self.keys.values())

    def _first_end(self, t: float) -> float:
        """End of the earliest window containing timestamp (or pane start) ``t``: its
        start is the smallest multiple of slide above ``t - size``."""
        bound = t - self.size
        return bound - bound % self.slide + self.slide + self.size

    def _merged(self, st: _Key, start: float, end: float) -> Any:
        """Direct merge of the panes in ``[start, end)`` (oldest first)."""
        starts = st.starts
        i = bisect_left(starts, start)
        panes = st.panes
        acc = panes[starts[i]]
        merge = self._merge
        i += 1
        n = len(starts)
        while i < n and starts[i] < end:
            acc = merge(acc, panes[starts[i]])
            i += 1
        return acc

    def process(self, key: Any, ts: float, record: Any, wm: float,
                out: list[Firing | LateRecord]) -> bool:
        """Add a record; appends late firings to ``out``; False if it is a LateRecord."""
        st = self.keys.get(key)
        if st is not None:
            ps = ts - ts % self.pane
            if ps == st.hot_pane and st.hot_first - 1 > wm and st.next_end is not None \
                    and st.next_end <= st.hot_first:
                panes = st.panes
                panes[ps] = self._add(panes[ps], record)
                if st.lo <= ps < st.hi:
                    st.valid = False
                return True
        slide = self.slide
        size = self.size
        last_end = ts - ts % slide + size
        lateness = self.lateness
        if wm >= last_end + lateness:
            return False
        if st is None:
            st = self.keys[key] = _Key()
        ps = ts - ts % self.pane
        panes = st.panes
        acc = panes.get(ps)
        if acc is None and ps not in panes:
            acc = self._create()
            insort(st.starts, ps)
            expiry = ps - ps % slide + size + lateness
            self.purge_timers.add(expiry, (key, ps))
        panes[ps] = self._add(acc, record)
        if st.lo <= ps < st.hi:
            st.valid = False  # a pane inside the two-stacks changed
        bound = ts - size
        first_end = bound - bound % slide + slide + size  # = self._first_end(ts)
        st.hot_pane = ps
        st.hot_first = first_end
        if last_end - 1 > wm:  # some window of this record is still open
            first = first_end
            if first - 1 <= wm:  # earliest open end: first end with end - 1 > wm
                k = math.floor((wm + 1 - size) / slide) + 1
                first = k * slide + size
            if st.next_end is None or first < st.next_end:
                st.next_end = first
                self.fire_timers.add(first - 1, (key, first))
        end = first_end
        if end - 1 <= wm:  # windows the watermark passed but lateness keeps alive
            while end <= last_end and end - 1 <= wm:
                if wm < end + lateness:
                    start = end - size
                    res = self._result(key, Window(start, end), self._merged(st, start, end))
                    out.append(Firing(key, start, end, res, "late"))
                end += slide
        return True

    def _aggregate(self, st: _Key, start: float, end: float) -> Any:
        """The accumulator of window ``[start, end)`` from the key's two-stacks, which
        slide forward to it (rebuilt if a pane inside them changed or the window jumped
        past them)."""
        merge = self._merge
        front, back, panes = st.front, st.back, st.panes
        if not st.valid or start > st.hi or start < st.lo:
            front.clear()
            back.clear()
            st.lo = st.hi = start
            st.valid = True
        # evict panes older than the window
        while True:
            if not front:
                if not back or back[0] >= start:
                    break
                agg = None
                for i in range(len(back) - 1, -1, -1):
                    if back[i] < start:
                        break  # older panes leave anyway (and may be purged already)
                    acc = panes[back[i]]
                    agg = merge(acc, agg) if front else acc
                    front.append((back[i], agg))
                back.clear()
                if not front:
                    break
            if front[-1][0] < start:
                front.pop()
            else:
                break
        st.lo = start
        # push the panes that entered the window
        starts = st.starts
        hi = st.hi
        i = bisect_left(starts, hi if hi > start else start)
        n = len(starts)
        if i < n and starts[i] < end:
            back_agg = st.back_agg
            while i < n and starts[i] < end:
                acc = panes[starts[i]]
                back_agg = merge(back_agg, acc) if back else acc
                back.append(starts[i])
                i += 1
            st.back_agg = back_agg
        st.hi = end
        if front:
            return merge(front[-1][1], st.back_agg) if back else front[-1][1]
        return st.back_agg

    def next_due(self) -> float:
        """The earliest pending fire or purge time (inf if none): a watermark below it
        fires and purges nothing."""
        fire = self.fire_timers._heap  # noqa: SLF001
        purge = self.purge_timers._heap  # noqa: SLF001
        a = fire[0] if fire else math.inf
        b = purge[0] if purge else math.inf
        return a if a < b else b

    def advance(self, wm: float, out: list[Firing]) -> None:
        """Fire every window the watermark passed (in end order), then purge.

        Timers are taken one due time (= one window end) at a time: every key firing
        at that end shares one ``Window`` object, results are appended to ``out`` in one
        pass, and each key's next timer goes straight into the queue's bucket (one heap
        push per new time, not per key)."""
        keys = self.keys
        timers = self.fire_timers
        buckets = timers._due  # noqa: SLF001 - the hot loop adds timers inline
        heap = timers._heap  # noqa: SLF001
        size = self.size
        slide = self.slide
        result = self._result
        aggregate = self._aggregate
        first_end = self._first_end
        new_firing = tuple.__new__
        append = out.append
        while True:
            group = timers.pop_earliest(wm)
            if group is None:
                break
            due_time, due = group
            end = due_time + 1
            start = end - size
            window = new_firing(Window, (start, end))
            nxt = end + slide
            nxt_due = nxt - 1
            nxt_bucket: list[Any] | None = None
            lo_bound = nxt - size
            for key, key_end in due:  # type: ignore[misc]
                st = keys.get(key)
                if st is None or st.next_end != key_end:
                    continue  # superseded by an earlier window
                if key_end != end:  # (not produced by this operator; kept general)
                    self._fire_one(st, key, key_end, out)
                    continue
                acc = aggregate(st, start, end)
                append(new_firing(Firing, (key, start, end, result(key, window, acc),
                                           "on_time")))
                # schedule the key's next window that holds a pane
                starts = st.starts
                i = bisect_left(starts, lo_bound)
                if i == len(starts):
                    st.next_end = None
                    continue
                if starts[i] >= nxt:
                    later = first_end(starts[i])
                    st.next_end = later
                    timers.add(later - 1, (key, later))
                    continue
                st.next_end = nxt
                if nxt_bucket is None:
                    nxt_bucket = buckets.get(nxt_due)
                    if nxt_bucket is None:
                        nxt_bucket = buckets[nxt_due] = []
                        heapq.heappush(heap, nxt_due)
                nxt_bucket.append((key, nxt))
        for key, ps in self.purge_timers.pop_due(wm):  # type: ignore[misc]
            st = keys[key]
            del st.panes[ps]
            st.starts.remove(ps)  # no window to come contains it: the stacks skip it
            if not st.panes and st.next_end is None:
                del keys[key]

    def _fire_one(self, st: _Key, key: Any, end: float, out: list[Firing]) -> None:
        """Fire one key's window ending at ``end`` and schedule its next one."""
        start = end - self.size
        acc = self._aggregate(st, start, end)
        out.append(Firing(key, start, end, self._result(key, Window(start, end), acc),
                          "on_time"))
        nxt = end + self.slide
        starts = st.starts
        i = bisect_left(starts, nxt - self.size)
        if i == len(starts):
            st.next_end = None
            return
        if starts[i] >= nxt:
            nxt = self._first_end(starts[i])
        st.next_end = nxt
        self.fire_timers.add(nxt - 1, (key, nxt))

    def snapshot_state(self) -> dict[str, Any]:
        """Plain data (to be pickled by the operator)."""
        return {"keys": {k: st.dump() for k, st in self.keys.items()},
                "fire": self.fire_timers.snapshot(), "purge": self.purge_timers.snapshot()}

    def restore_state(self, data: dict[str, Any]) -> None:
        """Reload :meth:`snapshot_state` output."""
        self.keys = {k: _Key.load(v) for k, v in data["keys"].items()}
        self.fire_timers = TimerQueue.from_snapshot(data["fire"])
        self.purge_timers = TimerQueue.from_snapshot(data["purge"])
