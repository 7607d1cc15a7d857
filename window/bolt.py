"""WindowedBolt: the window operator on a Storm-style bolt.

Subclasses configure windows with class attributes (see ``docs/windows.md``) and
implement ``create/add/merge/result``. The bolt extracts keys and timestamps, generates
or follows watermarks, drives a :class:`~jstormpy.window.operator.WindowOperator` and
emits what it returns:

* ``default``: ``(key, window_start, window_end, result, kind)`` per firing;
* ``late_stream``: records that came after all their windows were purged, with their
  original values (counted in :attr:`WindowedBolt.late_records`);
* ``errors``: ``(reason, values)`` for tuples without a usable key or timestamp
  (counted in :attr:`WindowedBolt.error_records`); the task never crashes on them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from jstormpy.api.batch import Batch
from jstormpy.api.component import (
    Bolt,
    TopologyContext,
    Tuple,
    bound_emitter,
    state_store_kind,
)
from jstormpy.api.errors import CheckpointError, JStormError
from jstormpy.window.aggregates import BuiltinAggregate
from jstormpy.window.assigners import CountWindows, WindowAssigner
from jstormpy.window.combine import Partial, merging_add, partials_refusal
from jstormpy.window.config import default_tick_interval, validate_window_config
from jstormpy.window.operator import WindowOperator
from jstormpy.window.sliced import on_time_from
from jstormpy.window.stored import WINDOW_STATE
from jstormpy.window.types import (
    ERROR_FIELDS,
    ERRORS_STREAM,
    FIRING_FIELDS,
    Firing,
    FiringRun,
)
from jstormpy.window.watermarks import BoundedOutOfOrderness, ChannelWatermarks

_SNAPSHOT_FORMAT = 1
_NEG_INF = -math.inf
_INF = math.inf
_NUMBERS = frozenset((int, float))
_NO_RESULTS: list[Any] = []  # never mutated: results are concatenated, not extended


class _DataError(Exception):
    """A tuple cannot be windowed; the message is the reason reported on ``errors``."""


class _MissingMerge:
    """Stands in for merge() where the window kind never merges accumulators."""

    def __call__(self, a: Any, b: Any) -> Any:
        raise NotImplementedError("this window needs merge(a, b); implement it")


class _Runtime:
    """Per-task state of a WindowedBolt (built lazily: subclasses may skip super().__init__)."""

    __slots__ = ("batched", "builtin", "columnar", "error_records", "forwarded", "key_fields",
                 "late_records", "late_stream", "mode", "op", "partials", "pending",
                 "ts_field", "tracker")

    def __init__(self, bolt: WindowedBolt, stored: bool = False) -> None:
        validate_window_config(bolt, type(bolt).__name__)
        window: WindowAssigner = bolt.window  # type: ignore[assignment]
        self.mode = "count" if isinstance(window, CountWindows) else bolt.time
        builtin = bolt.aggregate
        aggregator: Any
        self.partials: str | None = "a built-in aggregate"
        """Why this task's operator cannot fold in partials (None: it can)."""
        if builtin is not None:  # a built-in aggregate (window/aggregates.py)
            aggregator = builtin
        else:
            merge = getattr(bolt, "merge", None) or _MissingMerge()
            add = getattr(bolt, "add")  # noqa: B009
            self.partials = partials_refusal(bolt)
            # may get partials (window/combine.py): ingestion-time ones, and event-time
            # ones unless the operator merges them into its slices (merge_panes)
            if self.partials is None and (self.mode != "event" or not WindowOperator.can_slice(
                    window, bolt.early_fire_every_ms, bolt.early_fire_every_n, stored)):
                add = merging_add(add, merge)
            aggregator = _BoundAggregator(getattr(bolt, "create"),  # noqa: B009
                                          add, merge, getattr(bolt, "result"))  # noqa: B009
        self.builtin: BuiltinAggregate | None = builtin
        self.op = WindowOperator(
            window, aggregator, allowed_lateness_ms=bolt.allowed_lateness_ms,
            early_fire_every_ms=bolt.early_fire_every_ms,
            early_fire_every_n=bolt.early_fire_every_n,
            processing_time=self.mode == "processing", stored=stored)
        strategy = bolt.watermark
        self.tracker: ChannelWatermarks | None = None
        if isinstance(strategy, BoundedOutOfOrderness) and self.mode != "count":
            idle = bolt.idle_timeout_ms
            if idle is None:
                idle = strategy.idle_timeout_ms
            self.tracker = ChannelWatermarks(strategy.max_lag_ms, idle)
        key = bolt.key
        self.key_fields: tuple[str, ...] | str | None = (
            tuple(key) if isinstance(key, list | tuple) else key)
        ts = bolt.timestamp
        self.ts_field: str | None = ts if isinstance(ts, str) else None
        self.late_stream: str = bolt.late_stream
        self.forwarded = _NEG_INF
        self.batched = False
        self.columnar = False
        """The collector has emit_batch: each on-time round goes out as one batch."""
        """execute_batch was called: emit the final firings with emit_batch too."""
        self.late_records = 0
        self.error_records = 0
        self.pending: list[Firing] = []
        """Firings of a rescale's restore (:meth:`WindowOperator.restore_parts`) not yet
        emitted: they go out before anything else the task emits, and are in the
        snapshot until then."""


class _LazyTuples(Sequence[Tuple]):
    """A batch's records as Tuples, built only when one is read (the column path of
    built-in aggregates reads none unless a record is late)."""

    __slots__ = ("_batch", "_rows")

    def __init__(self, batch: Batch, rows: Sequence[Any] | None = None) -> None:
        self._batch = batch
        self._rows = batch.rows if rows is None else rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return _LazyTuples(self._batch, self._rows[i])
        b = self._batch
        return Tuple(self._rows[i], b.field_index, b.source, b.stream, b.task)

    def __iter__(self) -> Iterator[Tuple]:
        return map(self._batch.tuple_class, self._rows)


class _BoundAggregator:
    """The bolt's aggregation methods, as the operator's Aggregator."""

    __slots__ = ("add", "create", "merge", "result")

    def __init__(self, create: Any, add: Any, merge: Any, result: Any) -> None:
        self.create = create
        self.add = add
        self.merge = merge
        self.result = result


class WindowedBolt(Bolt):
    """A bolt that aggregates its input over keyed event-time (or other) windows.

    Class attributes (all may also be set per instance in ``__init__``):

    * ``window``: TumblingWindows / SlidingWindows / SessionWindows / CountWindows.
    * ``time``: ``"event"`` (timestamps from the tuples), ``"ingestion"`` (arrival time at
      this bolt) or ``"processing"`` (windows close by processing time, on ticks).
    * ``timestamp``: event-time field name (epoch ms), or override ``timestamp(tup)``.
    * ``key``: field name, tuple of field names, or None (one global window per window).
    * ``watermark``: ``BoundedOutOfOrderness(...)`` to generate watermarks from the
      timestamps per input channel; None follows the engine's in-band watermark.
    * ``allowed_lateness_ms``, ``early_fire_every_ms``, ``early_fire_every_n``.
    * ``late_stream``: stream for records beyond the allowed lateness (default "late").
    * ``idle_timeout_ms``: overrides the strategy's idle timeout.

    Implement ``create()``, ``add(acc, tup)``, ``result(key, window, acc)`` and, for
    session windows and sliding count windows, ``merge(a, b)`` -- or set ``aggregate``
    to a built-in aggregate (``jstormpy.window.aggregates``).
    """

    outputs: ClassVar[Sequence[str]] = FIRING_FIELDS  # type: ignore[assignment]
    """The default stream; see :meth:`resolve_outputs` for every stream."""
    window: ClassVar[WindowAssigner | None] = None
    aggregate: ClassVar[BuiltinAggregate | None] = None
    """A built-in aggregate (``Count()``, ``Sum("f")``, ``Min``, ``Max``, ``Mean``) instead
    of ``create``/``add``/``merge``/``result``; sliced windows then add whole columns."""
    time: ClassVar[str] = "event"
    timestamp: ClassVar[Any] = None
    key: ClassVar[str | tuple[str, ...] | None] = None
    watermark: ClassVar[BoundedOutOfOrderness | None] = None
    allowed_lateness_ms: ClassVar[float] = 0
    early_fire_every_ms: ClassVar[float | None] = None
    early_fire_every_n: ClassVar[int | None] = None
    late_stream: ClassVar[str] = "late"
    idle_timeout_ms: ClassVar[float | None] = None
    combine_before_shuffle: ClassVar[bool] = True
    """Let the tasks that emit to this bolt pre-aggregate its input with ``create`` and
    ``add`` and ship partial accumulators, which this bolt folds in with ``merge``, where
    that gives the same result (``docs/windows.md``, "Combining before the shuffle").
    ``create``/``add``/``merge`` then also run on an unprepared copy of the bolt in the
    sending task: set False if they read anything ``prepare`` sets up."""
    tick_interval_ms: ClassVar[float | None] = None
    """Derived per subclass from the config (see ``config.default_tick_interval``) unless
    the subclass sets it explicitly."""
    _jw_explicit_tick: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "tick_interval_ms" in cls.__dict__:
            cls._jw_explicit_tick = True
        elif not cls._jw_explicit_tick:
            cls.tick_interval_ms = default_tick_interval(cls)

    # ------------------------------------------------------------ builder hooks
    @classmethod
    def validate_config(cls) -> None:
        """Raise :class:`~jstormpy.api.errors.TopologyError` naming the first bad setting."""
        validate_window_config(cls, cls.__name__)

    @classmethod
    def resolve_outputs(cls, input_fields: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Every output stream and its fields, given the fields of the input stream.

        Example:
            >>> from jstormpy.window import TumblingWindows
            >>> class W(WindowedBolt):
            ...     window = TumblingWindows(1000)
            ...     timestamp = "ts"
            >>> W.resolve_outputs(("sensor", "ts"))["late"]
            ('sensor', 'ts')
        """
        return {"default": FIRING_FIELDS, cls.late_stream: tuple(input_fields),
                ERRORS_STREAM: ERROR_FIELDS}

    # ------------------------------------------------------------ metrics
    @property
    def late_records(self) -> int:
        """Records emitted on the late stream (beyond allowed lateness)."""
        rt = self.__dict__.get("_jw_rt")
        return rt.late_records if rt is not None else 0

    @property
    def error_records(self) -> int:
        """Tuples reported on the errors stream."""
        rt = self.__dict__.get("_jw_rt")
        return rt.error_records if rt is not None else 0

    @property
    def current_watermark(self) -> float:
        """This task's window watermark."""
        rt = self.__dict__.get("_jw_rt")
        return rt.op.watermark if rt is not None else _NEG_INF

    def now_ms(self) -> float:
        """Processing time in epoch ms for ingestion/processing time stamps (the clock
        ``on_tick`` is assumed to use); override in tests."""
        return time.time() * 1000.0

    # ------------------------------------------------------------ lifecycle
    def _jw_runtime(self) -> _Runtime:
        rt = self.__dict__.get("_jw_rt")
        if rt is None:
            # with a RocksDB state store the open windows live in it (window/stored.py)
            rt = self.__dict__["_jw_rt"] = _Runtime(
                self, stored=state_store_kind(self) == "rocksdb")
        return rt

    def _jw_bind_store(self, rt: _Runtime) -> None:
        """Give a ``stored`` operator the task's window state (the managed state
        ``WINDOW_STATE``: the restored dict in ``restore``, the store's in ``prepare``)."""
        if rt.op.stored:
            rt.op.bind_store(self.state(WINDOW_STATE))

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Validate the configuration and set up (or keep restored) window state."""
        rt = self._jw_runtime()
        self._jw_bind_store(rt)
        collector = bound_emitter(self)
        rt.columnar = callable(getattr(collector, "emit_batch", None))
        if rt.tracker is not None and context.input_tasks:
            # the channels of this run: restored maxima of channels that a rescale of
            # an upstream component renamed are dropped (the watermark never goes back)
            rt.tracker.keep_only(context.input_tasks)
        if not type(self)._jw_explicit_tick:
            self.tick_interval_ms = default_tick_interval(self)  # type: ignore[misc]

    def snapshot(self) -> dict[str, Any]:
        """The whole window state: operator (windows, timers, counters), watermarks."""
        rt = self._jw_runtime()
        snap = {"format": _SNAPSHOT_FORMAT, "op": rt.op.snapshot(),
                "tracker": rt.tracker.snapshot() if rt.tracker is not None else None,
                "forwarded": rt.forwarded, "late_records": rt.late_records,
                "error_records": rt.error_records}
        if rt.pending:
            snap["pending"] = list(rt.pending)
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        """Reload :meth:`snapshot` output, or the parts :meth:`redistribute_keyed_state`
        gave this task (runs before ``prepare``)."""
        if not isinstance(snap, dict) or snap.get("format") != _SNAPSHOT_FORMAT:
            raise CheckpointError(f"{type(self).__name__}: not a WindowedBolt snapshot")
        # the windows are where the snapshot's operator kept them: in the managed state
        # (a stored operator, whatever the store now is) or in the snapshot
        parts = snap["parts"] if "parts" in snap else [snap["op"]]
        stored = any(WindowOperator.snapshot_is_stored(p) for p in parts)
        rt = self.__dict__["_jw_rt"] = _Runtime(self, stored=stored)
        self._jw_bind_store(rt)
        rt.pending = list(snap.get("pending", ()))
        if "parts" in snap:  # rescaled: windows of several old tasks, channels renamed
            rt.pending += rt.op.restore_parts(snap["parts"])
        else:
            rt.op.restore(snap["op"])
            if rt.tracker is not None and snap.get("tracker") is not None:
                rt.tracker.restore(snap["tracker"])
        rt.forwarded = snap["forwarded"]
        rt.late_records = snap["late_records"]
        rt.error_records = snap["error_records"]

    @staticmethod
    def redistribute_keyed_state(old_states: list[Any], new_parallelism: int,
                                 place: Callable[[Any], int]) -> list[dict[str, Any]]:
        """The rescale hook (``keygroups.redistribution_hook``): every old task's windows
        cut by key (``place(key)``: the new task owning its key group), so the windows of
        a key move whole, with their timers, panes and session bounds.

        New task ``i`` gets the parts of every old task for its keys, each with its old
        watermark; :meth:`restore` brings them to the highest one and merges them
        (:meth:`WindowOperator.restore_parts`). The per-channel watermarks start afresh
        (input task ids change with a rescale) and the operator's watermark never goes
        back, so a record is late after the rescale only if it was already behind a
        watermark before it. The new task forwards its watermark anew. Firings not yet
        emitted go to new task 0; the late and error counts too (their sums stay).
        """
        pending: list[Any] = []
        splits = []
        for old in old_states:
            if not isinstance(old, dict) or old.get("format") != _SNAPSHOT_FORMAT:
                raise CheckpointError(
                "WindowedBolt.redistribute_keyed_state got a snapshot that is not a "
                "WindowedBolt snapshot: a subclass that overrides snapshot() needs its own "
                "redistribute_state hook to change parallelism")
            pending += old.get("pending", ())
            splits.append(WindowOperator.split_snapshot(old["op"], place, new_parallelism))
        out = []
        for i in range(new_parallelism):
            new: dict[str, Any] = {
                "format": _SNAPSHOT_FORMAT, "parts": [parts[i] for parts in splits],
                "tracker": None, "forwarded": _NEG_INF,
                "late_records": sum(s["late_records"] for s in old_states) if i == 0 else 0,
                "error_records": sum(s["error_records"] for s in old_states) if i == 0
                else 0}
            if i == 0 and pending:
                new["pending"] = pending
            out.append(new)
        return out

    # ------------------------------------------------------------ input
    def _jw_key(self, rt: _Runtime, tup: Tuple) -> Any:
        fields = rt.key_fields
        try:
            if fields is None:
                return None
            if fields.__class__ is str:
                return tup[fields]  # type: ignore[index]
            return tuple(tup[f] for f in fields)
        except (KeyError, IndexError) as exc:
            raise _DataError(f"missing key field {exc.args[0]!r}") from None

    def _jw_timestamp(self, rt: _Runtime, tup: Tuple) -> float:
        field = rt.ts_field
        if field is not None:
            try:
                value = tup[field]
            except (KeyError, IndexError):
                raise _DataError(f"missing timestamp field {field!r}") from None
        else:
            try:
                value = self.timestamp(tup)
            except Exception as exc:  # user code on bad data: report, do not crash
                raise _DataError(f"timestamp() raised {exc!r}") from None
            field = "timestamp()"
        cls = value.__class__
        if cls is not int and cls is not float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _DataError(f"non-numeric timestamp {value!r} in {field!r}")
        if not math.isfinite(value):
            raise _DataError(f"non-finite timestamp {value!r} in {field!r}")
        return value

    def execute(self, tup: Tuple) -> None:
        """Window one tuple (errors stream if it has no usable key or timestamp)."""
        rt = self.__dict__.get("_jw_rt") or self._jw_runtime()
        op = rt.op
        mode = rt.mode
        try:
            fields = rt.key_fields
            if fields.__class__ is str:  # the common case, inlined: one field as the key
                try:
                    key = tup[fields]  # type: ignore[index]
                except (KeyError, IndexError) as exc:
                    raise _DataError(f"missing key field {exc.args[0]!r}") from None
            else:
                key = self._jw_key(rt, tup)
            if mode == "event":
                field = rt.ts_field
                ts: Any = None
                if field is not None:  # the common case, inlined: a plain number field
                    try:
                        ts = tup[field]
                    except (KeyError, IndexError):
                        pass
                    cls = ts.__class__
                    if not ((cls is int or cls is float) and -_INF < ts < _INF):
                        ts = None
                if ts is None:
                    ts = self._jw_timestamp(rt, tup)
            elif mode == "count":
                ts = 0
            else:  # ingestion / processing: arrival time, never behind the clock
                ts = max(self.now_ms(), op.watermark + 1)
        except _DataError as exc:
            rt.error_records += 1
            self.emit((str(exc), tuple(tup.values)), stream=ERRORS_STREAM)
            return
        results: list[Any] = _NO_RESULTS if op.try_add(key, ts, tup) else op.process(
            key, ts, tup)
        advanced = False
        tracker = rt.tracker
        if tracker is not None:
            if tracker.observe(tup.task, ts):
                wm = tracker.current()
                if wm > op.watermark:
                    more = op.advance_watermark(wm, columnar=rt.columnar)
                    if more:
                        results = results + more
                    advanced = True
        elif mode == "ingestion":
            more = op.advance_watermark(ts - 1, columnar=rt.columnar)
            if more:
                results = results + more
            advanced = True
        if results:
            self._jw_emit(rt, results)
            if advanced:
                self._jw_forward(rt)

    def execute_batch(self, batch: Batch) -> None:
        """Window a whole channel batch: the same output as ``execute`` per tuple.

        With event time from a timestamp field, the key and timestamp columns are
        taken once, the timestamps checked in one pass, the per-record watermarks
        computed in one pass, and the records added in one loop of the operator
        (sliced windows: one dict update per record). Firings go out with one
        ``emit_batch`` per run; the watermark is forwarded once, after them. Anything
        else (other time modes, ``timestamp()`` or ``execute`` overridden, a bad key or
        timestamp in the batch) goes through ``execute`` tuple by tuple.
        """
        rt = self.__dict__.get("_jw_rt") or self._jw_runtime()
        # a subclass that overrides execute() keeps getting every tuple through it
        own = type(self).execute is WindowedBolt.execute
        if own and rt.mode == "ingestion" and rt.tracker is None and \
                self._jw_ingest_batch(rt, batch):
            return
        cols = self._jw_columns(rt, batch) if own and rt.mode == "event" else None
        if cols is None:
            execute = self.execute
            for tup in batch:
                execute(tup)
            return
        keys, tss = cols
        tracker = rt.tracker
        wms = tracker.observe_batch(batch.task, tss) if tracker is not None else None
        op = rt.op
        before = op.watermark
        rt.batched = True
        builtin = rt.builtin
        if builtin is not None:  # whole columns; Tuples only for the records that need one
            results = op.process_batch(keys, tss, _LazyTuples(batch), wms, columnar=True,
                                       values=builtin.column(batch))
        else:
            results = op.process_batch(keys, tss, list(batch), wms, columnar=True)
        if results:
            self._jw_emit_runs(rt, results)
            if op.watermark > before:
                self._jw_forward(rt)

    def _jw_ingest_batch(self, rt: _Runtime, batch: Batch) -> bool:
        """Ingestion time, a whole channel batch (False: nothing done, use ``execute``).

        The batch arrived at one instant, so the clock is read once and every record gets
        the arrival stamp ``execute`` would give it with that reading; each record is
        followed by the watermark ``stamp - 1``, as in ``execute``. The records then go
        through the operator's batch path in one call (sliced windows: one dict update
        per record) and the firings out with ``emit_batch``; the watermark is forwarded
        once, after them. A batch whose key cannot be taken as a column (a missing
        field, short rows) goes through ``execute``, which reports each bad tuple.
        """
        n = len(batch)
        if not n:
            return True
        try:
            keys = self._jw_keys(rt, batch, n)
        except (KeyError, IndexError):
            return False
        op = rt.op
        before = op.watermark
        ts = max(self.now_ms(), before + 1)
        rt.batched = True
        rows = batch.rows
        make: Callable[[Any], Any] = batch.tuple_class  # Tuple.bound: cls(values)
        # the first record and its watermark ts - 1 (which may fire rounds); the rest
        # follow under that same watermark, so sliced windows add them in one loop,
        # reusing one Tuple while add() keeps none (the same results as process_batch)
        results = op.process_batch(keys[:1], [ts], [make(rows[0])], [ts - 1],
                                   columnar=True)
        if n > 1 and not op.add_rows_on_time(keys, rows, ts, make, 1):
            results += op.process_batch(keys[1:], [ts] * (n - 1), list(map(make, rows[1:])),
                                        [ts - 1] * (n - 1), columnar=True)
        if results:
            self._jw_emit_runs(rt, results)
            self._jw_forward(rt)  # as execute: any watermark not forwarded yet goes now
        return True

    def execute_partials(self, task: int, keys: Sequence[Any], accs: Sequence[Any]) -> None:
        """Fold in a batch combined before the shuffle by upstream task ``task``: per key
        (event time: per ``(key, pane start)``) a partial accumulator of its records
        (``docs/windows.md``, "Combining before the shuffle"). Ingestion time: the same
        output as the records themselves in one ingestion-time batch
        (:meth:`_jw_ingest_batch`): one arrival stamp, each partial added (merged) at it
        and followed by the watermark ``stamp - 1``; the watermark is forwarded once,
        after the firings. Event time: :meth:`_jw_merge_panes`."""
        rt = self.__dict__.get("_jw_rt") or self._jw_runtime()
        if rt.partials is not None:  # a task on other code combined towards this one
            raise JStormError(f"{type(self).__name__} got partial accumulators combined "
                              f"before the shuffle but cannot merge them ({rt.partials})")
        if not keys:
            return
        if rt.mode == "event":
            self._jw_merge_panes(rt, keys, accs)
            return
        op = rt.op
        ts = max(self.now_ms(), op.watermark + 1)
        rt.batched = True
        # the first partial and the watermark ts - 1 (which may fire rounds); the rest
        # follow under that same watermark (advancing to it again would do nothing):
        # sliced windows merge them into the stamp's slice in one loop
        results = op.process_batch(keys[:1], [ts], [Partial(accs[0])], [ts - 1],
                                   columnar=True)
        if len(keys) > 1 and not op.merge_on_time(keys[1:], accs[1:], ts):
            results += op.process_batch(keys[1:], [ts] * (len(keys) - 1),
                                        list(map(Partial, accs[1:])), columnar=True)
        if results:
            self._jw_emit_runs(rt, results)
            self._jw_forward(rt)

    def _jw_merge_panes(self, rt: _Runtime, keys: Sequence[Any], accs: Sequence[Any]) -> None:
        """Event time: partials keyed ``(key, pane start)``, each standing for records of
        its key in that pane. The sender folded only records whose pane is on time for
        all its windows under the highest watermark it had sent, which this task's
        watermark cannot exceed, so each partial is added (merged) to windows that have
        neither fired nor been purged, as its records would have been; nothing fires (the
        watermark moves between items, never inside one). A pane behind the watermark
        means the sender's bound was wrong: the task fails naming it, rather than fold
        records as if on time (``docs/windows.md``, "Combining before the shuffle")."""
        op = rt.op
        ks = [k for k, _ in keys]
        starts = [ps for _, ps in keys]
        if op.merge_panes(ks, starts, accs):
            return
        window = op.assigner
        low = on_time_from(window.size_ms, window.slide_ms,  # type: ignore[union-attr]
                           op.watermark)
        behind = min(starts)
        if behind < low:
            raise JStormError(
                f"{type(self).__name__} got a partial accumulator combined before the "
                f"shuffle for the pane at {behind!r}, behind its watermark "
                f"{op.watermark!r} (panes from {low!r} are on time); set "
                f"combine_before_shuffle = False and report this")
        results = op.process_batch(ks, starts, list(map(Partial, accs)))
        if results:  # an early or late firing from a partial: no pane was on time
            raise JStormError(f"{type(self).__name__}: merging partial accumulators "
                              f"fired {results[0]!r}; set combine_before_shuffle = False "
                              "and report this")

    @staticmethod
    def _jw_keys(rt: _Runtime, batch: Batch, n: int) -> list[Any]:
        """The key column of ``n`` rows (KeyError/IndexError: not takeable as a column)."""
        fields = rt.key_fields
        if fields is None:
            return [None] * n
        if fields.__class__ is str:
            return batch[fields]  # type: ignore[index,no-any-return]
        return list(zip(*(batch[f] for f in fields), strict=True))

    def _jw_columns(self, rt: _Runtime, batch: Batch) -> tuple[list[Any], list[Any]] | None:
        """(keys, timestamps) of a batch, or None if some tuple needs the per-tuple path."""
        field = rt.ts_field
        if field is None:
            return None
        try:
            tss = batch[field]
            keys = self._jw_keys(rt, batch, len(tss))
        except (KeyError, IndexError):
            return None
        kinds = set(map(type, tss))
        if not kinds <= _NUMBERS or (float in kinds and not math.isfinite(sum(tss))):
            return None
        return keys, tss

    def _jw_flush_pending(self, rt: _Runtime) -> None:
        """Emit the firings a rescale's restore left (before anything else goes out)."""
        pending, rt.pending = rt.pending, []
        emit = self.emit
        for firing in pending:
            emit(tuple(firing))

    def _jw_emit(self, rt: _Runtime, results: list[Any]) -> None:
        if rt.pending:
            self._jw_flush_pending(rt)
        emit = self.emit
        for res in results:
            cls = res.__class__
            if cls is Firing:
                emit(tuple(res))  # a Firing's values are the default-stream tuple
            elif cls is FiringRun:
                self.emit_batch(res.columns())  # one on-time round
            else:
                self._jw_emit_late(rt, res.record)

    def _jw_emit_runs(self, rt: _Runtime, results: list[Any]) -> None:
        """Like :meth:`_jw_emit`, each run of firings as one ``emit_batch``."""
        if rt.pending:
            self._jw_flush_pending(rt)
        run: list[Any] = []
        for res in results:
            cls = res.__class__
            if cls is Firing:
                run.append(res)
                continue
            if run:
                self.emit_batch(list(zip(*run, strict=True)))
                run = []
            if cls is FiringRun:
                self.emit_batch(res.columns())
            else:
                self._jw_emit_late(rt, res.record)
        if run:
            self.emit_batch(list(zip(*run, strict=True)))

    def _jw_emit_late(self, rt: _Runtime, record: Any) -> None:
        """A record beyond the allowed lateness: counted, and sent on the late stream."""
        if record.__class__ is Partial:  # stamped on arrival: never behind the watermark
            raise JStormError(f"{type(self).__name__}: a partial accumulator combined "
                              "before the shuffle came late; set combine_before_shuffle "
                              "= False and report this")
        rt.late_records += 1
        self.emit(tuple(record.values), stream=rt.late_stream)

    def _jw_forward(self, rt: _Runtime) -> None:
        if rt.pending:
            self._jw_flush_pending(rt)
        if rt.mode in ("processing", "count"):
            return
        wm = rt.op.watermark
        if wm > rt.forwarded:
            rt.forwarded = wm
            self.emit_watermark(wm)

    # ------------------------------------------------------------ time
    def on_watermark(self, watermark_ms: float) -> None:
        """The engine's in-band watermark: drives event time unless a strategy is set."""
        rt = self._jw_runtime()
        if rt.mode == "count":
            if watermark_ms > rt.forwarded:
                rt.forwarded = watermark_ms
                self.emit_watermark(watermark_ms)
            return
        if rt.mode != "event" or rt.tracker is not None:
            return
        self._jw_emit(rt, rt.op.advance_watermark(watermark_ms, columnar=rt.columnar))
        self._jw_forward(rt)

    def on_tick(self, now_ms: float) -> None:
        """Processing time: idleness, periodic watermarks, early firings, processing-time
        windows."""
        rt = self._jw_runtime()
        op = rt.op
        results: list[Any] = []
        if rt.tracker is not None:
            rt.tracker.tick(now_ms)
            results += op.advance_watermark(rt.tracker.current(), columnar=rt.columnar)
        elif rt.mode == "ingestion":
            results += op.advance_watermark(now_ms - 1, columnar=rt.columnar)
        results += op.on_processing_time(now_ms)
        if results:
            self._jw_emit(rt, results)
        self._jw_forward(rt)

    def on_inputs_finished(self) -> None:
        """Every input ended: the watermark goes to +inf and every window fires."""
        rt = self._jw_runtime()
        if rt.batched:  # fed by batches: emit by batches
            self._jw_emit_runs(rt, rt.op.finish(columnar=True))
        else:
            self._jw_emit(rt, rt.op.finish(columnar=rt.columnar))
        if rt.forwarded < math.inf:
            rt.forwarded = math.inf
            self.emit_watermark(math.inf)
