"""Time windows kept in the task's state store, with a compact in-memory timer index.

Used by :class:`~jstormpy.window.operator.WindowOperator` when the task's state store is
RocksDB (``Config(state_store="rocksdb")``, docs/state-stores.md): the contents of a
key's open windows (accumulator, records since the last firing, fired flag) live in one
entry of a managed state (:data:`WINDOW_STATE`) keyed by the window key, so they are a
RocksDB column family with key-group-major keys — on disk, checkpointed with the task's
other state (native, incremental checkpoints) and moved by key-group range on a rescale.

What stays in RAM is the timer index, in the bolt's snapshot:

* tumbling and sliding windows: only the set of times some window is due to fire
  (``end - 1``) or be purged (``end + allowed_lateness``) — no keys; when the watermark
  passes one, one scan of the store fires and purges every key's windows it passed;
* sessions: two :class:`~jstormpy.window.timers.TimerQueue` whose items are window
  *keys* (``fire`` at ``end - 1``, ``purge`` at ``end + allowed_lateness``); a key's
  session is found again from the timer's time (sessions of one key never share an
  end), so a watermark step reads exactly the keys due (two list slots and a reference
  to the key per open session).

Windows changed since the last early round (``early_fire_every_ms``) are also indexed in
RAM, as ids.

Semantics are those of the operator's per-window path (the same firings per key, in the
same order; across keys a scan goes in store order); the timer index is the operator's
snapshot, the windows are the managed state.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from jstormpy.window.timers import TimerQueue
from jstormpy.window.types import Firing, FiringKind, Window

WINDOW_STATE = "jstorm.windows"
"""The managed state holding the open windows: window key -> ``{(start, end): [acc,
pending, fired]}``."""

Entry = dict[tuple[float, float], list[Any]]

SCAN_MIN_DUE = 50_000
"""Due timers from which a watermark step reads the windows in one scan of the store
(when they are also a quarter of the index), not with a point read per key."""


def _write_entry(store: Any, key: Any, entry: Entry) -> None:
    """Store a key's changed windows back, or drop the key once it has none."""
    if entry:
        store[key] = entry
    else:
        _discard(store, key)


def _discard(store: MutableMapping[Any, Any], key: Any) -> None:
    """Delete ``key`` from ``store`` without reading it first where the store can (a
    RocksDB state's ``discard``: a blind delete)."""
    discard = getattr(store, "discard", None)
    if discard is not None:
        discard(key)
    else:
        store.pop(key, None)


def _pop_all(queue: TimerQueue, wm: float) -> list[tuple[float, list[Any]]]:
    """Every ``(time, keys)`` of ``queue`` due at ``wm``, earliest first."""
    out = []
    while (due := queue.pop_earliest(wm)) is not None:
        out.append(due)
    return out


class StoredWindows:
    """Open time windows in a mapping (the task's store) and their timers in RAM.

    ``gap`` is the session gap (None: aligned windows of ``size`` every ``slide``)."""

    def __init__(self, size: float, slide: float, gap: float | None, lateness: float,
                 aggregator: Any, early_n: int | None, early_ms: float | None,
                 store: MutableMapping[Any, Any] | None = None) -> None:
        self.size = size
        self.slide = slide
        self.gap = gap
        self.fire_offset = 1 if gap is None else 0
        """How long before its end a window is complete: aligned windows at ``end - 1``,
        sessions at ``end`` (window/operator.py's module docs)."""
        self.lateness = lateness
        self._create: Callable[[], Any] = aggregator.create
        self._add: Callable[[Any, Any], Any] = aggregator.add
        self._merge: Callable[[Any, Any], Any] = aggregator.merge
        self._result: Callable[[Any, Window, Any], Any] = aggregator.result
        self.early_n = early_n
        self.early_ms = early_ms
        self.store: MutableMapping[Any, Any] = {} if store is None else store
        """Window key -> its open windows (:data:`Entry`)."""
        self.fire = TimerQueue()
        self.purge = TimerQueue()
        """Sessions: keys by the time their window is due to fire / be purged."""
        self.checks: list[float] = []
        """Aligned windows: a heap of the times some window is due to fire or be purged
        (no keys: every key's windows are read in one scan when one passes)."""
        self.check_set: set[float] = set()
        self.dirty: dict[tuple[Any, float, float], None] = {}

    # ------------------------------------------------------------------ queries
    @property
    def window_count(self) -> int:
        """Open windows (a scan of the store)."""
        return sum(len(entry) for entry in self.store.values())

    def timer_count(self) -> int:
        """Entries of the in-memory timer index (fire and purge)."""
        return len(self.fire) + len(self.purge) + len(self.checks)

    # ------------------------------------------------------------------ input
    def process(self, key: Any, ts: float, record: Any, wm: float, out: list[Any]) -> bool:
        """Add ``record``; firings it causes go to ``out``. False: it is late for all its
        windows (nothing changed)."""
        entry: Entry | None = self.store.get(key)
        if entry is None:
            entry = {}
        if self.gap is None:
            accepted = self._add_aligned(entry, key, ts, record, wm, out)
        else:
            accepted = self._add_session(entry, key, ts, record, wm, out)
        if accepted:
            self.store[key] = entry
        return accepted

    def _new_window(self, key: Any, end: float, wm: float) -> None:
        if self.gap is None:
            for t in (end - 1, end + self.lateness):
                if t > wm and t not in self.check_set:
                    self.check_set.add(t)
                    heapq.heappush(self.checks, t)
            return
        if end > wm:  # a session is complete once the watermark passes its end
            self.fire.add(end, key)  # (window/operator.py's module docs)
        self.purge.add(end + self.lateness, key)

    def _add_aligned(self, entry: Entry, key: Any, ts: float, record: Any, wm: float,
                     out: list[Any]) -> bool:
        size, slide, lateness = self.size, self.slide, self.lateness
        start = ts - ts % slide
        lowest = ts - size
        accepted = False
        while start > lowest:
            end = start + size
            if wm >= end + lateness:
                break  # purged, and so is every earlier window of this record
            w = entry.get((start, end))
            if w is None:
                w = entry[(start, end)] = [self._create(), 0, False]
                self._new_window(key, end, wm)
            w[0] = self._add(w[0], record)
            accepted = True
            self._touched(key, start, end, w, wm, out)
            start -= slide
        return accepted

    def _add_session(self, entry: Entry, key: Any, ts: float, record: Any, wm: float,
                     out: list[Any]) -> bool:
        assert self.gap is not None
        start, end = ts, ts + self.gap
        hits = sorted(se for se in entry if se[0] <= end and se[1] >= start)
        if not hits:
            if wm >= end + self.lateness:
                return False
            acc = self._create()
            pending = 0
        else:
            start = min(start, hits[0][0])
            end = max(end, *(se[1] for se in hits))
            parts = [entry[se] for se in hits]
            acc = parts[0][0]
            for part in parts[1:]:
                acc = self._merge(acc, part[0])
            pending = sum(part[1] for part in parts)
        acc = self._add(acc, record)
        if hits == [(start, end)]:
            w = entry[(start, end)]  # the record fell inside an existing session
            w[0] = acc
        else:
            for old in hits:
                del entry[old]
                self.dirty.pop((key, *old), None)  # type: ignore[arg-type]
            w = entry[(start, end)] = [acc, pending, False]
            self._new_window(key, end, wm)
        self._touched(key, start, end, w, wm, out)
        return True

    def _touched(self, key: Any, start: float, end: float, w: list[Any], wm: float,
                 out: list[Any]) -> None:
        """A record was added to window ``w``: fire late, or count towards early firing."""
        if end - self.fire_offset <= wm:
            w[2] = True
            self._fire(key, start, end, w, "late", out)
            return
        w[1] += 1
        if self.early_n is not None and w[1] >= self.early_n:
            self._fire(key, start, end, w, "early", out)
            self.dirty.pop((key, start, end), None)
        elif self.early_ms is not None:
            self.dirty[(key, start, end)] = None

    def _fire(self, key: Any, start: float, end: float, w: list[Any], kind: FiringKind,
              out: list[Any]) -> None:
        out.append(Firing(key, start, end, self._result(key, Window(start, end), w[0]), kind))
        w[1] = 0

    # ------------------------------------------------------------------ time
    def advance(self, wm: float, out: list[Any]) -> None:
        """The watermark reached ``wm``: fire on time, then purge, what it passed.

        When at least :data:`SCAN_MIN_DUE` timers are due and they are at least a quarter
        of the index (a tumbling window's end passing every key's window), the windows
        are read in one scan of the store instead of a point read per key; per key the
        firings are the same, in the same order (keys come in store order)."""
        if self.gap is None:
            checks = self.checks
            if checks and checks[0] <= wm:
                while checks and checks[0] <= wm:
                    self.check_set.discard(heapq.heappop(checks))
                self._sweep(wm, out)
            return
        fires = _pop_all(self.fire, wm)
        purges = _pop_all(self.purge, wm)
        due = sum(len(keys) for _, keys in fires) + sum(len(keys) for _, keys in purges)
        if due >= SCAN_MIN_DUE and 4 * due >= due + self.timer_count():
            self._advance_scan(fires, purges, out)
            return
        store = self.store
        changed: dict[Any, Entry] = {}
        for t, keys in fires:
            for key in keys:
                entry = changed.get(key)
                if entry is None:
                    entry = store.get(key)
                    if entry is None:
                        continue
                if self._fire_due(key, entry, t, out):
                    changed[key] = entry
        for t, keys in purges:
            for key in keys:
                entry = changed.get(key)
                if entry is None:
                    entry = store.get(key)
                    if entry is None:
                        continue
                if self._purge_due(key, entry, t):
                    changed[key] = entry
        for key, entry in changed.items():  # each came from the store
            if entry:
                store[key] = entry
            else:
                _discard(store, key)

    def _sweep(self, wm: float, out: list[Any]) -> None:
        """Aligned windows: one scan of the store firing (in end order per key) every
        window whose end the watermark passed, then dropping those beyond lateness."""
        store = self.store
        lateness = self.lateness
        later: dict[Any, Entry] | None = {} if isinstance(store, dict) else None
        for key, entry in store.items():
            changed = False
            due = [(se[1], se, w) for se, w in entry.items() if se[1] - 1 <= wm and not w[2]]
            if due:
                due.sort(key=lambda d: d[0])
                for _, (start, end), w in due:
                    w[2] = True
                    self._fire(key, start, end, w, "on_time", out)
                    self.dirty.pop((key, start, end), None)
                changed = True
            gone = [se for se in entry if se[1] + lateness <= wm]
            for se in gone:
                del entry[se]
                self.dirty.pop((key, *se), None)  # type: ignore[arg-type]
                changed = True
            if not changed:
                continue
            if later is not None:
                later[key] = entry
            else:
                _write_entry(store, key, entry)
        for key, entry in (later or {}).items():
            _write_entry(store, key, entry)

    def _fire_due(self, key: Any, entry: Entry, t: float, out: list[Any]) -> bool:
        """Fire the key's window whose fire timer is ``t``; whether one fired."""
        fired = False
        for (start, end), w in entry.items():
            if end == t and not w[2]:
                w[2] = True
                self._fire(key, start, end, w, "on_time", out)
                self.dirty.pop((key, start, end), None)
                fired = True
        return fired

    def _purge_due(self, key: Any, entry: Entry, t: float) -> bool:
        """Drop the key's window whose purge timer is ``t``; whether one was."""
        gone = [se for se in entry if se[1] + self.lateness == t]
        for se in gone:
            del entry[se]
            self.dirty.pop((key, *se), None)  # type: ignore[arg-type]
        return bool(gone)

    def _advance_scan(self, fires: list[tuple[float, list[Any]]],
                      purges: list[tuple[float, list[Any]]], out: list[Any]) -> None:
        fire_at: dict[Any, list[float]] = {}
        for t, keys in fires:  # times ascending
            for key in keys:
                fire_at.setdefault(key, []).append(t)
        purge_at: dict[Any, list[float]] = {}
        for t, keys in purges:
            for key in keys:
                purge_at.setdefault(key, []).append(t)
        store = self.store
        # a dict cannot change while it is iterated: collect its writes (a RocksDB scan
        # reads a snapshot, so the store's writes go out as the scan goes)
        later: dict[Any, Entry] | None = {} if isinstance(store, dict) else None
        for key, entry in store.items():
            ft = fire_at.get(key)
            pt = purge_at.get(key)
            if ft is None and pt is None:
                continue
            changed = False
            for t in ft or ():
                changed = self._fire_due(key, entry, t, out) or changed
            for t in pt or ():
                changed = self._purge_due(key, entry, t) or changed
            if not changed:
                continue
            if later is not None:
                later[key] = entry
            else:
                _write_entry(store, key, entry)
        for key, entry in (later or {}).items():
            _write_entry(store, key, entry)

    def early_round(self, out: list[Any]) -> None:
        """Fire ``early`` every window changed since its last firing."""
        changed: dict[Any, Entry] = {}
        for key, start, end in self.dirty:
            entry = changed.get(key)
            if entry is None:
                entry = changed[key] = self.store[key]
            w = entry[(start, end)]
            if not w[2]:
                self._fire(key, start, end, w, "early", out)
        self.dirty.clear()
        for key, entry in changed.items():
            self.store[key] = entry

    # ------------------------------------------------------------------ state
    def snapshot_state(self) -> dict[str, Any]:
        """The in-memory part (the timer index, changed windows); the windows themselves
        are the managed state :data:`WINDOW_STATE`."""
        return {"fire": self.fire.snapshot(), "purge": self.purge.snapshot(),
                "checks": sorted(self.check_set), "dirty": list(self.dirty),
                "sessions_fire_at_end": True}

    def restore_state(self, data: dict[str, Any]) -> None:
        """Load :meth:`snapshot_state` output."""
        fire = data["fire"]
        if self.gap is not None and not data.get("sessions_fire_at_end"):
            # a snapshot of an earlier version: its session timers are at end - 1
            fire = {t + 1: keys for t, keys in fire.items()}
        self.fire = TimerQueue.from_snapshot(fire)
        self.purge = TimerQueue.from_snapshot(data["purge"])
        self.checks = list(data.get("checks", ()))  # sorted: a heap
        self.check_set = set(self.checks)
        self.dirty = dict.fromkeys(data["dirty"])

    @staticmethod
    def split_state(data: dict[str, Any], place: Callable[[Any], int],
                    index: int) -> dict[str, Any]:
        """The part of :meth:`snapshot_state` output for the keys ``place`` puts on task
        ``index`` (the windows move with the managed state, by key group)."""
        # aligned windows' check times hold no keys: every part takes them all (a check
        # that finds nothing due costs a scan, never a firing)
        part: dict[str, Any] = {"fire": {}, "purge": {}, "checks": list(data.get("checks", ())),
                                "dirty": [w for w in data["dirty"] if place(w[0]) == index],
                                "sessions_fire_at_end": data.get("sessions_fire_at_end", False)}
        for name in ("fire", "purge"):
            for t, keys in data[name].items():
                mine = [k for k in keys if place(k) == index]
                if mine:
                    part[name][t] = mine
        return part

    def absorb(self, parts: Sequence[StoredWindows]) -> None:
        """Take the timers of ``parts`` (disjoint keys, the same store)."""
        for part in parts:
            self.fire.absorb(part.fire)
            self.purge.absorb(part.purge)
            self.dirty.update(part.dirty)
            for t in part.check_set - self.check_set:
                self.check_set.add(t)
                heapq.heappush(self.checks, t)
