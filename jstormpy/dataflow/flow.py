"""The dataflow builder: ``Dataflow``, ``Stream``, ``KeyedStream``, ``WindowedStream``.

Streams are immutable descriptions of a graph of operators; nothing is compiled until
``Dataflow.build()``. Then every sink's stream is compiled, once per stream:

* a run of ``map`` / ``filter`` / ``flat_map`` steps becomes one
  :class:`~jstormpy.dataflow.fusion.ChainBolt` (one fused function per item, no tuple
  between the steps), named after the first step; a step read by more than one
  consumer, or whose ``parallelism=`` differs from the run's, ends the run;
* a ``key_by`` fuses into the run before it (if that run has no other consumer), and its
  consumers read it with a fields grouping on the hidden key field; ``key_by("field")``
  reads the key as ``item["field"]`` inline (no Python call per record), and where the
  stream's fields are known at build (a source, filters of one, unions of such) the field
  is checked against them;
* keyed operators, joins and windows are one bolt each, named after the operator;
* a sink is a copy of the user's sink that writes items as records.

The result is an ordinary :class:`~jstormpy.api.topology.Topology`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from jstormpy.api.component import DEFAULT_STREAM, declared_streams
from jstormpy.api.errors import TopologyError
from jstormpy.api.topology import Topology, TopologyBuilder
from jstormpy.dataflow.fusion import ChainBolt, InputKey, Step, StepKind
from jstormpy.dataflow.interval_join import IntervalJoinBolt
from jstormpy.dataflow.keyed import ReduceBolt, StatefulMapBolt
from jstormpy.dataflow.records import KEY_FIELD, LATE_STREAM, Wire
from jstormpy.dataflow.sink_adapter import dataflow_sink
from jstormpy.dataflow.window_aggregate import WindowAggregateBolt
from jstormpy.dataflow.window_join import WindowJoinBolt


@dataclass(frozen=True)
class _Out:
    """One output a consumer subscribes to: component, stream and its layout."""

    component: str
    stream: str
    wire: Wire
    parallelism: int


def _inputs(outs: tuple[_Out, ...]) -> dict[InputKey, Wire]:
    return {(o.component, o.stream): o.wire for o in outs}


def _check_parallelism(where: str, parallelism: Any, *, optional: bool = False) -> None:
    if optional and parallelism is None:
        return
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise TopologyError(f"{where}: parallelism must be an int >= 1, got {parallelism!r}")


def _fn_label(fn: Any) -> str:
    name = fn if isinstance(fn, str) else (getattr(fn, "__name__", None)
                                           or type(fn).__name__)
    label = re.sub(r"[^A-Za-z0-9_.-]+", "", name.replace("<lambda>", "lambda"))
    return label or "fn"


class _Op(Enum):
    """What produces a stream's items."""

    SOURCE = "source"
    STEP = "step"
    UNION = "union"
    OPERATOR = "operator"
    LATE = "late"


class _Compiler:
    """One ``build()``: compiles each stream once, into a TopologyBuilder."""

    def __init__(self, flow: Dataflow) -> None:
        self.builder = TopologyBuilder(flow.name)
        self.done: dict[int, tuple[_Out, ...]] = {}

    def add_bolt(self, name: str, bolt: Any, parallelism: int,
                 shuffle_from: tuple[_Out, ...] = (), keyed_from: tuple[_Out, ...] = ()) -> None:
        declarer = self.builder.set_bolt(name, bolt, parallelism=parallelism)
        if len(shuffle_from) == 1 and shuffle_from[0].parallelism == parallelism:
            # one input, as many tasks: task i reads task i of its worker, and the engine
            # chains the pair into one thread (runtime/channel_plan.py)
            declarer.local_or_shuffle_grouping(shuffle_from[0].component,
                                               stream=shuffle_from[0].stream)
            shuffle_from = ()
        for out in shuffle_from:
            declarer.shuffle_grouping(out.component, stream=out.stream)
        for out in keyed_from:
            declarer.fields_grouping(out.component, KEY_FIELD, stream=out.stream)

    def stream(self, s: Stream) -> tuple[_Out, ...]:
        """The outputs carrying ``s``'s items."""
        got = self.done.get(id(s))
        if got is None:
            got = self.done[id(s)] = s._compile(self)  # noqa: SLF001 - one package
        return got

    def keyed(self, k: KeyedStream) -> tuple[_Out, ...]:
        """The keyed outputs of ``k`` (its key_by bolt)."""
        got = self.done.get(id(k))
        if got is None:
            got = self.done[id(k)] = k._compile(self)  # noqa: SLF001 - one package
        return got


class Dataflow:
    """A pipeline of operators compiled onto spouts, bolts and groupings.

    Example:
        >>> from jstormpy import FileSink
        >>> from jstormpy.connectors.sources import SequenceSpout
        >>> flow = Dataflow("running-sums")
        >>> (flow.source("events", SequenceSpout(keys=3, per_key=10))
        ...      .key_by(lambda r: r["key"])
        ...      .reduce(lambda a, b: {**b, "value": a["value"] + b["value"]})
        ...      .sink("out", FileSink("/tmp/running-sums")))
        >>> sorted(flow.build().components)
        ['events', 'key_by-2-lambda', 'out', 'reduce-3-lambda']
    """

    def __init__(self, name: str) -> None:
        TopologyBuilder(name)  # validates the name now, with the builder's message
        self.name = name
        self._position = 0
        self._names: set[str] = set()
        self._sinks: list[tuple[str, Any, int, Stream]] = []
        self._sources: list[tuple[str, Any, int]] = []
        self._source_fields: dict[str, tuple[str, ...] | None] = {}

    def _op_name(self, op: str, fn: Any, name: str | None) -> str:
        """The stable name of the next operator: ``name`` or ``<op>-<position>-<fn>``."""
        self._position += 1
        if name is not None:
            if not isinstance(name, str) or not name:
                raise TopologyError(f"{op}: name= must be a non-empty string, got {name!r}")
            label = name
        else:
            label = f"{op}-{self._position}" + (f"-{_fn_label(fn)}" if fn is not None else "")
        if label in self._names:
            raise TopologyError(f"dataflow {self.name!r}: two operators are named "
                                f"{label!r}; give one another name with name=...")
        self._names.add(label)
        return label

    def source(self, name: str, spout: Any, parallelism: int = 1) -> Stream:
        """A stream of the spout's tuples, each as a ``{field: value}`` dict."""
        _check_parallelism(f"source {name!r}", parallelism)
        label = self._op_name("source", None, name)
        self._sources.append((label, spout, parallelism))
        self._source_fields[label] = declared_streams(spout).get(DEFAULT_STREAM)
        return Stream(self, _Op.SOURCE, (), label, parallelism)

    def build(self) -> Topology:
        """The Topology: submit it to ``LocalCluster`` or ``jstorm run`` like any other.

        Only what reaches a sink is built.

        Raises:
            TopologyError: no sink, or a problem the topology builder finds (it names
                the operator).
        """
        if not self._sinks:
            raise TopologyError(f"dataflow {self.name!r} has no sink: end a stream with "
                                ".sink(name, sink)")
        compiler = _Compiler(self)
        for name, spout, parallelism in self._sources:
            compiler.builder.set_spout(name, spout, parallelism=parallelism)
        for name, sink, parallelism, stream in self._sinks:
            outs = compiler.stream(stream)
            compiler.add_bolt(name, dataflow_sink(sink, _inputs(outs)), parallelism,
                              shuffle_from=outs)
        return compiler.builder.build()


class Stream:
    """An unkeyed stream of items (immutable: every operator returns a new stream).

    Parallelism: every operator takes ``parallelism=``; without it an operator runs
    with the parallelism of what it reads (a union: the largest). Consecutive ``map`` /
    ``filter`` / ``flat_map`` steps (and a ``key_by`` after them) fuse into one bolt
    named after the first of them; a step with another ``parallelism=`` starts a new
    bolt.
    """

    def __init__(self, flow: Dataflow, op: _Op, parents: tuple[Any, ...], name: str,
                 parallelism: int, *, step: Step | None = None,
                 wire: Wire = Wire.ITEM, make: Callable[[Any], None] | None = None) -> None:
        self._flow = flow
        self._op = op
        self._parents = parents
        self._name = name
        self.parallelism = parallelism
        """How many tasks produce this stream's items."""
        self._step = step
        self._wire = wire
        self._make = make
        self._late_wire: Wire | None = None
        """The layout of the operator's late side output (a window aggregate's, a
        join's); None: it has none."""
        self._consumers = 0
        for p in parents:
            p._consumers += 1  # noqa: SLF001 - one package

    # -------------------------------------------------------------- operators
    def _add_step(self, kind: StepKind, fn: Callable[[Any], Any], name: str | None,
                  parallelism: int | None) -> Stream:
        op = kind.value
        if not callable(fn):
            raise TopologyError(f"{op} needs a function, got {fn!r}")
        _check_parallelism(op, parallelism, optional=True)
        label = self._flow._op_name(op, fn, name)  # noqa: SLF001 - one package
        return Stream(self._flow, _Op.STEP, (self,), label, parallelism or self.parallelism,
                      step=Step(kind, fn))

    def map(self, f: Callable[[Any], Any], *, name: str | None = None,
            parallelism: int | None = None) -> Stream:
        """Each item replaced by ``f(item)``."""
        return self._add_step(StepKind.MAP, f, name, parallelism)

    def filter(self, f: Callable[[Any], Any], *, name: str | None = None,
               parallelism: int | None = None) -> Stream:
        """Only the items for which ``f(item)`` is true."""
        return self._add_step(StepKind.FILTER, f, name, parallelism)

    def flat_map(self, f: Callable[[Any], Any], *, name: str | None = None,
                 parallelism: int | None = None) -> Stream:
        """Every item of the iterable ``f(item)``, in order."""
        return self._add_step(StepKind.FLAT_MAP, f, name, parallelism)

    def union(self, *others: Stream) -> Stream:
        """The items of this stream and of ``others``, interleaved."""
        for other in others:
            if not isinstance(other, Stream) or other._flow is not self._flow:
                raise TopologyError(f"union takes streams of the same Dataflow, got {other!r}")
        self._flow._position += 1  # noqa: SLF001 - one package
        parents = (self, *others)
        return Stream(self._flow, _Op.UNION, parents, "union",
                      max(p.parallelism for p in parents))

    def key_by(self, f: Callable[[Any], Any] | str, *, name: str | None = None,
               parallelism: int | None = None) -> KeyedStream:
        """The items keyed by ``f(item)`` (a fields grouping on a hidden key field).

        ``f`` may be a field name: ``key_by("user")`` keys by ``item["user"]``, read
        inline with no Python call per record (as Flink's ``keyBy("field")`` and Storm's
        ``Fields``). Where the stream's fields are known when the dataflow is built (a
        source's declared fields, through filters and unions), ``build()`` refuses a
        field they lack, naming the stream. A function that returns its argument
        (``key_by(lambda w: w)``) is never called: the item alone is sent, as its key.

        Keys are hashed with :func:`jstormpy.keygroups.key_hash`: str, int, float,
        bytes, None and tuples of these route stably across processes.
        """
        if isinstance(f, str):
            if not f:
                raise TopologyError("key_by needs a function or a field name, got ''")
        elif not callable(f):
            raise TopologyError(f"key_by needs a function or a field name, got {f!r}")
        _check_parallelism("key_by", parallelism, optional=True)
        label = self._flow._op_name("key_by", f, name)  # noqa: SLF001 - one package
        return KeyedStream(self._flow, self, label, f, parallelism)

    def late(self) -> Stream:
        """The records a join or a window aggregate dropped as late: those that came after
        every window (or, for an interval join, every partner) they belong to was purged,
        beyond ``allowed_lateness_ms``. Each is the item as it entered the operator (a
        join's: from either side). Other streams have no late records.

        Raises:
            TopologyError: This stream is not the output of a join or a window aggregate.
        """
        if self._late_wire is None:
            raise TopologyError(
                f"late() is the late side output of a join or a window's aggregate(...); "
                f"stream {self._described()} is neither")
        return Stream(self._flow, _Op.LATE, (self,), self._name, self.parallelism)

    def sink(self, name: str, sink: Any, parallelism: int = 1) -> None:
        """Write every item to ``sink`` (any Sink): a dict as that record, a NamedTuple
        as its ``_asdict()``, anything else as ``{"value": item}``."""
        _check_parallelism(f"sink {name!r}", parallelism)
        label = self._flow._op_name("sink", None, name)  # noqa: SLF001 - one package
        self._consumers += 1
        self._flow._sinks.append((label, sink, parallelism, self))  # noqa: SLF001

    # -------------------------------------------------------------- compiling
    def _fields(self) -> tuple[str, ...] | None:
        """The fields every item of this stream has, if known when building: a
        source's declared fields, kept by filters; a union's are those all its inputs
        have. None: not known (a map's or an operator's items are whatever they are)."""
        if self._op is _Op.SOURCE:
            return self._flow._source_fields.get(self._name)  # noqa: SLF001 - one package
        if self._op is _Op.STEP and self._step is not None \
                and self._step.kind is StepKind.FILTER:
            return self._parents[0]._fields()  # noqa: SLF001 - one package
        if self._op is _Op.UNION:
            each = [p._fields() for p in self._parents]  # noqa: SLF001 - one package
            if any(f is None for f in each):
                return None
            return tuple(f for f in each[0] if all(f in other for other in each[1:]))
        return None

    def _described(self) -> str:
        """How an error names this stream: its operator's name, or the sources a union
        reads."""
        if self._op is _Op.UNION:
            return "union of " + ", ".join(p._described() for p in self._parents)  # noqa: SLF001
        return repr(self._name)

    def _fusable_into(self, parallelism: int) -> bool:
        """Whether a consumer running with ``parallelism`` may take this step into its
        own bolt (it is a step, read by nothing else, with the same parallelism)."""
        return (self._op is _Op.STEP and self._consumers == 1
                and self.parallelism == parallelism)

    def _run(self) -> tuple[Stream, list[Step]]:
        """The fused run ending at this step: (its first step, the steps in order)."""
        steps = [self._step]
        head = self
        while True:
            parent = head._parents[0]
            if not parent._fusable_into(head.parallelism):
                break
            head = parent
            steps.append(head._step)
        steps.reverse()
        return head, [s for s in steps if s is not None]

    def _compile(self, c: _Compiler) -> tuple[_Out, ...]:
        op = self._op
        if op is _Op.SOURCE:
            return (_Out(self._name, DEFAULT_STREAM, Wire.RAW, self.parallelism),)
        if op is _Op.UNION:
            outs: tuple[_Out, ...] = ()
            for p in self._parents:
                outs += c.stream(p)
            return outs
        if op is _Op.STEP:
            head, steps = self._run()
            upstream = c.stream(head._parents[0])
            c.add_bolt(head._name, ChainBolt(_inputs(upstream), steps), self.parallelism,
                       shuffle_from=upstream)
            return (_Out(head._name, DEFAULT_STREAM, Wire.ITEM, self.parallelism),)
        if op is _Op.LATE:
            parent = self._parents[0]
            c.stream(parent)
            assert parent._late_wire is not None  # noqa: SLF001 - checked by late()
            return (_Out(self._name, LATE_STREAM, parent._late_wire,  # noqa: SLF001
                         self.parallelism),)
        assert self._make is not None
        self._make(c)
        return (_Out(self._name, DEFAULT_STREAM, self._wire, self.parallelism),)


class KeyedStream:
    """A stream keyed by a ``key_by``: its operators keep per-key managed state."""

    def __init__(self, flow: Dataflow, parent: Stream, name: str,
                 key_fn: Callable[[Any], Any] | str, parallelism: int | None) -> None:
        self._flow = flow
        self._parent = parent
        self._name = name
        self._key_fn = key_fn
        self.parallelism = parallelism or parent.parallelism
        """How many tasks key the items (and, by default, run the keyed operator)."""
        self._consumers = 0
        parent._consumers += 1  # noqa: SLF001 - one package

    def _compile(self, c: _Compiler) -> tuple[_Out, ...]:
        parent = self._parent
        if isinstance(self._key_fn, str):
            fields = parent._fields()  # noqa: SLF001 - one package
            if fields is not None and self._key_fn not in fields:
                raise TopologyError(
                    f"key_by({self._key_fn!r}) ({self._name!r}): the items of stream "
                    f"{parent._described()} have no field {self._key_fn!r} "  # noqa: SLF001
                    f"(their fields: {', '.join(fields) or 'none'})")
        if parent._fusable_into(self.parallelism):  # noqa: SLF001 - one package
            head, steps = parent._run()  # noqa: SLF001
            name, upstream_stream = head._name, head._parents[0]  # noqa: SLF001
        else:
            name, steps, upstream_stream = self._name, [], parent
        upstream = c.stream(upstream_stream)
        c.add_bolt(name, ChainBolt(_inputs(upstream), steps, key_fn=self._key_fn),
                   self.parallelism, shuffle_from=upstream)
        return (_Out(name, DEFAULT_STREAM, Wire.KEYED, self.parallelism),)

    def _operator(self, op: str, fn: Any, name: str | None, parallelism: int | None,
                  make_bolt: Callable[[dict[InputKey, Wire], dict[InputKey, int]], Any],
                  others: tuple[KeyedStream, ...] = (), wire: Wire = Wire.ITEM,
                  late_wire: Wire | None = None) -> Stream:
        _check_parallelism(op, parallelism, optional=True)
        label = self._flow._op_name(op, fn, name)  # noqa: SLF001 - one package
        p = parallelism or max(k.parallelism for k in (self, *others))
        sides = (self, *others)

        def make(c: _Compiler) -> None:
            outs: tuple[_Out, ...] = ()
            side_of: dict[InputKey, int] = {}
            for i, k in enumerate(sides):
                side = c.keyed(k)
                side_of.update(((o.component, o.stream), i) for o in side)
                outs += side
            c.add_bolt(label, make_bolt(_inputs(outs), side_of), p, keyed_from=outs)

        stream = Stream(self._flow, _Op.OPERATOR, sides, label, p, wire=wire, make=make)
        stream._late_wire = late_wire  # noqa: SLF001 - one package
        return stream

    def reduce(self, f: Callable[[Any, Any], Any], *, name: str | None = None,
               parallelism: int | None = None) -> Stream:
        """A running value per key, ``f(value, item)`` (a key's first item is its first
        value); emits ``KeyedValue(key, value)`` after every item."""
        if not callable(f):
            raise TopologyError(f"reduce needs a function, got {f!r}")
        return self._operator("reduce", f, name, parallelism,
                              lambda inputs, _: ReduceBolt(inputs, f))

    def stateful_map(self, f: Callable[[Any, Any], tuple[Any, Any]], *,
                     name: str | None = None, parallelism: int | None = None) -> Stream:
        """``f(state_or_None, item) -> (state_or_None, out_or_None)`` per item; a None
        state deletes the key's state, a None output emits nothing; emits ``out``."""
        if not callable(f):
            raise TopologyError(f"stateful_map needs a function, got {f!r}")
        return self._operator("stateful_map", f, name, parallelism,
                              lambda inputs, _: StatefulMapBolt(inputs, f))

    def window(self, assigner: Any, timestamp: Callable[[Any], float] | None = None,
               out_of_orderness_ms: float = 0, allowed_lateness_ms: float = 0,
               early_fire_ms: float | None = None, time: str = "event") -> WindowedStream:
        """Windows per key (TumblingWindows, SlidingWindows, SessionWindows,
        CountWindows) over event time ``timestamp(item)``, or with ``time="processing"``
        over the operator's wall clock (no timestamp function); then ``.aggregate(agg)``."""
        return WindowedStream(self, assigner, timestamp, out_of_orderness_ms,
                              allowed_lateness_ms, early_fire_ms, time)

    def join(self, other: KeyedStream, *, window: Any,
             timestamp: tuple[Callable[[Any], float], Callable[[Any], float]],
             out_of_orderness_ms: float = 0, allowed_lateness_ms: float = 0,
             how: str = "inner", name: str | None = None,
             parallelism: int | None = None) -> Stream:
        """Pairs of this stream's and ``other``'s items of one key in one window:
        ``JoinResult(key, left, right)``; ``how="left"`` / ``"outer"`` also emit unmatched
        records with None for the other side when their window closes. ``window``:
        TumblingWindows, SlidingWindows, or SessionWindows (sessions span both sides)."""
        self._check_join(other)
        WindowJoinBolt({}, window, timestamp, out_of_orderness_ms,  # validate now
                       allowed_lateness_ms, how)
        return self._operator(
            "join", None, name, parallelism,
            lambda _, sides: WindowJoinBolt(sides, window, timestamp, out_of_orderness_ms,
                                            allowed_lateness_ms, how), others=(other,),
            late_wire=Wire.ITEM)

    def interval_join(self, other: KeyedStream, lower_ms: float, upper_ms: float, *,
                      timestamp: tuple[Callable[[Any], float], Callable[[Any], float]],
                      out_of_orderness_ms: float = 0, name: str | None = None,
                      parallelism: int | None = None) -> Stream:
        """Pairs of one key with ``lower_ms <= t_right - t_left <= upper_ms``:
        ``JoinResult(key, left, right)``."""
        self._check_join(other)
        IntervalJoinBolt({}, lower_ms, upper_ms, timestamp,  # validate now
                         out_of_orderness_ms)
        return self._operator(
            "interval_join", None, name, parallelism,
            lambda _, sides: IntervalJoinBolt(sides, lower_ms, upper_ms, timestamp,
                                              out_of_orderness_ms), others=(other,),
            late_wire=Wire.ITEM)

    def _check_join(self, other: KeyedStream) -> None:
        if not isinstance(other, KeyedStream) or other._flow is not self._flow:
            raise TopologyError(f"a join takes a KeyedStream of the same Dataflow, got "
                                f"{other!r}")
        if other is self:
            raise TopologyError("a join reads the same keyed stream on both sides: key the "
                                "other side with its own key_by so the sides are told apart")


class WindowedStream:
    """A keyed stream cut into windows; ``aggregate`` turns it into WindowResults."""

    def __init__(self, keyed: KeyedStream, assigner: Any,
                 timestamp: Callable[[Any], float] | None, out_of_orderness_ms: float,
                 allowed_lateness_ms: float, early_fire_ms: float | None,
                 time: str = "event") -> None:
        self._keyed = keyed
        self._args = (assigner, timestamp, out_of_orderness_ms, allowed_lateness_ms,
                      early_fire_ms)
        self._time = time
        WindowAggregateBolt(assigner, timestamp, _CHECK_ONLY, *self._args[2:], time=time) \
            .validate_config()
        self._result: Stream | None = None

    def aggregate(self, agg: Any, *, name: str | None = None,
                  parallelism: int | None = None) -> Stream:
        """One ``WindowResult(key, start, end, value, kind)`` per window firing, ``value``
        from ``agg`` (``Count()``, ``Sum("field")``, ``Max("field")``, ... or any object
        with create/add/merge/result) applied to the items."""
        if self._result is not None:
            raise TopologyError("aggregate() was already called on this window; call "
                                ".window(...) again for a second aggregate")
        assigner, timestamp, lag, lateness, early = self._args
        time = self._time
        WindowAggregateBolt(assigner, timestamp, agg, lag, lateness, early,  # validate now
                            time=time)
        self._result = self._keyed._operator(  # noqa: SLF001 - one package
            "window", agg, name, parallelism,
            lambda _, __: WindowAggregateBolt(assigner, timestamp, agg, lag, lateness, early,
                                              time=time),
            wire=Wire.FIRING, late_wire=Wire.LATE)
        return self._result

    def late(self) -> Stream:
        """The items that came after every window they belong to was purged (beyond
        the allowed lateness); call after ``aggregate``."""
        result = self._result
        if result is None:
            raise TopologyError("late() needs the window's aggregate(...) first: "
                                "late = windowed.late() after windowed.aggregate(agg), or "
                                "windowed.aggregate(agg).late()")
        return result.late()


class _CheckOnly:
    """Stands in for an aggregator while only the window settings are validated."""

    def create(self) -> None: ...
    def add(self, acc: Any, item: Any) -> None: ...
    def merge(self, a: Any, b: Any) -> None: ...
    def result(self, key: Any, window: Any, acc: Any) -> None: ...


_CHECK_ONLY = _CheckOnly()
