"""The user-facing component model: Tuple, TopologyContext, Spout and Bolt.

Components are plain Python classes. The engine never requires ``super().__init__()``:
it attaches its own fields (the collector, the managed state) after construction,
under names starting with ``_jstorm``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from jstormpy.run_identity import RunIdentity
from jstormpy.state_store import MemoryStore, check_ttl, state_ttl

DEFAULT_STREAM = "default"
ERRORS_STREAM = "errors"
"""Every bolt's dead-letter stream: with ``Config(on_error="dead_letter")`` a tuple whose
``execute`` raised goes there instead of failing the job (docs/errors.md)."""
ERROR_FIELDS = ("component", "task", "error", "traceback", "tuple")
"""Fields of ``ERRORS_STREAM``: the bolt, its task id, ``"Type: message"``, the traceback
text and the failing tuple's values (a list)."""


class Tuple:
    """One record flowing between components.

    Example:
        >>> t = Tuple(("cat", 3), {"word": 0, "count": 1}, "count", "default", 7)
        >>> t["word"], t[1], t.fields, t.source, t.task
        ('cat', 3, ('word', 'count'), 'count', 7)
    """

    __slots__ = ("values", "_index", "source", "stream", "task")

    def __init__(self, values: Sequence[Any], index: Mapping[str, int], source: str,
                 stream: str = DEFAULT_STREAM, task: int = -1) -> None:
        self.values = values
        self._index = index
        self.source = source
        self.stream = stream
        self.task = task

    def __getitem__(self, key: str | int) -> Any:
        if key.__class__ is str:
            return self.values[self._index[key]]  # type: ignore[index]
        return self.values[key]  # type: ignore[index]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of field ``key``, or ``default`` if the stream has no such field."""
        pos = self._index.get(key)
        # a shorter tuple comes from an older code version during a gray release
        return default if pos is None or pos >= len(self.values) else self.values[pos]

    @property
    def fields(self) -> tuple[str, ...]:
        """The field names of this tuple's stream, in order."""
        return tuple(sorted(self._index, key=self._index.__getitem__))

    def as_dict(self) -> dict[str, Any]:
        """Field name → value."""
        n = len(self.values)  # a shorter tuple: sent by an older version (gray release)
        return {name: self.values[pos] for name, pos in self._index.items() if pos < n}

    def __len__(self) -> int:
        return len(self.values)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Tuple, (self.values, dict(self._index), self.source, self.stream, self.task))

    @staticmethod
    def bound(index: Mapping[str, int], source: str, stream: str = DEFAULT_STREAM,
              task: int = -1) -> type[Tuple]:
        """A Tuple class for one channel: ``cls(values)`` builds a tuple of that channel.

        The engine builds one per (upstream task, stream) so a record costs one
        one-argument constructor call; instances are plain ``Tuple`` for ``isinstance``
        and pickle as ``Tuple``.
        """
        return type("Tuple", (_ChannelTuple,), {
            "__slots__": (), "_index": index, "source": source, "stream": stream,
            "task": task})

    def __repr__(self) -> str:
        return f"Tuple({self.source}:{self.task}/{self.stream} {list(self.values)!r})"


class _ChannelTuple(Tuple):
    """Base of :meth:`Tuple.bound` classes: channel attributes live on the class."""

    __slots__ = ()

    def __init__(self, values: Sequence[Any]) -> None:  # noqa: D107
        self.values = values


@dataclass(frozen=True)
class TopologyContext:
    """What a task knows about its place in the topology (given to open/prepare)."""

    topology: str
    component: str
    task_id: int
    task_index: int
    worker_id: int
    component_tasks: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Every component's task ids (sorted)."""
    input_tasks: tuple[int, ...] = ()
    """Task ids of this task's input channels (upstream tasks)."""
    output_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """This component's declared streams and their fields."""
    generation: int = 0
    """The topology generation the task runs in (bumped by every rollback)."""
    run: RunIdentity | None = None
    """Which run of the topology this is (:mod:`jstormpy.run_identity`); None when the task
    is driven outside a Topology Master (tests, ``run_inline``). Sinks namespace what they
    leave in external systems with it."""

    @property
    def parallelism(self) -> int:
        """How many tasks this component has."""
        return len(self.component_tasks.get(self.component, (self.task_id,)))


def declared_streams(component: Any) -> dict[str, tuple[str, ...]]:
    """A component's output streams as ``{stream: fields}``."""
    outputs = getattr(component, "outputs", ())
    if isinstance(outputs, Mapping):
        return {str(k): tuple(v) for k, v in outputs.items()}
    return {DEFAULT_STREAM: tuple(outputs)} if outputs else {}


class Emitter(Protocol):
    """What a running component emits through: its task's output collector."""

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> None: ...

    def emit_batch(self, columns: Any, stream: str = DEFAULT_STREAM) -> None: ...

    def emit_direct(self, task: int, values: Sequence[Any],
                    stream: str = DEFAULT_STREAM) -> None: ...

    def emit_watermark(self, watermark_ms: float) -> None: ...


# The engine's side of a component instance. The engine keeps what it attaches to a user's
# component in the instance dict under reserved ``_jstorm_*`` names (no user attribute can
# clash, and none is a class attribute a subclass could shadow); these functions are the
# only code outside Component that reads or writes them.

def bind_task(component: Any, emitter: Emitter, logger: Any) -> None:
    """Attach a component instance to its task: emits go to ``emitter`` (``emit`` bound
    straight to the emitter's, one call less per tuple) and ``log`` is ``logger``."""
    component.__dict__["_jstorm_collector"] = emitter
    component.__dict__["emit"] = emitter.emit
    component.__dict__["_jstorm_log"] = logger


def bound_emitter(component: Any) -> Emitter | None:
    """The emitter :func:`bind_task` attached, or None outside a running task."""
    emitter: Emitter | None = component.__dict__.get("_jstorm_collector")
    return emitter


def managed_states(component: Any) -> dict[str, Any]:
    """The component's managed state dicts by name (``Component.state``), created empty
    on first use: the engine snapshots, restores and tracks exactly this dict."""
    states: dict[str, Any] = component.__dict__.setdefault("_jstorm_states", {})
    return states


def restore_managed_states(component: Any, states: dict[str, Any]) -> None:
    """Replace the component's managed states with restored ones (before ``open``)."""
    component.__dict__["_jstorm_states"] = states


def use_state_factory(component: Any, factory: Any) -> None:
    """Make ``Component.state`` create new state dicts with ``factory`` (incremental
    checkpoints install a dict that tracks changed keys)."""
    component.__dict__["_jstorm_state_factory"] = factory


def use_state_store(component: Any, store: Any) -> None:
    """Make ``Component.state`` open its states in ``store`` (a task's RocksDB database,
    or a memory store; docs/state-stores.md)."""
    component.__dict__["_jstorm_state_store"] = store


def state_store_kind(component: Any) -> str:
    """``"rocksdb"`` when the task's managed state lives in a RocksDB store, else
    ``"memory"`` (also outside a running task)."""
    store = component.__dict__.get("_jstorm_state_store")
    return "memory" if store is None else str(store.kind)


def restore_finished(component: Any) -> None:
    """A restored spout had called ``finish()`` before the checkpoint."""
    component.__dict__["_jstorm_finished"] = True


class Component:
    """Behaviour shared by spouts and bolts: emitting and managed state."""

    outputs: ClassVar[Sequence[str] | Mapping[str, Sequence[str]]] = ()
    _jstorm_collector: Emitter  # set by bind_task

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> None:
        """Send one tuple on ``stream`` to every subscriber, routed by its grouping."""
        self._jstorm_collector.emit(values, stream)

    def emit_batch(self, columns: Any, stream: str = DEFAULT_STREAM) -> None:
        """Send many tuples on ``stream`` at once, given column by column.

        ``columns`` is ``{"field": sequence, ...}`` with every declared field of the
        stream, a sequence of columns in declared field order, or a received ``Batch``.
        Routing is done once per batch (fields grouping partitions it in one pass); the
        tuples are ordered after anything emitted before and before anything after.
        """
        self._jstorm_collector.emit_batch(columns, stream)

    def emit_direct(self, task: int, values: Sequence[Any],
                    stream: str = DEFAULT_STREAM) -> None:
        """Send one tuple to ``task`` of a subscriber that uses direct grouping."""
        self._jstorm_collector.emit_direct(task, values, stream)

    def emit_watermark(self, watermark_ms: float) -> None:
        """Declare that no tuple with an event time below ``watermark_ms`` follows."""
        self._jstorm_collector.emit_watermark(watermark_ms)

    def state(self, name: str, ttl_ms: int | None = None) -> MutableMapping[Any, Any]:
        """Managed keyed state: a mapping snapshotted at every checkpoint, restored on
        rollback; a dict in the worker's heap, or a RocksDB column family with
        ``Config(state_store="rocksdb")`` (same behaviour: get / [] / set / del / in /
        iteration / len).

        ``ttl_ms``: an entry not written for this many milliseconds is invisible at once
        and removed by a sweep later (docs/state-stores.md). Call it in
        ``open``/``prepare``; the same name returns the same (restored) state.
        """
        states = managed_states(self)
        current = states.get(name)
        if current is not None and state_ttl(current) == ttl_ms:
            return current  # type: ignore[no-any-return]
        store = self.__dict__.get("_jstorm_state_store")
        if store is None:
            # incremental checkpoints install a dict that tracks changed keys
            store = MemoryStore(self.__dict__.get("_jstorm_state_factory", dict))
        states[name] = store.open(name, check_ttl(ttl_ms), current)
        return states[name]  # type: ignore[no-any-return]

    @property
    def log(self) -> Any:
        """This task's logger (structured, carries task id and generation)."""
        return self.__dict__.get("_jstorm_log")


class Spout(Component):
    """A source of tuples.

    Replayable-source contract (needed for exactly-once): ``snapshot()`` returns the
    position reached (e.g. an offset), ``restore(snap)`` rewinds to it. ``restore`` runs
    before ``open``; set defaults in ``__init__``.

    Split contract (needed to change the spout's parallelism, docs/rescaling.md): the
    source is a set of *splits* (files, partitions, ranges), each read in order up to an
    *offset*. Task ``i`` of ``n`` reads the splits it owns (e.g. every ``n``-th of the
    sorted list, :func:`jstormpy.connectors.splits.owned_splits`); ``snapshot()`` returns
    ``{"offsets": {split: offset}}`` for the splits it owns; ``open`` keeps the restored
    offsets of the splits it owns and drops the rest; and the class sets
    ``redistribute_state = Spout.redistribute_splits``. On a rescale every new task is
    restored with the offsets of all splits, so each split continues, on whichever task
    now owns it, right after the last record the checkpoint covers.
    ``ReplayableSpout`` and ``FileSpout`` implement it.
    """

    @staticmethod
    def redistribute_splits(old_states: Sequence[Any],
                            new_parallelism: int) -> list[dict[str, Any]]:
        """The split contract's ``redistribute_state`` hook: the offsets of every split of
        the old tasks, given to each of the ``new_parallelism`` new tasks (each keeps the
        splits it owns in ``open``).

        Example:
            >>> Spout.redistribute_splits([{"offsets": {"a": 3}}, {"offsets": {"b": 7}}], 3)[2]
            {'offsets': {'a': 3, 'b': 7}}
        """
        merged: dict[Any, Any] = {}
        for state in old_states:
            merged.update((state or {}).get("offsets", {}))
        return [{"offsets": dict(merged)} for _ in range(new_parallelism)]

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Called once per task, after any state restore."""

    def next_tuple(self) -> None:
        """Emit zero or more tuples. Called in a loop; return quickly when idle."""

    def finish(self) -> None:
        """Declare that this spout has no more input (a rollback that rewinds it un-finishes it)."""
        self.__dict__["_jstorm_finished"] = True

    @property
    def finished(self) -> bool:
        """Whether ``finish()`` was called since the last open/restore."""
        return bool(self.__dict__.get("_jstorm_finished", False))

    def close(self) -> None:
        """Called when the task stops."""


class Bolt(Component):
    """A processing step: ``execute`` is called once per input tuple, in order per channel."""

    tick_interval_ms: ClassVar[float | None] = None
    """If set, ``on_tick(now_ms)`` is called about this often (processing time)."""

    commits_in_two_phases: ClassVar[bool] = False
    """True for a two-phase-commit sink (``jstormpy.barrier.twophase.Sink`` sets it): the
    engine then drives its transactions at each checkpoint."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Called once per task, after any state restore."""

    def execute(self, tup: Tuple) -> None:
        """Process one tuple."""

    def on_watermark(self, watermark_ms: float) -> None:
        """The task's event-time watermark (minimum over input channels) advanced."""

    def on_tick(self, now_ms: float) -> None:
        """Processing-time tick (see ``tick_interval_ms``)."""

    def on_inputs_finished(self) -> None:
        """Every input channel has ended (all upstream spouts finished); flush what is left."""

    def cleanup(self) -> None:
        """Called when the task stops."""
