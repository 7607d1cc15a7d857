"""The pure window operator: assign, aggregate incrementally, trigger, purge.

It has no engine dependency; it is driven by calls and returns what fired, which the
:class:`~jstormpy.window.WindowedBolt` turns into emitted tuples. Everything needed to
continue exactly where it was (accumulators, watermark, timers, early-fire counters
and the early-fire clock) is in :meth:`WindowOperator.snapshot`.

Semantics (time windows; the watermark ``wm`` means "no more timestamps ≤ wm"):

* a window ``[start, end)`` fires ``on_time`` when ``wm >= end - 1``; a session window
  when ``wm >= end``: sessions that touch merge, so a record at ``end`` still joins it,
  and a session fired at ``end - 1`` could grow after its on-time firing (it would fire
  on time twice, its records in both);
* before that it fires ``early`` every ``early_fire_every_n`` added records and/or at
  every multiple of ``early_fire_every_ms`` of processing time, if it changed since
  its last firing;
* after that, a record added while ``wm < end + allowed_lateness`` updates it and it
  fires ``late`` at once;
* it is purged once ``wm >= end + allowed_lateness``; a record none of whose windows
  can take it any more is returned as a :class:`LateRecord`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, MutableMapping, Sequence
from typing import Any, Protocol

import cloudpickle

from jstormpy.api.errors import CheckpointError, TopologyError
from jstormpy.window.assigners import (
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)
from jstormpy.window.count import CountWindowLogic, CountWindowState
from jstormpy.window.sliced import SlicedWindows
from jstormpy.window.stored import StoredWindows
from jstormpy.window.timers import TimerQueue
from jstormpy.window.types import Firing, FiringKind, LateRecord, Window

SNAPSHOT_FORMAT = 1
INF = math.inf

WindowId = tuple[Any, float, float]
"""``(key, start, end)``."""


def _never(key: Any, ts: float, record: Any) -> bool:
    """``try_add`` of operators without a fast path."""
    return False


class Aggregator(Protocol):
    """Incremental aggregation: only accumulators are stored, never records."""

    def create(self) -> Any:
        """A fresh, empty accumulator."""

    def add(self, acc: Any, record: Any) -> Any:
        """``acc`` with ``record`` added (return the new accumulator)."""

    def merge(self, a: Any, b: Any) -> Any:
        """Two accumulators combined (session merges, count-window panes)."""

    def result(self, key: Any, window: Window, acc: Any) -> Any:
        """The value emitted for a window."""


class _Win:
    """State of one live window."""

    __slots__ = ("acc", "fired", "pending")

    def __init__(self, acc: Any, pending: int = 0, fired: bool = False) -> None:
        self.acc = acc
        self.pending = pending
        """Records added since the last firing (for early_fire_every_n)."""
        self.fired = fired
        """Whether the watermark has passed the end (on_time or late already fired)."""


def _check_optional_positive(name: str, value: object, *, integer: bool = False) -> None:
    if value is None:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) \
            or value <= 0:
        what = "an int >= 1" if integer else "a finite number > 0"
        raise TopologyError(f"{name} must be None or {what}, got {value!r}")


class WindowOperator:
    """Keyed windows with watermark, early and late triggers over an :class:`Aggregator`.

    Args:
        assigner: TumblingWindows, SlidingWindows, SessionWindows or CountWindows.
        aggregator: object with ``create``/``add``/``merge``/``result``.
        allowed_lateness_ms: how long after the watermark passes a window's end late
            records still update it (``late`` firings).
        early_fire_every_ms: early-fire changed windows at every multiple of this many
            ms of processing time (see :meth:`on_processing_time`).
        early_fire_every_n: early-fire a window every this many added records.
        processing_time: windows close by processing time: :meth:`on_processing_time`
            advances the watermark to ``now - 1``.
        slicing: store tumbling/sliding windows as panes (one accumulator per key and
            ``gcd(size, slide)``, two-stacks aggregation; see :mod:`.sliced`). None
            (default) = whenever possible: integer sizes and no early firing. False
            forces one accumulator per window.
        stored: keep the open time windows in a mapping given by :meth:`bind_store`
            (the task's state store; :mod:`.stored`) with only a timer index in RAM;
            implies ``slicing=False``. Count windows keep each key's panes there (a
            :meth:`CountWindowState.dump` per key, read and written per record).

    Example:
        >>> class Count:
        ...     def create(self): return 0
        ...     def add(self, acc, rec): return acc + 1
        ...     def merge(self, a, b): return a + b
        ...     def result(self, key, window, acc): return acc
        >>> op = WindowOperator(TumblingWindows(10), Count())
        >>> op.process("k", 3, "r1"), op.process("k", 5, "r2")
        ([], [])
        >>> op.advance_watermark(9)
        [Firing(key='k', window_start=0, window_end=10, result=2, kind='on_time')]
    """

    def __init__(self, assigner: WindowAssigner, aggregator: Aggregator, *,
                 allowed_lateness_ms: float = 0, early_fire_every_ms: float | None = None,
                 early_fire_every_n: int | None = None, processing_time: bool = False,
                 slicing: bool | None = None, stored: bool = False) -> None:
        if not isinstance(assigner, TumblingWindows | SlidingWindows | SessionWindows
                          | CountWindows):
            raise TopologyError(
                "window must be TumblingWindows, SlidingWindows, SessionWindows or "
                f"CountWindows, got {assigner!r}")
        assigner.validate()
        lateness = allowed_lateness_ms
        if isinstance(lateness, bool) or not isinstance(lateness, int | float) \
                or not math.isfinite(lateness) or lateness < 0:
            raise TopologyError(
                f"allowed_lateness_ms must be a finite number >= 0, got {lateness!r}")
        _check_optional_positive("early_fire_every_ms", early_fire_every_ms)
        _check_optional_positive("early_fire_every_n", early_fire_every_n, integer=True)
        if isinstance(assigner, CountWindows) and (early_fire_every_ms or early_fire_every_n):
            raise TopologyError("CountWindows fire on element counts; early firing "
                                "(early_fire_every_ms / early_fire_every_n) does not apply")
        self.assigner = assigner
        self._aggregator = aggregator
        self._create: Callable[[], Any] = aggregator.create
        self._add: Callable[[Any, Any], Any] = aggregator.add
        self._merge: Callable[[Any, Any], Any] = aggregator.merge
        self._result: Callable[[Any, Window, Any], Any] = aggregator.result
        self._lateness = lateness
        self._early_ms = early_fire_every_ms
        self._early_n = early_fire_every_n
        self._processing_time = processing_time
        self._session = isinstance(assigner, SessionWindows)
        # how long before its end a window is complete (module docs): a record at end - 1
        # is the last an aligned window takes; a session still takes one at its end
        self._fire_offset = 0 if self._session else 1
        self._count: CountWindowLogic | None = None
        if isinstance(assigner, CountWindows):
            self._count = CountWindowLogic(assigner.size, assigner.step, self._create,
                                           self._add, self._merge)
        elif not self._session:
            self._size: float = assigner.size_ms
            self._slide: float = assigner.slide_ms
        self.stored = stored
        """Open windows (count windows: each key's panes) live in the bound store
        (:meth:`bind_store`), not in RAM."""
        self._window_store: Any = None
        can_slice = self.can_slice(assigner, early_fire_every_ms, early_fire_every_n, stored)
        if slicing and not can_slice:
            raise TopologyError("slicing needs tumbling/sliding windows with integer sizes "
                                "and no early firing, and windows not kept in a store")
        self._slicing = can_slice if slicing is None else slicing
        self._reset()

    @staticmethod
    def can_slice(assigner: WindowAssigner, early_fire_every_ms: float | None,
                  early_fire_every_n: int | None, stored: bool) -> bool:
        """Whether an operator so configured keeps its windows as slices (``slicing``
        None): tumbling or sliding windows of integer sizes, no early firing, not
        ``stored``."""
        return (not stored and isinstance(assigner, TumblingWindows | SlidingWindows)
                and isinstance(assigner.size_ms, int) and isinstance(assigner.slide_ms, int)
                and early_fire_every_ms is None and early_fire_every_n is None)

    def _reset(self) -> None:
        self._wm = -INF
        self._wins: dict[WindowId, _Win] = {}
        self._fire_timers = TimerQueue()
        self._purge_timers = TimerQueue()
        self._dirty: dict[WindowId, None] = {}
        self._next_early: float | None = None
        self._sessions: dict[Any, list[WindowId]] = {}
        self._counts: dict[Any, CountWindowState] = {}
        self._sliced: SlicedWindows | None = None
        self._stored: StoredWindows | None = None
        if self.stored and self._count is None:
            gap = self.assigner.gap_ms if self._session else None  # type: ignore[union-attr]
            size = 0.0 if self._session else self._size
            slide = 0.0 if self._session else self._slide
            self._stored = StoredWindows(size, slide, gap, self._lateness, self._aggregator,
                                         self._early_n, self._early_ms, self._window_store)
        if self._slicing:
            self._sliced = SlicedWindows(int(self._size), int(self._slide), self._lateness,
                                         self._aggregator)
        self.try_add: Callable[[Any, float, Any], bool] = (
            self._sliced.try_add if self._sliced is not None else _never)
        """``try_add(key, ts, record)``: the per-record fast path of sliced windows: adds
        a record that is on time for all its windows and returns True; otherwise does
        nothing and returns False (call :meth:`process`)."""
        self.late_records = 0
        """Records returned as LateRecord so far."""

    def bind_store(self, store: Any) -> None:
        """Keep the open windows in ``store`` (a ``MutableMapping``: the task's managed
        state :data:`~jstormpy.window.stored.WINDOW_STATE`); an operator made with
        ``stored=True`` only."""
        if not self.stored:
            raise TopologyError("bind_store needs an operator made with stored=True")
        self._window_store = store
        if self._stored is not None:
            self._stored.store = store

    @property
    def window_store(self) -> Any:
        """The mapping :meth:`bind_store` gave (None: not bound, or not ``stored``)."""
        return self._window_store

    # ------------------------------------------------------------------ queries
    @property
    def watermark(self) -> float:
        """The current watermark (−inf before the first advance)."""
        return self._wm

    @property
    def window_count(self) -> int:
        """Live (not yet purged) time windows (panes, when sliced), or keys with
        count-window state."""
        if self._sliced is not None:
            return self._sliced.pane_count
        if self._stored is not None:
            return self._stored.window_count
        if self._count is not None:
            return len(self._count_states())
        return len(self._wins)

    def _count_states(self) -> MutableMapping[Any, Any]:
        """Count windows' per-key state: :class:`CountWindowState` objects, or, ``stored``,
        their :meth:`~CountWindowState.dump` in the bound store (read and written back
        per record, so RAM holds none)."""
        if self.stored:
            if self._window_store is None:
                self._window_store = {}
            return self._window_store  # type: ignore[no-any-return]
        return self._counts

    # ------------------------------------------------------------------ input
    def add_rows_on_time(self, keys: Sequence[Any], rows: Sequence[Any], ts: float,
                         make_record: Callable[[Any], Any], start: int = 0) -> bool:
        """Sliced windows: add records all stamped ``ts`` when the watermark does not move
        (an ingestion-time batch after its first record), building a record per row
        only when ``add`` kept the last one; False (nothing done) when they need
        :meth:`process_batch` (see :meth:`SlicedWindows.add_rows_on_time`)."""
        sliced = self._sliced
        return sliced is not None and sliced.add_rows_on_time(keys, rows, ts, make_record,
                                                              start)

    def merge_on_time(self, keys: Sequence[Any], accs: Sequence[Any], ts: float) -> bool:
        """Sliced windows: merge partial accumulators of records all stamped ``ts`` when
        the watermark does not move (see :meth:`SlicedWindows.merge_on_time`); False
        (nothing done) when they need :meth:`process_batch` with
        :class:`~jstormpy.window.combine.Partial` records."""
        sliced = self._sliced
        return sliced is not None and sliced.merge_on_time(keys, accs, ts)

    def merge_panes(self, keys: Sequence[Any], starts: Sequence[float],
                    accs: Sequence[Any]) -> bool:
        """Sliced windows: merge partial accumulators of records of ``keys[i]`` in the
        slice starting at ``starts[i]`` (event time, combined before the shuffle), when
        every such slice is on time for all its windows (see
        :meth:`SlicedWindows.merge_panes`); False (nothing done) otherwise, or for an
        operator that does not slice (use :meth:`process_batch` with
        :class:`~jstormpy.window.combine.Partial` records)."""
        sliced = self._sliced
        return sliced is not None and sliced.merge_panes(keys, starts, accs)

    def process(self, key: Hashable, timestamp: float,
                record: Any) -> list[Firing | LateRecord]:
        """Add one record; returns the early/late firings it caused, or a LateRecord.

        ``timestamp`` is ignored by count windows.
        """
        if self._count is not None:
            return self._process_count(key, record)
        if self._stored is not None:
            got: list[Firing | LateRecord] = []
            if self._stored.process(key, timestamp, record, self._wm, got):
                return got
            return self._late(key, timestamp, record)
        if self._session:
            return self._process_session(key, timestamp, record)
        if self._sliced is not None:
            out: list[Firing | LateRecord] = []
            if self._sliced.process(key, timestamp, record, self._wm, out):
                return out
            return self._late(key, timestamp, record)
        return self._process_aligned(key, timestamp, record)

    def process_batch(self, keys: Sequence[Any], timestamps: Sequence[float],
                      records: Sequence[Any], watermarks: Sequence[float] | None = None,
                      *, columnar: bool = False,
                      values: Sequence[Any] | None = None) -> list[Any]:
        """Add many records: the same results, in the same order, as calling
        ``process(keys[i], timestamps[i], records[i])`` and then (if ``watermarks`` is
        given) ``advance_watermark(watermarks[i])`` for each ``i`` in turn.

        Sliced windows take a fast path: one loop adding each record to its slice's
        dict, with rounds fired inline when a watermark makes one due. With
        ``columnar=True`` their on-time firings come as one
        :class:`~jstormpy.window.types.FiringRun` per window end instead of a
        ``Firing`` per key (what ``WindowedBolt.execute_batch`` emits with one
        ``emit_batch``).

        With a built-in aggregate (:mod:`jstormpy.window.aggregates`) sliced windows add
        whole columns: ``values`` is the aggregate's input column (``records`` itself
        when the aggregate's ``field`` is None); ``records`` is then read only for
        records that are late or follow a due watermark.
        """
        sliced = self._sliced
        if sliced is not None:
            out: list[Any] = []
            if values is None and getattr(self._aggregator, "add_many", None) is not None \
                    and getattr(self._aggregator, "field", "") is None:
                values = records
            sliced.columnar = columnar
            try:
                self._wm, late = sliced.process_batch(keys, timestamps, records, watermarks,
                                                      self._wm, out, values)
            except BaseException:
                # aggregation code raised mid-batch: keep the watermark the slices are at
                self._wm = max(self._wm, sliced.wm)
                raise
            finally:
                sliced.columnar = False
            self.late_records += late
            return out
        res: list[Firing | LateRecord] = []
        process = self.process
        if watermarks is None:
            for key, ts, rec in zip(keys, timestamps, records, strict=True):
                res += process(key, ts, rec)
            return res
        advance = self.advance_watermark
        for key, ts, rec, wm in zip(keys, timestamps, records, watermarks, strict=True):
            res += process(key, ts, rec)
            res += advance(wm)
        return res

    def _late(self, key: Any, timestamp: float, record: Any) -> list[Firing | LateRecord]:
        self.late_records += 1
        return [LateRecord(key, timestamp, record)]

    def _process_aligned(self, key: Any, ts: float, record: Any) -> list[Firing | LateRecord]:
        wm = self._wm
        size = self._size
        slide = self._slide
        lateness = self._lateness
        wins = self._wins
        add = self._add
        out: list[Firing | LateRecord] = []
        start = ts - ts % slide
        lowest = ts - size
        accepted = False
        while start > lowest:
            end = start + size
            if wm >= end + lateness:
                break  # purged, and so is every earlier window of this record
            wid = (key, start, end)
            w = wins.get(wid)
            if w is None:
                w = wins[wid] = _Win(self._create())
                if end - 1 > wm:
                    self._fire_timers.add(end - 1, wid)
                self._purge_timers.add(end + lateness, wid)
            w.acc = add(w.acc, record)
            accepted = True
            self._touched(wid, w, out)
            start -= slide
        if not accepted:
            return self._late(key, ts, record)
        return out

    def _process_session(self, key: Any, ts: float, record: Any) -> list[Firing | LateRecord]:
        start, end = ts, ts + self.assigner.gap_ms  # type: ignore[union-attr]
        index = self._sessions.get(key)
        hits = [wid for wid in index if wid[1] <= end and wid[2] >= start] if index else []
        if not hits:
            if self._wm >= end + self._lateness:
                return self._late(key, ts, record)
            acc = self._create()
            pending = 0
        else:
            hits.sort(key=lambda wid: wid[1])
            start = min(start, hits[0][1])
            end = max(end, *(wid[2] for wid in hits))
            wins = self._wins
            parts = [wins[wid] for wid in hits]
            acc = parts[0].acc
            for part in parts[1:]:
                acc = self._merge(acc, part.acc)
            pending = sum(part.pending for part in parts)
        acc = self._add(acc, record)
        wid = (key, start, end)
        if hits and hits == [wid]:
            w = self._wins[wid]  # the record fell inside an existing session
            w.acc = acc
        else:
            for old in hits:
                del self._wins[old]
                self._dirty.pop(old, None)
                index.remove(old)  # type: ignore[union-attr]
            w = self._wins[wid] = _Win(acc, pending)
            self._sessions.setdefault(key, []).append(wid)
            if end > self._wm:
                self._fire_timers.add(end, wid)
            self._purge_timers.add(end + self._lateness, wid)
        out: list[Firing | LateRecord] = []
        self._touched(wid, w, out)
        return out

    def _touched(self, wid: WindowId, w: _Win, out: list[Firing | LateRecord]) -> None:
        """A record was added to ``w``: fire late, or count towards early firing."""
        if wid[2] - self._fire_offset <= self._wm:
            w.fired = True
            self._fire(wid, w, "late", out)
            return
        w.pending += 1
        if self._early_n is not None and w.pending >= self._early_n:
            self._fire(wid, w, "early", out)
            self._dirty.pop(wid, None)
        elif self._early_ms is not None:
            self._dirty[wid] = None

    def _fire(self, wid: WindowId, w: _Win, kind: FiringKind, out: list[Any]) -> None:
        key, start, end = wid
        out.append(Firing(key, start, end, self._result(key, Window(start, end), w.acc), kind))
        w.pending = 0

    def _process_count(self, key: Any, record: Any) -> list[Firing | LateRecord]:
        logic = self._count
        assert logic is not None
        if self.stored:
            states = self._count_states()
            data = states.get(key)
            state = logic.new_state() if data is None else \
                CountWindowState.load(logic.panes_kept, data)
            done = logic.add(state, record)
            states[key] = state.dump()
        else:
            state = self._counts.get(key)
            if state is None:
                state = self._counts[key] = logic.new_state()
            done = logic.add(state, record)
        if done is None:
            return []
        start, end, acc = done
        return [Firing(key, start, end, self._result(key, Window(start, end), acc), "on_time")]

    # ------------------------------------------------------------------ time
    def advance_watermark(self, watermark: float, *, columnar: bool = False) -> list[Any]:
        """Move the watermark forward (never back); fire and purge what it passed.
        ``columnar`` as in :meth:`process_batch`."""
        if not watermark > self._wm:
            return []
        self._wm = watermark
        out: list[Any] = []
        sliced = self._sliced
        if sliced is not None:
            if watermark < sliced.next_due():
                sliced.set_watermark(watermark)
                return out  # nothing due: skip the fire/purge pass
            sliced.columnar = columnar
            try:
                sliced.advance(watermark, out)
            finally:
                sliced.columnar = False
            return out
        if self._stored is not None:
            self._stored.advance(watermark, out)
            return out
        wins = self._wins
        for wid in self._fire_timers.pop_due(watermark):
            w = wins.get(wid)  # type: ignore[call-overload]
            if w is not None and not w.fired:
                w.fired = True
                self._fire(wid, w, "on_time", out)  # type: ignore[arg-type]
                self._dirty.pop(wid, None)  # type: ignore[call-overload]
        for wid in self._purge_timers.pop_due(watermark):
            if wins.pop(wid, None) is not None:  # type: ignore[call-overload]
                self._dirty.pop(wid, None)  # type: ignore[call-overload]
                if self._session:
                    index = self._sessions[wid[0]]  # type: ignore[index]
                    index.remove(wid)
                    if not index:
                        del self._sessions[wid[0]]  # type: ignore[index]
        return out

    def on_processing_time(self, now_ms: float) -> list[Firing]:
        """Processing time reached ``now_ms``.

        In processing-time mode the watermark advances to ``now_ms - 1`` first. Then, if
        ``early_fire_every_ms`` is set and a multiple of it was crossed since the last
        early round, every window changed since its last firing fires ``early``. (The
        first call only starts the early-fire clock.)
        """
        out: list[Firing] = []
        if self._processing_time:
            out.extend(self.advance_watermark(now_ms - 1))
        every = self._early_ms
        if every is None:
            return out
        stored = self._stored
        if stored is not None:
            if self._next_early is not None and now_ms >= self._next_early and stored.dirty:
                stored.early_round(out)  # type: ignore[arg-type]
        elif self._next_early is not None and now_ms >= self._next_early and self._dirty:
            wins = self._wins
            for wid in self._dirty:
                w = wins[wid]
                if not w.fired:
                    self._fire(wid, w, "early", out)
            self._dirty.clear()
        if self._next_early is None or now_ms >= self._next_early:
            self._next_early = (now_ms // every + 1) * every
        return out

    def finish(self, *, columnar: bool = False) -> list[Any]:
        """End of input: the watermark goes to +inf, every remaining window fires
        ``on_time`` (count windows: the partly filled next window of each key).
        ``columnar`` as in :meth:`process_batch`."""
        out: list[Any] = self.advance_watermark(INF, columnar=columnar)
        if self._count is not None:
            logic = self._count
            states = self._count_states()
            # a dict cannot change while it is iterated: its writes wait (a RocksDB scan
            # reads a snapshot of the database, so its writes go out as the scan goes)
            later: dict[Any, Any] | None = {} if isinstance(states, dict) else None
            for key, data in states.items():  # stored: one scan of the store
                state = CountWindowState.load(logic.panes_kept, data) if self.stored else data
                done = logic.flush(state)
                if done is not None:
                    start, end, acc = done
                    out.append(Firing(key, start, end,
                                      self._result(key, Window(start, end), acc), "on_time"))
                    state.n = -(-state.n // logic.slide) * logic.slide  # flushed once only
                    if not self.stored:
                        continue
                    if later is None:
                        states[key] = state.dump()
                    else:
                        later[key] = state.dump()
            for key, data in (later or {}).items():
                states[key] = data
        return out

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Everything needed to continue exactly as if never interrupted.

        Returns ``{"format", "assigner", "blob"}``; ``blob`` is a pickle (cloudpickle,
        so keys and accumulators of classes defined in ``__main__`` survive), which makes
        the snapshot independent of later changes to the operator.
        """
        state = {
            "wm": self._wm,
            "wins": {wid: (w.acc, w.pending, w.fired) for wid, w in self._wins.items()},
            "fire": self._fire_timers.snapshot(),
            "purge": self._purge_timers.snapshot(),
            "dirty": list(self._dirty),
            "next_early": self._next_early,
            "counts": {key: st.dump() for key, st in self._counts.items()},
            "late_records": self.late_records,
            "sliced": self._sliced.snapshot_state() if self._sliced is not None else None,
            "stored": self._stored.snapshot_state() if self._stored is not None else None,
        }
        snap = {"format": SNAPSHOT_FORMAT, "assigner": repr(self.assigner),
                "blob": cloudpickle.dumps(state, protocol=5)}
        if self.stored:  # the windows are the managed state WINDOW_STATE, not in the blob
            snap["stored"] = True
        return snap

    @staticmethod
    def snapshot_is_stored(snap: dict[str, Any]) -> bool:
        """Whether :meth:`snapshot` output (or a part of one) was taken by a ``stored``
        operator (its windows are in the managed state, not in the snapshot)."""
        return bool(snap.get("stored"))

    def restore(self, snap: dict[str, Any]) -> None:
        """Replace all state with a :meth:`snapshot` taken by an identically configured
        operator (raises CheckpointError otherwise)."""
        if snap.get("format") != SNAPSHOT_FORMAT:
            raise CheckpointError(f"unknown window snapshot format {snap.get('format')!r}")
        if snap.get("assigner") != repr(self.assigner):
            raise CheckpointError(
                f"window snapshot was taken with {snap.get('assigner')}, but the operator "
                f"is configured with {self.assigner!r}")
        if bool(snap.get("stored")) != self.stored:
            raise CheckpointError(
                f"window snapshot was taken with stored={bool(snap.get('stored'))}, but "
                f"the operator has stored={self.stored}")
        state = cloudpickle.loads(snap["blob"])
        self._reset()
        self._wm = state["wm"]
        for wid, (acc, pending, fired) in state["wins"].items():
            self._wins[wid] = _Win(acc, pending, fired)
            if self._session:
                self._sessions.setdefault(wid[0], []).append(wid)
        self._fire_timers = TimerQueue.from_snapshot(state["fire"])
        self._purge_timers = TimerQueue.from_snapshot(state["purge"])
        self._dirty = dict.fromkeys(state["dirty"])
        self._next_early = state["next_early"]
        if self._count is not None:
            kept = self._count.panes_kept
            self._counts = {key: CountWindowState.load(kept, data)
                            for key, data in state["counts"].items()}
        self.late_records = state["late_records"]
        if self._sliced is not None:
            if state["sliced"] is None:
                raise CheckpointError("window snapshot was taken without slicing")
            self._sliced.restore_state(state["sliced"], self._wm)
        if self._stored is not None:
            self._stored.restore_state(state["stored"])

    # ------------------------------------------------------------------ rescaling
    @staticmethod
    def split_snapshot(snap: dict[str, Any], place: Callable[[Any], int],
                       parallelism: int) -> list[dict[str, Any]]:
        """One :meth:`snapshot` cut into ``parallelism`` snapshots by key: part ``i`` holds
        the windows, timers, sliced panes and count-window state of the keys with
        ``place(key) == i``, and the snapshot's watermark and early-fire clock. Its late
        count goes to part 0 (the sum is unchanged). Needs no aggregator: nothing fires.

        A part restores like any snapshot; :meth:`restore_parts` merges the parts that a
        new task takes from several old ones.
        """
        if snap.get("format") != SNAPSHOT_FORMAT:
            raise CheckpointError(f"unknown window snapshot format {snap.get('format')!r}")
        state = cloudpickle.loads(snap["blob"])
        parts: list[dict[str, Any]] = [{
            "wm": state["wm"], "wins": {}, "fire": {}, "purge": {}, "dirty": [],
            "next_early": state["next_early"], "counts": {},
            "late_records": state["late_records"] if i == 0 else 0, "sliced": None,
            "stored": None}
            for i in range(parallelism)]
        for wid, entry in state["wins"].items():
            parts[place(wid[0])]["wins"][wid] = entry
        for name in ("fire", "purge"):
            for t, wids in state[name].items():
                for wid in wids:
                    parts[place(wid[0])][name].setdefault(t, []).append(wid)
        for wid in state["dirty"]:
            parts[place(wid[0])]["dirty"].append(wid)
        for key, data in state["counts"].items():
            parts[place(key)]["counts"][key] = data
        sliced = state["sliced"]
        if sliced is not None:
            for i, part in enumerate(parts):
                part["sliced"] = SlicedWindows.split_state(sliced, place, i)
        stored = state.get("stored")
        if stored is not None:
            for i, part in enumerate(parts):
                part["stored"] = StoredWindows.split_state(stored, place, i)
        extra = {"stored": True} if snap.get("stored") else {}
        return [{"format": SNAPSHOT_FORMAT, "assigner": snap["assigner"],
                 "blob": cloudpickle.dumps(part, protocol=5), **extra} for part in parts]

    def restore_parts(self, parts: Sequence[dict[str, Any]]) -> list[Firing]:
        """Restore from the parts of several old operators' snapshots
        (:meth:`split_snapshot`) that hold disjoint keys, each taken at its own watermark.

        Each part is restored alone and brought to the highest of their watermarks, which
        fires (on time) the windows it passes; then the parts are merged into this
        operator at that watermark. Returns those firings, in part order: the caller
        emits them before anything else. Bringing every part up (rather than the merged
        operator down to the lowest watermark) never fires a window twice: a window
        another part already fired stays fired.
        """
        if not parts:
            self._reset()
            return []
        ops = []
        for part in parts:
            op = WindowOperator.__new__(WindowOperator)
            op.__dict__.update(self.__dict__)  # the same configuration
            op.restore(part)
            ops.append(op)
        wm = max(op.watermark for op in ops)
        fired: list[Firing] = []
        for op in ops:
            fired += op.advance_watermark(wm)  # Firings: columnar is off
        self._reset()
        self._wm = wm
        sessions = self._sessions
        for op in ops:
            self._wins.update(op._wins)
            for wid in op._wins:
                if self._session:
                    sessions.setdefault(wid[0], []).append(wid)
            self._fire_timers.absorb(op._fire_timers)
            self._purge_timers.absorb(op._purge_timers)
            self._dirty.update(op._dirty)
            if self._next_early is None:
                self._next_early = op._next_early
            self._counts.update(op._counts)
            self.late_records += op.late_records
        if self._sliced is not None:
            self._sliced.absorb([op._sliced for op in ops if op._sliced is not None], wm)
        if self._stored is not None:
            self._stored.absorb([op._stored for op in ops if op._stored is not None])
        return fired
