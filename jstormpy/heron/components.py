"""heronpy spouts and bolts as jstormpy components, run in-process in their tasks.

:class:`HeronSpout` and :class:`HeronBolt` wrap a heronpy ``Spout`` / ``Bolt`` class. Each
task creates one instance of it with the task as its ``delegate`` (heronpy's component
contract), so the heronpy ``emit`` / ``ack`` / ``fail`` / ``log`` go to the task. The mapping
onto this engine's checkpoints:

- a :class:`~heronpy.api.state.stateful_component.StatefulComponent` gets a
  :class:`~heronpy.api.state.state.HashMapState` in ``init_state`` (restored from the last
  completed checkpoint, empty on a fresh start), then ``initialize``; at each barrier
  ``pre_save(checkpoint_id)`` runs and the state's contents are the task's snapshot
  (``snapshot`` / ``restore``, the engine's custom-state hooks). A rollback starts every
  task afresh, so ``init_state`` sees the restored state again, as in Heron;
- a heronpy spout emit with a ``tup_id`` is acked (``ack(tup_id)``) once a completed
  checkpoint covers it and no recovery can fall back past that checkpoint (it is the
  oldest of the ``Config.checkpoints_retained`` newest completed ones); ``fail`` is never
  called (a failure rolls back instead);
- exactly-once needs replayable spouts: a stateful spout keeps its read position in its
  state and is rewound with it; a spout that is not stateful is refused at submit under
  ``guarantee="exactly_once"`` (:meth:`HeronSpout.check_guarantee`);
- a bolt's ``fail(tup)`` fails its task: the topology rolls back to the last checkpoint and
  replays (Heron's effectively-once does the same);
- tick tuples (``topology.tick.tuple.freq.secs``) go to ``process_tick``.

Example:
    >>> from heronpy.api.bolt.bolt import Bolt
    >>> class Upper(Bolt):
    ...     outputs = ["word"]
    ...     def process(self, tup): self.emit([tup.values[0].upper()])
    >>> HeronBolt(Upper).outputs
    {'default': ('word',)}
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from heronpy.api.state.state import HashMapState
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Stream
from heronpy.api.tuple import Tuple as HeronTuple
from heronpy.api.tuple import TupleHelper
from jstormpy.api.batch import Batch
from jstormpy.api.component import (
    DEFAULT_STREAM,
    Bolt,
    Emitter,
    Spout,
    TopologyContext,
    Tuple,
    bound_emitter,
)
from jstormpy.api.errors import HeronError, JStormError, TopologyError
from jstormpy.heron.context import LOG_LEVELS, HeronTopologyContext

TICK_FREQ_KEY = "topology.tick.tuple.freq.secs"
IDLE_SLEEP_S = 0.001
"""After a ``next_tuple`` that emitted nothing (Heron's spout waits likewise)."""


def _streams(cls: type, outputs: Any) -> dict[str, tuple[str, ...]]:
    declared = outputs if outputs is not None else list(getattr(cls, "outputs", None) or [])
    if not isinstance(declared, (list, tuple)):
        raise TopologyError(f"{cls.__name__}.outputs must be a list of field names or "
                            f"Streams, not {declared!r}")
    streams: dict[str, list[str]] = {}
    for out in declared:
        if isinstance(out, str):
            streams.setdefault(Stream.DEFAULT_STREAM_ID, []).append(out)
        elif isinstance(out, Stream):
            streams.setdefault(out.stream_id, []).extend(out.fields)
        else:
            raise TopologyError(f"{cls.__name__}.outputs: {out!r} is neither a field name "
                                "nor a Stream")
    return {name: tuple(fields) for name, fields in streams.items()}


class _Delegate:
    """A heronpy component's ``delegate``: its emits, acks and logs go to the task."""

    def __init__(self, emitter: Emitter, logger: Any, name: str) -> None:
        self._emitter = emitter
        self._emit = emitter.emit
        self.logger = logger
        self.name = name

    def send(self, tup: Any, stream: str, direct_task: int | None,
             need_task_ids: bool) -> list[int] | None:
        """Emit through the task (direct, or with the task ids it went to)."""
        if direct_task is not None:
            self._emitter.emit_direct(direct_task, tup, stream)
            return [direct_task] if need_task_ids else None
        if need_task_ids:
            tracked = getattr(self._emitter, "emit_tracked", None)
            if callable(tracked):
                return list(tracked(tup, stream))
        self._emit(tup, stream)
        return [] if need_task_ids else None

    def log(self, message: Any, level: str | None = None) -> None:
        self.logger.log(LOG_LEVELS.get((level or "info").lower(), 20), "%s", message)


class _BoltDelegate(_Delegate):
    def __init__(self, emitter: Emitter, logger: Any, name: str) -> None:
        super().__init__(emitter, logger, name)
        self.acked = 0
        self.emit = self._bolt_emit

    def _bolt_emit(self, tup: Any, stream: str = DEFAULT_STREAM, anchors: Any = None,
                   direct_task: int | None = None,
                   need_task_ids: bool = False) -> list[int] | None:
        if direct_task is None and not need_task_ids:  # the hot path: one call
            self._emit(tup, stream)
            return None
        return self.send(tup, stream, direct_task, need_task_ids)

    def ack(self, tup: Any) -> None:
        self.acked += 1

    def fail(self, tup: Any) -> None:
        raise HeronError(
            f"heronpy bolt {self.name!r} failed a tuple from {getattr(tup, 'component', '?')!r} "
            f"({getattr(tup, 'values', tup)!r}): the topology rolls back to its last "
            "checkpoint and replays from there")


class _SpoutDelegate(_Delegate):
    def __init__(self, emitter: Emitter, logger: Any, name: str, track_ids: bool) -> None:
        super().__init__(emitter, logger, name)
        self.track_ids = track_ids
        self.emitted = 0
        self.pending: list[Any] = []
        """Ids emitted since the last barrier."""
        self.emit = self._spout_emit

    def _spout_emit(self, tup: Any, tup_id: Any = None, stream: str = DEFAULT_STREAM,
                    direct_task: int | None = None,
                    need_task_ids: bool = False) -> list[int] | None:
        self.emitted += 1
        if tup_id is not None and self.track_ids:
            self.pending.append(tup_id)
        if direct_task is None and not need_task_ids:
            self._emit(tup, stream)
            return None
        return self.send(tup, stream, direct_task, need_task_ids)


def _redistribute_state(old_states: Sequence[Any], new_parallelism: int) -> list[Any]:
    """The rescale hook (``redistribute_state``): a stateless heronpy component has no state
    to move; a stateful one's belongs to its task (a heronpy ``State`` is not keyed), so its
    parallelism cannot change."""
    if any(state is not None for state in old_states):
        raise JStormError(
            "a stateful heronpy component (StatefulComponent) keeps its state per task, and "
            "heronpy's State is not keyed, so it cannot be split over another number of "
            "tasks: its parallelism cannot change (keep keyed state in a jstormpy bolt's "
            "self.state(...) to rescale it)")
    return [None] * new_parallelism


def _heron_config(own: Mapping[str, Any], context: TopologyContext,
                  parallelism: int) -> dict[str, Any]:
    return {**own, "topology.name": context.topology,
            "topology.component.parallelism": parallelism}


def _start(impl: Any, stateful: bool, restored: dict[Any, Any] | None,
           heron_config: Mapping[str, Any], context: TopologyContext,
           log: Any) -> HashMapState | None:
    """What a heronpy spout or bolt goes through when its task starts: ``init_state``
    with the restored state (if stateful), then ``initialize``; the state it was given."""
    state = None
    if stateful:
        state = HashMapState(restored or {})
        impl.init_state(state)
    impl.initialize(config=_heron_config(heron_config, context, context.parallelism),
                    context=HeronTopologyContext(context, dict(heron_config), log))
    return state


class HeronSpout(Spout):
    """A heronpy ``Spout`` class as a jstormpy spout (see the module docs).

    Args:
        spout_cls: the heronpy ``Spout`` subclass.
        config: its config (the topology's, overridden by the component's), given to
            ``initialize`` and to ``init_state``'s component.
        outputs: its declared outputs (field names or ``Stream``\\ s); default the class's.
    """

    def __init__(self, spout_cls: type, config: Mapping[str, Any] | None = None,
                 outputs: Sequence[Any] | None = None) -> None:
        self.spout_cls = spout_cls
        self.heron_config = dict(config or {})
        self.outputs = _streams(spout_cls, outputs)  # type: ignore[misc]
        self.stateful = issubclass(spout_cls, StatefulComponent)
        self._restored: dict[Any, Any] | None = None
        self._impl: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_impl", "_delegate", "_state"):
            state.pop(key, None)
        return state

    redistribute_state = staticmethod(_redistribute_state)

    def check_guarantee(self, guarantee: str, name: str) -> None:
        """Submit-time check: exactly-once needs a spout that a rollback can rewind."""
        if guarantee == "exactly_once" and not self.stateful:
            raise TopologyError(
                f"spout {name!r} (heronpy {self.spout_cls.__name__}) is not stateful: under "
                "guarantee='exactly_once' a rollback must rewind it, so keep its read "
                "position in its state (subclass heronpy.api.state.stateful_component."
                "StatefulComponent: init_state / pre_save), or run the topology "
                "at-least-once (topology.reliability.mode ATLEAST_ONCE, or "
                "Config(guarantee='at_least_once'))")

    # -- the checkpoint hooks -------------------------------------------------------------
    def restore(self, snap: Any) -> None:
        """The state of the restored checkpoint (before ``open``)."""
        self._restored = snap

    def before_snapshot(self, checkpoint_id: int) -> None:
        """``pre_save``; the ids emitted since the last barrier belong to this checkpoint."""
        if self.stateful:
            self._impl.pre_save(checkpoint_id)
        delegate = self._delegate
        if delegate.pending:
            self._acks.append((checkpoint_id, delegate.pending))
            delegate.pending = []

    def snapshot(self) -> Any:
        """The state's contents (None for a spout that is not stateful)."""
        state = self._state if self.stateful else None
        return dict(state.items()) if state is not None else None

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        """``ack(tup_id)`` for the tuples of checkpoints no recovery can fall back past:
        the oldest of the ``checkpoints_retained`` newest completed ones and before (a
        spout may then forget them, e.g. acknowledge them to its broker; the rule of
        :mod:`jstormpy.multilang.acks`)."""
        completed = self._completed
        completed.append(checkpoint_id)
        del completed[:-self._retained]
        if len(completed) < self._retained:
            return
        safe = completed[0]
        while self._acks and self._acks[0][0] <= safe:
            for tup_id in self._acks.pop(0)[1]:
                self._impl.ack(tup_id)

    # -- the life of the task -------------------------------------------------------------
    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Create the heronpy spout; ``init_state`` (if stateful), ``initialize``,
        ``activate``."""
        emitter = bound_emitter(self)
        assert emitter is not None, "open outside a running task"
        track = conf.get("guarantee", "exactly_once") != "at_most_once"
        self._delegate = _SpoutDelegate(emitter, self.log, context.component, track)
        self._acks: list[tuple[int, list[Any]]] = []
        self._completed: list[int] = []
        self._retained = max(1, int(conf.get("checkpoints_retained", 1)))
        self._impl = impl = self.spout_cls(delegate=self._delegate)
        self._state = _start(impl, self.stateful, self._restored, self.heron_config, context,
                             self.log)
        impl.activate()

    def next_tuple(self) -> None:
        """One ``next_tuple`` of the heronpy spout (a short sleep if it emitted nothing)."""
        delegate = self._delegate
        before = delegate.emitted
        self._impl.next_tuple()
        if delegate.emitted == before:
            time.sleep(IDLE_SLEEP_S)

    def close(self) -> None:
        """``deactivate`` and ``close``."""
        impl, self._impl = self._impl, None
        if impl is not None:
            impl.deactivate()
            impl.close()


class HeronBolt(Bolt):
    """A heronpy ``Bolt`` class as a jstormpy bolt (see the module docs).

    Args:
        bolt_cls: the heronpy ``Bolt`` subclass.
        config: its config (the topology's, overridden by the component's); a
            ``topology.tick.tuple.freq.secs`` there sends it tick tuples.
        outputs: its declared outputs; default the class's.
    """

    def __init__(self, bolt_cls: type, config: Mapping[str, Any] | None = None,
                 outputs: Sequence[Any] | None = None) -> None:
        self.bolt_cls = bolt_cls
        self.heron_config = dict(config or {})
        self.outputs = _streams(bolt_cls, outputs)  # type: ignore[misc]
        self.stateful = issubclass(bolt_cls, StatefulComponent)
        tick = self.heron_config.get(TICK_FREQ_KEY)
        try:
            self.tick_tuple_freq_s = float(tick) if tick is not None else None
        except (TypeError, ValueError):
            raise TopologyError(f"heronpy bolt {bolt_cls.__name__}: {TICK_FREQ_KEY} must be a "
                                f"number of seconds, not {tick!r}") from None
        if self.tick_tuple_freq_s is not None and self.tick_tuple_freq_s <= 0:
            raise TopologyError(f"heronpy bolt {bolt_cls.__name__}: {TICK_FREQ_KEY} must be "
                                f"> 0, not {tick!r}")
        if self.tick_tuple_freq_s:
            self.tick_interval_ms = min(1000.0, self.tick_tuple_freq_s * 1000.0)  # type: ignore[misc]
        self._restored: dict[Any, Any] | None = None
        self._impl: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_impl", "_delegate", "_state", "_process"):
            state.pop(key, None)
        return state

    redistribute_state = staticmethod(_redistribute_state)

    def restore(self, snap: Any) -> None:
        """The state of the restored checkpoint (before ``prepare``)."""
        self._restored = snap

    def before_snapshot(self, checkpoint_id: int) -> None:
        """``pre_save`` at the barrier."""
        if self.stateful:
            self._impl.pre_save(checkpoint_id)

    def snapshot(self) -> Any:
        """The state's contents (None for a bolt that is not stateful)."""
        state = self._state if self.stateful else None
        return dict(state.items()) if state is not None else None

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Create the heronpy bolt; ``init_state`` (if stateful), ``initialize``."""
        emitter = bound_emitter(self)
        assert emitter is not None, "prepare outside a running task"
        self._delegate = _BoltDelegate(emitter, self.log, context.component)
        self._impl = impl = self.bolt_cls(delegate=self._delegate)
        self._state = _start(impl, self.stateful, self._restored, self.heron_config, context,
                             self.log)
        self._process = impl.process
        self._last_tick = time.monotonic()

    def execute(self, tup: Tuple) -> None:
        """``process`` one tuple."""
        self._process(HeronTuple(None, tup.source, tup.stream, tup.task, tup.values,
                                 time.time(), None))

    def execute_batch(self, batch: Batch) -> None:
        """``process`` each tuple of a channel batch (one clock read per batch)."""
        process, source, stream, task = self._process, batch.source, batch.stream, batch.task
        now = time.time()
        for values in batch.rows:
            process(HeronTuple(None, source, stream, task, values, now, None))

    def on_tick(self, now_ms: float) -> None:
        """A tick tuple to ``process_tick`` every ``topology.tick.tuple.freq.secs``."""
        freq = self.tick_tuple_freq_s
        now = time.monotonic()
        if freq and self._impl is not None and now - self._last_tick >= freq:
            self._last_tick = now
            self._impl.process_tick(TupleHelper.make_tick_tuple())

    def cleanup(self) -> None:
        """Drop the heronpy bolt (heronpy bolts have no cleanup hook)."""
        self._impl = None
