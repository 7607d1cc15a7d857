"""The bolts a dataflow compiles to.

* :class:`ChainBolt`: consecutive ``map`` / ``filter`` / ``flat_map`` steps fused into
  one function per item (no tuple between them), optionally ending in a ``key_by``
  that adds the hidden key field the next keyed operator is fields-grouped on.
* :class:`ReduceBolt`, :class:`StatefulMapBolt`: keyed operators whose state is one
  managed-state dict keyed by the key (``self.state(...)``), so checkpoints, savepoints
  and rescaling split it by key group like any fields-grouped bolt.
* :class:`WindowAggregateBolt`: a :class:`~jstormpy.window.WindowedBolt` over the items.
* :class:`WindowJoinBolt`, :class:`IntervalJoinBolt`: two keyed inputs, both sides
  buffered in managed state keyed by the key and dropped once the watermark passes.
* :func:`dataflow_sink`: a user Sink that writes items as records (``as_record``).
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from operator import itemgetter
from types import FunctionType
from typing import Any, NamedTuple

from jstormpy.api.batch import mark_failed_record
from jstormpy.api.component import DEFAULT_STREAM, Bolt, TopologyContext, Tuple
from jstormpy.api.errors import TopologyError
from jstormpy.barrier.twophase import Sink
from jstormpy.dataflow.join_clock import JoinClock
from jstormpy.dataflow.records import (
    ITEM_FIELDS,
    KEY_FIELD,
    KEYED_FIELDS,
    LATE_STREAM,
    PLAIN_ITEMS,
    SELF_KEYED_FIELDS,
    RecordTuples,
    Wire,
    decode_item,
)
from jstormpy.dataflow.results import JoinResult, KeyedValue
from jstormpy.window import (
    BoundedOutOfOrderness,
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
    WindowedBolt,
)
from jstormpy.window.config import default_tick_interval, validate_window_config

_INF = math.inf
_NEG_INF = -math.inf

InputKey = tuple[str, str]
"""``(source component, stream)`` of one subscription."""


def watermark_lag(out_of_orderness_ms: float) -> float:
    """How far the watermark trails the newest timestamp: ``out_of_orderness_ms + 1``.

    As in Flink's bounded-out-of-orderness watermarks (``max - bound - 1``): a record at
    most ``out_of_orderness_ms`` behind the newest one is on time, equal timestamps
    included (with ``max - bound``, the default bound 0 would make every record that
    shares the newest timestamp late).
    """
    return out_of_orderness_ms + 1


class StepKind(Enum):
    """A stateless step that fuses into a chain."""

    MAP = "map"
    FILTER = "filter"
    FLAT_MAP = "flat_map"


class Step(NamedTuple):
    """One fused step: its kind and the user's function."""

    kind: StepKind
    fn: Callable[[Any], Any]


def chain_steps(steps: Sequence[Step], out: Callable[[Any], None]) -> Callable[[Any], None]:
    """One function running ``steps`` on an item and handing every result to ``out``.

    Example:
        >>> got = []
        >>> run = chain_steps([Step(StepKind.FLAT_MAP, lambda s: s.split()),
        ...                    Step(StepKind.FILTER, lambda w: w != "a"),
        ...                    Step(StepKind.MAP, str.upper)], got.append)
        >>> run("a cat a dog"); got
        ['CAT', 'DOG']
    """
    run = out
    for step in reversed(steps):
        run = _fuse(step, run)
    return run


def _fuse(step: Step, after: Callable[[Any], None]) -> Callable[[Any], None]:
    fn = step.fn
    if step.kind is StepKind.MAP:
        def run_map(item: Any) -> None:
            after(fn(item))
        return run_map
    if step.kind is StepKind.FILTER:
        def run_filter(item: Any) -> None:
            if fn(item):
                after(item)
        return run_filter

    def run_flat_map(item: Any) -> None:
        for each in fn(item):
            after(each)
    return run_flat_map


class DataflowBolt(Bolt):
    """Base of the compiled bolts: decodes its inputs, runs its fused tail, emits items.

    ``inputs`` maps each subscription to the layout of what it carries; ``steps`` run on
    every item the operator produces; ``key_fn`` (a ``key_by``) makes the output keyed:
    a function of the item, or a field name (the key is ``item[field]``, read inline).
    """

    _df_execute: Callable[[Tuple], None]
    """A keyed operator's per-tuple function, bound at ``prepare`` (:func:`bind_rows`)."""

    def __init__(self, inputs: Mapping[InputKey, Wire], steps: Sequence[Step] = (),
                 key_fn: Callable[[Any], Any] | str | None = None) -> None:
        self.inputs = dict(inputs)
        self.steps = tuple(steps)
        self.key_fn = key_fn
        self.outputs = (  # type: ignore[misc]
            ITEM_FIELDS if key_fn is None else
            SELF_KEYED_FIELDS if is_identity(key_fn) else KEYED_FIELDS)

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Build the fused function that runs the tail steps and emits."""
        emit = self.emit
        # an identity key (the item is its key, decided at build: ``outputs``) emits
        # ``(item,)`` as an unkeyed step does
        self_keyed = tuple(self.outputs) == SELF_KEYED_FIELDS
        key_fn = None if self_keyed else key_function(self.key_fn)
        field = self.key_fn if isinstance(self.key_fn, str) else None
        steps = self.steps
        if steps and steps[-1].kind is StepKind.FLAT_MAP:
            # the usual tail (a split before a key_by): emit each result in the loop, one
            # call per result less than flat_map handing each to ``out``
            fn = steps[-1].fn
            if key_fn is None:
                def out(item: Any) -> None:
                    for each in fn(item):
                        emit((each,))
            elif field is not None:  # key_by("field"): a subscript, no call
                def out(item: Any) -> None:
                    for each in fn(item):
                        emit((each[field], each))
            else:
                def out(item: Any) -> None:
                    for each in fn(item):
                        emit((key_fn(each), each))
            steps = steps[:-1]
        elif key_fn is None:
            def out(item: Any) -> None:
                emit((item,))
        elif field is not None:
            def out(item: Any) -> None:
                emit((item[field], item))
        else:
            def out(item: Any) -> None:
                emit((key_fn(item), item))
        self._df_out = chain_steps(steps, out)

    def decode(self, tup: Tuple) -> Any:
        """The item ``tup`` carries."""
        return decode_item(self.inputs[(tup.source, tup.stream)], tup)


class ChainBolt(DataflowBolt):
    """Fused ``map`` / ``filter`` / ``flat_map`` steps (and a final ``key_by``)."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Build the fused function, and with one input, bind one per-tuple function
        that reads the item off the tuple and runs the chain (no decode dispatch per
        tuple); a lone ``flat_map`` (the usual split before a ``key_by``) runs in it."""
        super().prepare(conf, context)
        if len(self.inputs) != 1:
            return  # a union: each tuple's layout is looked up by its source
        (wire,) = self.inputs.values()
        execute = _read_then(wire, self._df_out)
        steps, key_fn, emit = self.steps, self.key_fn, self.emit
        if isinstance(key_fn, str) or tuple(self.outputs) == SELF_KEYED_FIELDS:
            key_fn = None  # key_by("field") or an identity key: ``_df_out`` emits
        if len(steps) == 1 and steps[0].kind is StepKind.FLAT_MAP and key_fn is not None:
            fn = steps[0].fn
            if wire is Wire.RAW:
                def execute(tup: Tuple) -> None:
                    for each in fn(tup.as_dict()):
                        emit((key_fn(each), each))
            elif wire is Wire.ITEM:
                def execute(tup: Tuple) -> None:
                    for each in fn(tup.values[0]):
                        emit((key_fn(each), each))
        if execute is not None:
            # the engine looks ``execute`` up on the instance: the bound function
            self.__dict__["execute"] = execute
        if conf.get("guarantee", "exactly_once") == "at_most_once":
            return  # per tuple: a user error skips only its tuple (see bind_rows)
        run = self._df_out
        execute_batch: Callable[[Any], None] | None = None
        if wire is Wire.RAW:
            if len(steps) == 1 and steps[0].kind is StepKind.FLAT_MAP and key_fn is not None:
                fn = steps[0].fn

                def execute_batch(batch: Any) -> None:
                    item = None
                    try:
                        for item in raw_items(batch):
                            for each in fn(item):
                                emit((key_fn(each), each))
                    except Exception as exc:
                        mark_failed_record(exc, item)
                        raise
            else:
                def execute_batch(batch: Any) -> None:
                    item = None
                    try:
                        for item in raw_items(batch):
                            run(item)
                    except Exception as exc:
                        mark_failed_record(exc, item)
                        raise
        elif wire is Wire.ITEM:
            def execute_batch(batch: Any) -> None:
                row: Any = None
                try:
                    for row in batch.rows:
                        run(row[0])
                except Exception as exc:
                    mark_failed_record(exc, None if row is None else row[0])
                    raise
        elif wire is Wire.KEYED or wire is Wire.LATE:
            def execute_batch(batch: Any) -> None:
                row: Any = None
                try:
                    for row in batch.rows:
                        run(row[-1])
                except Exception as exc:
                    mark_failed_record(exc, None if row is None else row[-1])
                    raise
        if execute_batch is not None:
            self.__dict__["execute_batch"] = execute_batch

    def execute(self, tup: Tuple) -> None:
        """Run the chain on the tuple's item."""
        self._df_out(self.decode(tup))


def _identity(item: Any) -> Any:
    return item


_IDENTITY_CODE = _identity.__code__.co_code


def is_identity(key: Any) -> bool:
    """Whether the ``key_by`` function returns its argument unchanged (``lambda w: w``):
    a plain function whose bytecode is this interpreter's ``return first_argument``.
    Its stream is sent as ``(item,)`` (:data:`~jstormpy.dataflow.records.SELF_KEYED_FIELDS`)
    and the function is never called: the key is the item.

    Example:
        >>> is_identity(lambda w: w), is_identity(lambda w: w.lower()), is_identity(str)
        (True, False, False)
    """
    code = getattr(key, "__code__", None)
    return (type(key) is FunctionType and code is not None  # not a bound method
            and code.co_argcount == 1 and code.co_code == _IDENTITY_CODE)


def key_function(key: Callable[[Any], Any] | str | None) -> Callable[[Any], Any] | None:
    """A ``key_by``'s key as a function of the item: the user's function, or for a field
    name ``operator.itemgetter(field)`` (C code: no Python call per record).

    Example:
        >>> key_function("user")({"user": "u1", "n": 2}), key_function(None)
        ('u1', None)
    """
    if isinstance(key, str):
        return itemgetter(key)
    return key


def raw_items(batch: Any) -> Iterable[dict[str, Any]]:
    """The items of a batch of a spout's own tuples: ``{field: value}`` per row, as
    ``Tuple.as_dict`` gives (a shorter row, from an older version, has fewer fields)."""
    index = batch.field_index
    names = tuple(index)
    if tuple(index.values()) == tuple(range(len(names))):
        return (dict(zip(names, row, strict=False))  # zip stops at a short row
                for row in batch.rows)
    return (tup.as_dict() for tup in batch)


def _read_then(wire: Wire, run: Callable[[Any], None]) -> Callable[[Tuple], None] | None:
    """A per-tuple function reading the item of layout ``wire`` and calling ``run``."""
    if wire is Wire.ITEM:
        def item(tup: Tuple) -> None:
            run(tup.values[0])
        return item
    if wire is Wire.KEYED or wire is Wire.LATE:
        def keyed(tup: Tuple) -> None:
            run(tup.values[-1])
        return keyed
    if wire is Wire.RAW:
        def raw(tup: Tuple) -> None:
            run(tup.as_dict())
        return raw
    return None


class ReduceBolt(DataflowBolt):
    """``KeyedStream.reduce(f)``: a running value per key, ``KeyedValue(key, value)``.

    State: managed dict ``"reduce"``, key -> the running value.
    """

    def __init__(self, inputs: Mapping[InputKey, Wire], fn: Callable[[Any, Any], Any],
                 steps: Sequence[Step] = ()) -> None:
        super().__init__(inputs, steps)
        self.fn = fn

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the running values (restored ones after a rollback or rescale) and bind
        the per-tuple function once (as :class:`StatefulMapBolt` does)."""
        super().prepare(conf, context)
        values = self._df_values = self.state("reduce")
        fn = self.fn
        direct = not self.steps and self.key_fn is None  # nothing fused after it
        emit, send = self.emit, self._df_out

        def run_rows(rows: Iterable[Sequence[Any]]) -> None:
            row: Any = None
            try:
                for row in rows:
                    key, item = row[0], row[-1]
                    value = fn(values[key], item) if key in values else item
                    values[key] = value
                    if direct:
                        emit((KeyedValue(key, value),))
                    else:
                        send(KeyedValue(key, value))
            except Exception as exc:
                mark_failed_record(exc, None if row is None else row[-1])
                raise

        bind_rows(self, conf, run_rows)

    def execute(self, tup: Tuple) -> None:
        """Fold the item into its key's running value and emit the new value."""
        self._df_execute(tup)


class StatefulMapBolt(DataflowBolt):
    """``KeyedStream.stateful_map(f)``: ``f(state_or_None, item) -> (state_or_None,
    out_or_None)``; a None state deletes the key's state, a None output emits nothing.

    State: managed dict ``"stateful_map"``, key -> the user's state.
    """

    def __init__(self, inputs: Mapping[InputKey, Wire],
                 fn: Callable[[Any, Any], tuple[Any, Any]],
                 steps: Sequence[Step] = ()) -> None:
        super().__init__(inputs, steps)
        self.fn = fn

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the per-key states (restored ones after a rollback or rescale) and bind
        the per-tuple function once: the hot loop of a keyed pipeline."""
        super().prepare(conf, context)
        states = self._df_states = self.state("stateful_map")
        fn, get = self.fn, states.get
        direct = not self.steps and self.key_fn is None  # nothing fused after it
        emit, send = self.emit, self._df_out

        def run_rows(rows: Iterable[Sequence[Any]]) -> None:
            values: Any = None
            try:
                for values in rows:
                    key = values[0]
                    result = fn(get(key), values[-1])
                    try:
                        new, out = result
                    except (TypeError, ValueError):
                        raise TopologyError(
                            f"stateful_map function must return (state_or_None, "
                            f"out_or_None), got {result!r} for key {key!r}") from None
                    if new is None:
                        if key in states:  # (del, not pop: incremental state tracks deletions)
                            del states[key]
                    else:
                        states[key] = new
                    if out is not None:
                        if direct:
                            emit((out,))
                        else:
                            send(out)
            except Exception as exc:
                mark_failed_record(exc, None if values is None else values[-1])
                raise

        bind_rows(self, conf, run_rows)

    def execute(self, tup: Tuple) -> None:
        """Call ``f`` with the key's state and the item; keep the new state."""
        self._df_execute(tup)


def bind_rows(bolt: DataflowBolt, conf: Mapping[str, Any],
              run_rows: Callable[[Iterable[Sequence[Any]]], None]) -> None:
    """Bind a keyed operator's loop over input rows ``(key, item)`` as its ``execute``
    and, unless the run is at-most-once, as its ``execute_batch`` (one call per channel
    batch, no Tuple per record).

    At-most-once keeps the per-tuple path: there a user error skips only the failing
    tuple, while a failing ``execute_batch`` skips the rest of its batch. Under
    exactly-once and at-least-once both roll back and replay, so the output is the same.
    The engine looks both up on the instance (after ``prepare``): bound functions, no
    method dispatch per tuple.
    """
    def execute(tup: Tuple) -> None:
        run_rows((tup.values,))

    bolt.__dict__["_df_execute"] = bolt.__dict__["execute"] = execute
    if conf.get("guarantee", "exactly_once") != "at_most_once":
        def execute_batch(batch: Any) -> None:
            run_rows(batch.rows)

        bolt.__dict__["execute_batch"] = execute_batch


class WindowAggregateBolt(WindowedBolt):
    """``KeyedStream.window(...).aggregate(agg)``: a WindowedBolt over the items.

    Keyed on the hidden key field, timestamps from the user's function on the item,
    watermarks per input channel with the given out-of-orderness; ``agg`` (a builtin
    such as ``Count()`` or any create/add/merge/result aggregator) sees the items.
    Firings leave on the default stream (read downstream as WindowResult), records
    beyond the allowed lateness on ``"late"`` (``.late()``). State: the WindowedBolt's
    own snapshot (accumulators, timers, watermarks).
    """

    late_stream = "late"

    def __init__(self, window: WindowAssigner, timestamp_fn: Callable[[Any], float] | None,
                 aggregator: Any, out_of_orderness_ms: float = 0,
                 allowed_lateness_ms: float = 0, early_fire_ms: float | None = None,
                 time: str = "event") -> None:
        self.window = window  # type: ignore[misc]
        self.key = KEY_FIELD  # type: ignore[misc]
        self.df_timestamp = timestamp_fn
        self.df_aggregator = aggregator
        if time not in ("event", "processing"):
            raise TopologyError(f"KeyedStream.window(time={time!r}): use 'event' (timestamps "
                                "from timestamp=f) or 'processing' (the operator's clock)")
        if time == "processing":
            if timestamp_fn is not None:
                raise TopologyError("KeyedStream.window(time='processing') takes no "
                                    "timestamp=f: windows follow the operator's clock")
            self.time = "processing"  # type: ignore[misc]
        elif not isinstance(window, CountWindows):
            self.watermark = BoundedOutOfOrderness(  # type: ignore[misc]
                max_lag_ms=watermark_lag(out_of_orderness_ms))
        self.allowed_lateness_ms = allowed_lateness_ms  # type: ignore[misc]
        self.early_fire_every_ms = early_fire_ms  # type: ignore[misc]
        for method in ("create", "add", "result"):
            if not callable(getattr(aggregator, method, None)):
                raise TopologyError(
                    f"window aggregate {aggregator!r} has no {method}(): pass a builtin "
                    "(Count(), Sum('field'), Max('field'), ...) or an object with "
                    "create/add/merge/result")
        if (time == "event" and not isinstance(window, CountWindows)
                and not callable(timestamp_fn)):
            raise TopologyError("KeyedStream.window(...) needs timestamp=f: a function "
                                "from an item to its event time in epoch ms")
        self.tick_interval_ms = default_tick_interval(self)  # type: ignore[misc]

    def validate_config(self) -> None:  # type: ignore[override]
        """Raise TopologyError naming the first bad window setting."""
        validate_window_config(self, "window")

    def timestamp(self, tup: Tuple) -> float:  # type: ignore[override]
        """The item's event time."""
        return self.df_timestamp(tup.values[-1])  # type: ignore[misc]

    def create(self) -> Any:
        """The aggregator's empty accumulator."""
        return self.df_aggregator.create()

    def add(self, acc: Any, tup: Tuple) -> Any:
        """The item added to ``acc``."""
        return self.df_aggregator.add(acc, tup.values[-1])

    def merge(self, a: Any, b: Any) -> Any:
        """Two accumulators merged (session windows)."""
        merge = getattr(self.df_aggregator, "merge", None)
        if merge is None:
            raise TopologyError(f"window aggregate {self.df_aggregator!r} needs merge(a, b) "
                                f"for {type(self.window).__name__}")
        return merge(a, b)

    def result(self, key: Any, window: Any, acc: Any) -> Any:
        """The aggregator's value for one window."""
        return self.df_aggregator.result(key, window, acc)


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


def _join_sides(sides: Mapping[InputKey, int]) -> dict[InputKey, Wire]:
    return {k: Wire.KEYED for k in sides}


class _JoinBolt(DataflowBolt):
    """What both joins share: pairs on the default stream, late records on
    :data:`LATE_STREAM` (``.late()``), counted in :attr:`late_records`."""

    def __init__(self, sides: Mapping[InputKey, int], steps: Sequence[Step] = ()) -> None:
        DataflowBolt.__init__(self, _join_sides(sides), steps)
        self.outputs = {DEFAULT_STREAM: ITEM_FIELDS,  # type: ignore[misc]
                        LATE_STREAM: ITEM_FIELDS}
        self.late_records = 0

    def _drop_late(self, item: Any) -> None:
        """``item`` came after every window or partner it belongs to was purged."""
        self.late_records += 1
        self.emit((item,), stream=LATE_STREAM)


class WindowJoinBolt(_JoinBolt):
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
    the watermark passes ``end - 1 + allowed_lateness_ms``. Records for a dropped window
    are counted in :attr:`late_records` and dropped.
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
        _check_ms("out_of_orderness_ms", out_of_orderness_ms)
        _check_ms("allowed_lateness_ms", allowed_lateness_ms)
        self.sides = dict(sides)
        self.window = window
        self.timestamps = _check_timestamps(timestamps)
        self.lag = out_of_orderness_ms
        self.lateness = allowed_lateness_ms
        self.error_records = 0
        """Items whose timestamp function raised or gave no finite number (dropped)."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the buffers (restored after a rollback or rescale) and rebuild timers."""
        super().prepare(conf, context)
        self._df_buf = self.state("join")
        self._df_session = isinstance(self.window, SessionWindows)
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
        return win[1] - 1 + self.lateness if closed else win[1] - 1

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
        if wm >= end - 1 + self.lateness:
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
            entry[4] = wm >= end - 1
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
                if wm < win[1] - 1:
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


class IntervalJoinBolt(_JoinBolt):
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
        _check_ms("out_of_orderness_ms", out_of_orderness_ms)
        self.sides = dict(sides)
        self.lower = lower_ms
        self.upper = upper_ms
        self.timestamps = _check_timestamps(timestamps)
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


def _write_back(buf: Any, key: Any, wins: dict[Any, Any]) -> None:
    """Store a key's changed windows, or drop the key once it has none."""
    if wins:
        buf[key] = wins
    else:
        del buf[key]


def event_time(fn: Callable[[Any], Any], item: Any) -> float | None:
    """``fn(item)`` if it is a finite number, else None (the function raised or returned
    something else): such an item cannot be placed in time.

    Example:
        >>> event_time(lambda r: r["ts"], {"ts": 5}), event_time(lambda r: r["ts"], {})
        (5, None)
    """
    try:
        ts = fn(item)
    except Exception:  # user code on bad data: counted by the caller, never a crash loop
        return None
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        return None
    return ts


def _check_ms(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise TopologyError(f"{name} must be a finite number >= 0, got {value!r}")


def _check_timestamps(timestamps: Any) -> tuple[Callable[[Any], float], Callable[[Any], float]]:
    if not (isinstance(timestamps, tuple) and len(timestamps) == 2
            and all(callable(f) for f in timestamps)):
        raise TopologyError("a join needs timestamp=(f_left, f_right): two functions from "
                            f"an item to its event time in epoch ms, got {timestamps!r}")
    return timestamps[0], timestamps[1]


def dataflow_sink(sink: Any, inputs: Mapping[InputKey, Wire]) -> Any:
    """A copy of the user's ``sink`` that writes every item it receives as a record.

    The copy's class is a subclass of the sink's own (same slots), whose ``execute``
    turns the incoming dataflow tuple into a Tuple with the record's fields
    (:func:`~jstormpy.dataflow.records.as_record`) and hands it to the sink's own
    ``execute``; its ``execute_batch`` goes tuple by tuple through that. Everything else
    (begin / write / pre_commit / commit / abort, snapshots) is the sink's own.
    """
    base = type(sink)
    sub = _SINK_CLASSES.get(base)
    if sub is None:
        sub = _SINK_CLASSES[base] = type(base.__name__, (base,), {
            "__slots__": (), "__module__": base.__module__,
            "__qualname__": base.__qualname__, "execute": _sink_execute,
            "execute_batch": _sink_execute_batch, "_df_base": base})
    out = copy.copy(sink)
    out.__class__ = sub
    out.__dict__["_df_inputs"] = dict(inputs)
    return out


_SINK_CLASSES: dict[type, type] = {}


def _record_tuples(sink: Any) -> RecordTuples:
    records = sink.__dict__.get("_df_records")
    if records is None:
        records = sink.__dict__["_df_records"] = RecordTuples()
    return records


def _sink_execute(self: Any, tup: Tuple) -> None:
    item = decode_item(self.__dict__["_df_inputs"][(tup.source, tup.stream)], tup)
    self._df_base.execute(self, _record_tuples(self).channel(tup.source, tup.task)(item))


def _sink_execute_batch(self: Any, batch: Any) -> None:
    """A channel batch: its layout and record builder looked up once, items read off the
    rows.

    An unkeyed row ``(item,)`` of a plain item (a str, a number, a plain tuple, ...) is
    already the values of its ``{"value": item}`` record: it goes into one record Tuple
    reused from row to row for as long as the sink keeps no reference to it (checked
    with ``sys.getrefcount``, as the executor does for its own tuples). A sink whose class
    keeps ``Sink.execute`` gets ``write`` called directly (that is all it does)."""
    wire = self.__dict__["_df_inputs"][(batch.source, batch.stream)]
    base_execute = self._df_base.execute
    execute: Callable[[Tuple], None]
    if base_execute is Sink.execute:  # not overridden: it is write(), one call less
        execute = self.write
    else:
        def execute(tup: Tuple) -> None:
            base_execute(self, tup)
    records = _record_tuples(self)
    record = records.channel(batch.source, batch.task)
    if wire is Wire.ITEM:
        value_cls = records.value_class(batch.source, batch.task)
        plain = PLAIN_ITEMS
        refs = sys.getrefcount
        tup: Any = None
        for values in batch.rows:
            if type(values[0]) in plain:
                # 2 references (this variable and the argument): the sink kept none
                if tup is None or refs(tup) > 2:
                    tup = value_cls(values)  # type: ignore[call-arg]  # Tuple.bound
                else:
                    tup.values = values
                execute(tup)
            else:
                execute(record(values[0]))
    elif wire is Wire.KEYED or wire is Wire.LATE:
        for values in batch.rows:
            execute(record(values[-1]))
    else:
        for tup in batch:
            execute(record(decode_item(wire, tup)))


__all__ = ["ChainBolt", "DataflowBolt", "IntervalJoinBolt", "JoinHow", "ReduceBolt",
           "StatefulMapBolt", "Step", "StepKind", "WindowAggregateBolt", "WindowJoinBolt",
           "dataflow_sink", "event_time", "is_identity", "join_windows", "key_function",
           "watermark_lag"]
