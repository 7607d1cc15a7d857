"""Slice-based aligned windows: one accumulator per (slice, key), fired per window end.

Used by :class:`~jstormpy.window.operator.WindowOperator` for tumbling and sliding
windows with integer sizes when no early firing is configured. Windows are never
materialised. Time is cut into slices (panes) of ``gcd(size, slide)``; each live slice
is a plain dict ``key -> accumulator``, so a record costs one dict lookup and one
``add`` (and a record whose slice is already there needs nothing else: no per-record
timer, no per-record list insert).

Firing happens in *rounds*, one per window end ``E`` the watermark passes (ends with no
record in their window are skipped): the slices that left the window ``[E - size, E)``
are evicted from each of their keys' queues, the slices that entered it are pushed,
and every key whose queue is not empty fires. A key's queue is a two-stacks FIFO
aggregation over its slices in the window (amortised ~3 ``merge`` calls per firing,
whatever ``size / slide`` is); tumbling windows need no queue (one slice per window).
The only timers are the next round's end, found with one bisect over the sorted slice
starts (O(log n)), and slice expiry, which is in slice order (O(1) per slice).

Semantics are exactly those of the per-window path (the property tests run both
against the reference): on-time at ``wm >= end - 1`` for every window holding records,
late firings while ``wm < end + lateness``, a LateRecord when the newest window of a
record is beyond lateness. A slice is dropped once every window containing it is.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

from jstormpy.api.errors import CheckpointError
from jstormpy.window.types import Firing, FiringRun, LateRecord, Window

_MISSING = object()
_INF = math.inf


def on_time_from(size: float, slide: float, wm: float) -> float:
    """The lowest timestamp on time for every window holding it under watermark ``wm``
    (windows of ``size`` every ``slide``, aligned to 0): a record is iff its first window
    ends above ``wm + 1``, i.e. iff it is at or after the start of the first window end
    above ``wm + 1`` minus one slide. Slice (pane) starts are on time or not as their
    records are: every record of a ``gcd(size, slide)`` pane belongs to the same windows.

    Example:
        >>> on_time_from(10, 10, 9), on_time_from(10, 10, 8), on_time_from(10, 5, 9)
        (10, 0, 5)
    """
    if not math.isfinite(wm):  # -inf: nothing fired yet; +inf: everything did
        return wm
    bound = wm + 1 - size
    return bound - bound % slide + size


class _Queue:
    """A key's two-stacks FIFO over the accumulators of its slices in the window.

    ``front`` holds suffix aggregates with the oldest slice's on top (last), ``back``
    the newer slices' accumulators and ``agg`` their running aggregate.
    """

    __slots__ = ("agg", "back", "front")

    def __init__(self) -> None:
        self.front: list[Any] = []
        self.back: list[Any] = []
        self.agg: Any = None


class SlicedWindows:
    """State and logic of slice-based tumbling/sliding windows (see module doc)."""

    def __init__(self, size: int, slide: int, lateness: float, aggregator: Any) -> None:
        self.size = size
        self.slide = slide
        self.pane = math.gcd(size, slide)
        self.lateness = lateness
        self._create: Callable[[], Any] = aggregator.create
        self._add: Callable[[Any, Any], Any] = aggregator.add
        # built-in aggregates (window/aggregates.py): a C-level merge for the queues
        # (slice accumulators are never empty), a whole-column add, results in one call
        self._merge: Callable[[Any, Any], Any] = (getattr(aggregator, "slice_merge", None)
                                                  or aggregator.merge)
        self._result: Callable[[Any, Window, Any], Any] = aggregator.result
        self._results: Callable[[list[Any]], list[Any]] | None = getattr(
            aggregator, "results", None)
        self._add_many: Callable[[dict[Any, Any], Sequence[Any], Sequence[Any]], None] | None \
            = getattr(aggregator, "add_many", None)
        self._tumbling = size == slide
        self.slices: dict[float, dict[Any, Any]] = {}
        """Live slices: slice start -> {key: accumulator}."""
        self.starts: list[float] = []
        """Sorted starts of the live slices."""
        self.queues: dict[Any, _Queue] = {}
        """Keys with a slice in the last fired window (sliding only), in firing order."""
        self.fired_end = -_INF
        """End of the last window fired on time: slices below it entered the queues."""
        self.evicted = -_INF
        """Slices below this left the queues (entered range: ``[evicted, fired_end)``)."""
        self.next_end = _INF
        """End of the next on-time round (due at ``next_end - 1``)."""
        self.safe_ts = -_INF
        """Records at or after this timestamp are on time for all their windows."""
        self.columnar = False
        """Rounds append one :class:`FiringRun` instead of a Firing per key."""
        self.wm = -_INF
        """The watermark :attr:`safe_ts` and the rounds are up to date with."""

    # ------------------------------------------------------------------ helpers
    @property
    def pane_count(self) -> int:
        """Live (slice, key) accumulators."""
        return sum(map(len, self.slices.values()))

    def _first_end(self, t: float) -> float:
        """End of the earliest window containing timestamp (or slice start) ``t``: its
        start is the smallest multiple of slide above ``t - size``."""
        bound = t - self.size
        return bound - bound % self.slide + self.slide + self.size

    def set_watermark(self, wm: float) -> None:
        """Recompute :attr:`safe_ts` for watermark ``wm``: a record is on time for all
        its windows iff its first window's end is above ``wm + 1``, i.e. iff it is at or
        after the start of the first window end above ``wm + 1`` minus one slide."""
        self.wm = wm
        self.safe_ts = on_time_from(self.size, self.slide, wm)

    def next_due(self) -> float:
        """The earliest watermark that fires or purges something (inf if none)."""
        fire = self.next_end - 1
        starts = self.starts
        if starts:
            ps = starts[0]
            expiry = ps - ps % self.slide + self.size + self.lateness
            return expiry if expiry < fire else fire
        return fire

    def _new_slice(self, ps: float) -> dict[Any, Any]:
        """Create slice ``ps`` (its first window is still to fire on time)."""
        d: dict[Any, Any] = {}
        self.slices[ps] = d
        starts = self.starts
        if not starts or ps > starts[-1]:
            starts.append(ps)
        else:
            insort(starts, ps)
        first = self._first_end(ps)
        self.next_end = min(self.next_end, first)
        return d

    def _merged(self, key: Any, start: float, end: float) -> Any:
        """Direct merge (oldest first) of ``key``'s slices in ``[start, end)``."""
        starts, slices = self.starts, self.slices
        acc: Any = _MISSING
        merge = self._merge
        i = bisect_left(starts, start)
        n = len(starts)
        while i < n and starts[i] < end:
            val = slices[starts[i]].get(key, _MISSING)
            if val is not _MISSING:
                acc = val if acc is _MISSING else merge(acc, val)
            i += 1
        return acc

    def _rebuild(self, key: Any) -> None:
        """Rebuild ``key``'s queue from the entered slices (after a late update)."""
        starts, slices = self.starts, self.slices
        q = _Queue()
        merge = self._merge
        i = bisect_left(starts, self.evicted)
        n = len(starts)
        hi = self.fired_end
        while i < n and starts[i] < hi:
            val = slices[starts[i]].get(key, _MISSING)
            if val is not _MISSING:
                q.agg = merge(q.agg, val) if q.back else val
                q.back.append(val)
            i += 1
        queues = self.queues
        if q.back:
            queues[key] = q
        else:
            queues.pop(key, None)

    # ------------------------------------------------------------------ input
    def try_add(self, key: Any, ts: float, record: Any) -> bool:
        """Add a record on time for all its windows (True); False (nothing done) if
        it needs :meth:`process`."""
        if ts >= self.safe_ts:
            ps = ts - ts % self.pane
            d = self.slices.get(ps)
            if d is None:
                d = self._new_slice(ps)
            acc = d.get(key, _MISSING)
            d[key] = self._add(self._create() if acc is _MISSING else acc, record)
            return True
        return False

    def add_rows_on_time(self, keys: Sequence[Any], rows: Sequence[Any], ts: float,
                         make_record: Callable[[Any], Any], start: int = 0) -> bool:
        """Add ``rows[start:]`` (keys ``keys[start:]``), every record stamped ``ts``, under
        an unchanged watermark: what :meth:`try_add` does per record, in one loop, with
        the record (``make_record(row)``, a ``Tuple``) built only when ``add`` kept the
        previous one (``sys.getrefcount``), else the previous one reused. False (nothing
        done) unless ``ts`` is on time and its slice exists, or with a built-in aggregate
        (those add whole columns)."""
        if ts < self.safe_ts or self._add_many is not None:
            return False
        d = self.slices.get(ts - ts % self.pane)
        if d is None:
            return False
        get = d.get
        add = self._add
        create = self._create
        missing = _MISSING
        refs = sys.getrefcount
        rec: Any = None
        for key, row in zip(islice(keys, start, None), islice(rows, start, None),
                            strict=True):
            # 2 references (this variable and the argument): add() kept none of it
            if rec is None or refs(rec) > 2:
                rec = make_record(row)
            else:
                rec.values = row
            acc = get(key, missing)
            d[key] = add(create() if acc is missing else acc, rec)
        return True

    def merge_on_time(self, keys: Sequence[Any], accs: Sequence[Any], ts: float) -> bool:
        """Merge partial accumulators (combined before the shuffle, each standing for
        records of its key) all stamped ``ts`` under an unchanged watermark: what
        :meth:`try_add` of their records would give, by the ``merge`` contract
        (``merge(create(), x) == x``: a new key's slice entry is the partial itself).
        False (nothing done) unless ``ts`` is on time."""
        if ts < self.safe_ts:
            return False
        ps = ts - ts % self.pane
        d = self.slices.get(ps)
        if d is None:
            d = self._new_slice(ps)
        get = d.get
        merge = self._merge
        missing = _MISSING
        for key, acc in zip(keys, accs, strict=True):
            cur = get(key, missing)
            d[key] = acc if cur is missing else merge(cur, acc)
        return True

    def merge_panes(self, keys: Sequence[Any], starts: Sequence[float],
                    accs: Sequence[Any]) -> bool:
        """Merge partial accumulators combined before the shuffle, ``accs[i]`` standing
        for records of ``keys[i]`` in the slice starting at ``starts[i]`` (event time),
        into their slices: what :meth:`try_add` of each of their records would give, by
        the ``merge`` contract. False (nothing done) unless every slice is on time for
        all its windows (then none fires or is purged, and no round is due sooner than a
        new slice's first window end, which :meth:`_new_slice` schedules)."""
        if not starts or min(starts) < self.safe_ts:
            return bool(not starts)
        slices = self.slices
        merge = self._merge
        missing = _MISSING
        cur: Any = None
        d: dict[Any, Any] = {}
        for key, ps, acc in zip(keys, starts, accs, strict=True):
            if ps != cur:
                got = slices.get(ps)
                d = got if got is not None else self._new_slice(ps)
                cur = ps
            old = d.get(key, missing)
            d[key] = acc if old is missing else merge(old, acc)
        return True

    def process(self, key: Any, ts: float, record: Any, wm: float,
                out: list[Firing | LateRecord]) -> bool:
        """Add a record; appends late firings to ``out``; False if it is a LateRecord."""
        if ts >= self.safe_ts:  # on time for every window: add to its slice, that's all
            ps = ts - ts % self.pane
            d = self.slices.get(ps)
            if d is None:
                d = self._new_slice(ps)
            acc = d.get(key, _MISSING)
            d[key] = self._add(self._create() if acc is _MISSING else acc, record)
            return True
        return self._process_late(key, ts, record, wm, out)

    def _process_late(self, key: Any, ts: float, record: Any, wm: float,
                      out: list[Firing | LateRecord]) -> bool:
        """A record some of whose windows the watermark already passed."""
        slide, size, lateness = self.slide, self.size, self.lateness
        last_end = ts - ts % slide + size
        if wm >= last_end + lateness:
            return False
        ps = ts - ts % self.pane
        d = self.slices.get(ps)
        new = d is None
        if d is None:
            d = self.slices[ps] = {}
            insort(self.starts, ps)
        acc = d.get(key, _MISSING)
        d[key] = self._add(self._create() if acc is _MISSING else acc, record)
        if not self._tumbling and self.evicted <= ps < self.fired_end:
            self._rebuild(key)  # a slice inside the key's queue changed
        end = self._first_end(ts)
        result = self._result
        while end <= last_end and end - 1 <= wm:  # windows the watermark passed
            if wm < end + lateness:
                start = end - size
                out.append(Firing(key, start, end, result(
                    key, Window(start, end), self._merged(key, start, end)), "late"))
            end += slide
        if new and end <= last_end and end < self.next_end:
            self.next_end = end  # the slice's first window still to fire on time
        return True

    def process_batch(self, keys: Sequence[Any], timestamps: Sequence[float],
                      records: Sequence[Any], watermarks: Sequence[float] | None,
                      wm: float, out: list[Any],
                      values: Sequence[Any] | None = None) -> tuple[float, int]:
        """``process`` each record, advancing to ``watermarks[i]`` after record ``i``
        (if given and higher); returns ``(watermark, late records)``. Same results, in
        the same order, as the per-record calls.

        With a built-in aggregate (``add_many``) and its input column ``values``, the
        longest prefix of on-time records before any watermark that makes something
        due is added slice by slice with one ``add_many`` call each; the rest (if any)
        goes record by record."""
        if self._add_many is not None and values is not None and keys:
            stop = self._column_prefix(keys, timestamps, values, watermarks)
            if stop:
                if watermarks:
                    top = max(watermarks[:stop])
                    wm = max(wm, top)
                if stop == len(keys):
                    if watermarks:
                        self.set_watermark(wm)
                    return wm, 0
                keys, timestamps, records = keys[stop:], timestamps[stop:], records[stop:]
                watermarks = watermarks[stop:] if watermarks else watermarks
        return self._process_records(keys, timestamps, records, watermarks, wm, out)

    def _column_prefix(self, keys: Sequence[Any], timestamps: Sequence[float],
                       values: Sequence[Any], watermarks: Sequence[float] | None) -> int:
        """Add the records before the first one that needs the per-record path (late,
        or followed by a watermark that may make a round or purge due) with one
        ``add_many`` per slice; returns how many were added."""
        n = len(keys)
        if len(timestamps) != n or len(values) != n:
            return 0  # the per-record loop raises the clear error (zip strict)
        tss = timestamps
        lowest = min(tss)
        if lowest < self.safe_ts:
            return 0  # a record late for some window: keep the exact per-record order
        pane = self.pane
        # new slices may bring the next round forward: the earliest they can make due
        # is the first window end of the lowest one
        limit = self._limit()
        first = self._first_end(lowest - lowest % pane) - 1
        limit = min(limit, first)
        stop = n
        if watermarks and max(watermarks) >= limit:
            stop = next(i for i, w in enumerate(watermarks) if w >= limit)
            if not stop:
                return 0
            if stop < n:
                tss = tss[:stop]
                keys, values = keys[:stop], values[:stop]
        add_many = self._add_many
        assert add_many is not None
        slices = self.slices
        pss = [t - t % pane for t in tss]
        lo_ps, hi_ps = min(pss), max(pss)
        if lo_ps == hi_ps:  # one slice (in-order input)
            d = slices.get(lo_ps)
            add_many(d if d is not None else self._new_slice(lo_ps), keys, values)
            return stop
        # group by slice, keeping arrival order within each (a stable sort in C)
        order = sorted(range(len(pss)), key=pss.__getitem__)
        sk = list(map(keys.__getitem__, order))
        sv = list(map(values.__getitem__, order))
        sp = list(map(pss.__getitem__, order))
        lo = 0
        end = len(sp)
        while lo < end:
            ps = sp[lo]
            hi = bisect_right(sp, ps, lo)
            d = slices.get(ps)
            add_many(d if d is not None else self._new_slice(ps), sk[lo:hi], sv[lo:hi])
            lo = hi
        return stop

    def _process_records(self, keys: Sequence[Any], timestamps: Sequence[float],
                         records: Sequence[Any], watermarks: Sequence[float] | None,
                         wm: float, out: list[Any]) -> tuple[float, int]:
        """:meth:`process_batch`, record by record."""
        slices = self.slices
        pane = self.pane
        add = self._add
        create = self._create
        safe = self.safe_ts
        # below ``limit`` a higher watermark changes nothing here (no round or purge
        # due, same safe_ts): just remember it
        limit = self._limit()
        cur_ps: Any = None
        d: dict[Any, Any] = {}
        late = 0
        missing = _MISSING
        wms: Any = watermarks if watermarks else ()
        for i, (key, ts, rec) in enumerate(zip(keys, timestamps, records, strict=True)):
            if ts >= safe:
                ps = ts - ts % pane
                if ps != cur_ps:
                    d = slices.get(ps)  # type: ignore[assignment]
                    if d is None:
                        d = self._new_slice(ps)
                        limit = self._limit()
                    cur_ps = ps
                acc = d.get(key, missing)
                d[key] = add(create() if acc is missing else acc, rec)
            else:
                if not self._process_late(key, ts, rec, wm, out):
                    late += 1
                    out.append(LateRecord(key, ts, rec))
                limit = self._limit()
                cur_ps = None
            if wms:
                w = wms[i]
                if w > wm:
                    wm = w
                    if w >= limit:
                        if w >= self.next_due():
                            self.advance(w, out)
                            cur_ps = None
                        else:
                            self.set_watermark(w)
                        safe = self.safe_ts
                        limit = self._limit()
        if wms:
            self.set_watermark(wm)
        return wm, late

    def _limit(self) -> float:
        """The lowest watermark that makes a round or purge due or moves safe_ts."""
        due = self.next_due()
        safe = self.safe_ts
        if safe == _INF:
            return _INF
        move = -_INF if safe == -_INF else safe + self.slide - 1
        return due if due < move else move

    # ------------------------------------------------------------------ time
    def advance(self, wm: float, out: list[Any]) -> None:
        """The watermark moved to ``wm``: run every due round (in end order), then
        drop the slices no window needs any more."""
        self.set_watermark(wm)
        while self.next_end - 1 <= wm and self.next_end != _INF:
            self._round(self.next_end, out)
        starts = self.starts
        if not starts:
            return
        slide, size, lateness = self.slide, self.size, self.lateness
        n = 0
        for ps in starts:
            if wm < ps - ps % slide + size + lateness:
                break
            n += 1
        if n:
            if self.evicted < starts[n - 1] + 1:
                self._evict_below(starts[n - 1] + 1)
            slices = self.slices
            for ps in starts[:n]:
                del slices[ps]
            del starts[:n]

    def _evict_below(self, bound: float) -> None:
        """Take the entered slices below ``bound`` out of their keys' queues."""
        lo = self.evicted
        if bound <= lo:
            return
        self.evicted = bound
        if self._tumbling:
            return
        starts, slices, queues, merge = self.starts, self.slices, self.queues, self._merge
        i = bisect_left(starts, lo)
        n = len(starts)
        hi = min(bound, self.fired_end)
        while i < n and starts[i] < hi:
            for key in slices[starts[i]]:
                q = queues[key]
                front = q.front
                if not front:
                    back = q.back
                    if len(back) == 1:
                        del queues[key]
                        continue
                    # flip: suffix aggregates of back[1:], oldest on top
                    agg = back[-1]
                    front.append(agg)
                    for j in range(len(back) - 2, 0, -1):
                        agg = merge(back[j], agg)
                        front.append(agg)
                    back.clear()
                    continue  # back[0] (the evicted slice) is not kept
                front.pop()
                if not front and not q.back:
                    del queues[key]
            i += 1

    def _round(self, end: float, out: list[Any]) -> None:
        """Fire every key's window ``[end - size, end)`` on time; schedule the next."""
        size = self.size
        start = end - size
        window = tuple.__new__(Window, (start, end))
        result = self._result
        starts, slices = self.starts, self.slices
        if self._tumbling:
            self.evicted = start
            d = slices.get(start)
            keys: list[Any] = list(d) if d is not None else []
            if not d:
                results = []
            elif self._results is not None:
                results = self._results(list(d.values()))
            else:
                results = [result(key, window, acc) for key, acc in d.items()]
        else:
            self._evict_below(start)
            queues = self.queues
            merge = self._merge
            i = bisect_left(starts, max(self.fired_end, start))
            n = len(starts)
            while i < n and starts[i] < end:  # push the slices that entered the window
                for key, acc in slices[starts[i]].items():
                    q = queues.get(key)
                    if q is None:
                        q = queues[key] = _Queue()
                        q.agg = acc
                    elif q.back:
                        q.agg = merge(q.agg, acc)
                    else:
                        q.agg = acc
                    q.back.append(acc)
                i += 1
            keys = list(queues)
            if self._results is not None:  # built-in aggregate: no per-key result call
                results = self._results([(merge(q.front[-1], q.agg) if q.back
                                          else q.front[-1]) if q.front else q.agg
                                         for q in queues.values()])
            else:
                results = [result(key, window, (merge(q.front[-1], q.agg) if q.back
                                                else q.front[-1]) if q.front else q.agg)
                           for key, q in queues.items()]
        if keys:
            if self.columnar:
                out.append(FiringRun(start, end, keys, results, "on_time"))
            else:
                new_firing = tuple.__new__
                out += [new_firing(Firing, (key, start, end, res, "on_time"))
                        for key, res in zip(keys, results, strict=True)]
        self.fired_end = end
        # next round: the first window after this one that holds a live slice
        nxt = end + self.slide
        i = bisect_left(starts, nxt - size)
        if i == len(starts):
            self.next_end = _INF
        else:
            first = self._first_end(starts[i])
            self.next_end = first if first > nxt else nxt

    # ------------------------------------------------------------------ state
    def snapshot_state(self) -> dict[str, Any]:
        """Plain data (to be pickled by the operator)."""
        return {"slices": self.slices, "starts": self.starts,
                "queues": {k: (q.front, q.back, q.agg) for k, q in self.queues.items()},
                "fired_end": self.fired_end, "evicted": self.evicted,
                "next_end": self.next_end}

    def restore_state(self, data: dict[str, Any], wm: float) -> None:
        """Reload :meth:`snapshot_state` output (taken at watermark ``wm``)."""
        if "slices" not in data:
            raise CheckpointError("window snapshot has the pre-slice sliced layout; "
                                  "it cannot be restored by this version")
        self.slices = data["slices"]
        self.starts = data["starts"]
        self.queues = {}
        for key, (front, back, agg) in data["queues"].items():
            q = self.queues[key] = _Queue()
            q.front, q.back, q.agg = front, back, agg
        self.fired_end = data["fired_end"]
        self.evicted = data["evicted"]
        self.next_end = data["next_end"]
        self.set_watermark(wm)

    # ------------------------------------------------------------------ rescaling
    @staticmethod
    def split_state(data: dict[str, Any], place: Callable[[Any], int],
                    index: int) -> dict[str, Any]:
        """The part of :meth:`snapshot_state` output holding the keys with
        ``place(key) == index``: their pane accumulators and queues; slices left empty
        are dropped (the progress fields stay: :meth:`absorb` recomputes them)."""
        slices = {}
        for ps, d in data["slices"].items():
            mine = {key: acc for key, acc in d.items() if place(key) == index}
            if mine:
                slices[ps] = mine
        return {"slices": slices, "starts": sorted(slices),
                "queues": {k: q for k, q in data["queues"].items() if place(k) == index},
                "fired_end": data["fired_end"], "evicted": data["evicted"],
                "next_end": data["next_end"]}

    def absorb(self, parts: Sequence[SlicedWindows], wm: float) -> None:
        """Become the union of ``parts`` (disjoint keys, each already advanced to ``wm``).

        Only the panes are taken; the progress is recomputed from ``wm`` alone: every
        window ending at or below ``wm + 1`` has fired (its round ran in each part that
        held a pane of it), so the last round is the last such window end, the queues
        hold each key's panes of that window, and the next round is the first later
        window holding a pane. That is the state one operator holding all these panes
        would be in at ``wm``, whatever rounds each part skipped for want of a pane.
        """
        slices: dict[float, dict[Any, Any]] = {}
        evicted = -_INF
        for part in parts:
            for ps, d in part.slices.items():
                slices.setdefault(ps, {}).update(d)
            evicted = max(evicted, part.evicted)
        self.slices = slices
        self.starts = sorted(slices)
        self.queues = {}
        if wm == -_INF:
            self.fired_end = self.evicted = -_INF
            self.next_end = self._first_end(self.starts[0]) if self.starts else _INF
        else:
            if wm == _INF:
                last = _INF
            else:
                first = wm + 1 - self.size  # the last window end <= wm + 1: its start
                last = first - first % self.slide + self.size
            self.fired_end = last
            self.evicted = max(evicted, last - self.size)
            if not self._tumbling:
                keys: dict[Any, None] = {}
                i = bisect_left(self.starts, self.evicted)
                while i < len(self.starts) and self.starts[i] < last:
                    keys.update(dict.fromkeys(slices[self.starts[i]]))
                    i += 1
                for key in keys:
                    self._rebuild(key)
            nxt = last + self.slide
            i = bisect_left(self.starts, nxt - self.size)
            if i == len(self.starts):
                self.next_end = _INF
            else:
                first_end = self._first_end(self.starts[i])
                self.next_end = first_end if first_end > nxt else nxt
        self.set_watermark(wm)
