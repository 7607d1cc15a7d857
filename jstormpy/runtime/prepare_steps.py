"""A worker's answer to Prepare: its one order, its one driver and its port (issue 37).

The Topology Master's ``Prepare(generation, tasks, handles)`` asks a worker to rebuild its
tasks for a new generation from a checkpoint. The worker's steps have one order
(:func:`steps`), and why each is where it is:

1. a Prepare of an **older generation** than the worker's is ignored, unanswered: a newer
   one overtook it (its Ready would name a generation the TM no longer runs);
2. ``StopTasks`` (not for a ``partial`` Prepare, whose other tasks keep running): the old
   tasks stop before anything of the new generation exists, so no old task emits into or
   snapshots over a new one (a snapshot still uploading reports nothing);
3. ``TakeGeneration``: the worker runs the new generation from here: its input queues are
   tagged with it (a frame of the old generation is dropped, DESIGN §4), the transport
   switches to it;
4. ``ReadSnapshots``: every restored task's snapshot is read (shared files chain, local
   copies: the port's I/O) **before any task is built**: a read that fails leaves no
   half-built generation behind, and a build never waits on storage;
5. a read that failed answers ``Ready(ok=False)`` naming the task: ``corrupt`` if the
   snapshot was damaged (:class:`~jstormpy.api.errors.CorruptSnapshotError`: the TM marks
   the checkpoint bad and falls back to an older one without counting a restart),
   otherwise a failure the restart strategy counts;
6. ``BuildTasks``: each task built from its snapshot, in task-id order (a failure names
   the task);
7. ``RestoreSinks``: each sink re-commits its restored staged transactions and recovers to
   the restored checkpoint **before Ready**: the TM sends Start (new transactions) only
   once every worker answered, so no new transaction can precede the restore's commits;
8. ``AnswerReady``: ``Ready(ok=True)``.

:func:`perform` is the one driver. Production's worker (``runtime/worker.py``: blocking
reads on the control thread) and the simulator's worker (``jstormpy/testing/simulation``:
simulated storage, answers later) are each a :class:`PreparePort`.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jstormpy.api.errors import CorruptSnapshotError


@dataclass(frozen=True)
class PrepareOrder:
    """A Prepare as the worker received it."""

    generation: int
    tasks: tuple[int, ...]
    """This worker's tasks in the new generation."""
    handles: Mapping[int, str] = field(default_factory=dict)
    """Task id -> the snapshot it restores (a task without one starts fresh)."""
    partial: bool = False
    """The worker's other tasks keep running (an at-most-once respawn, a gray release's
    batch): nothing is stopped."""


@dataclass(frozen=True)
class StopTasks:
    """Stop the old generation's tasks (``generation``: the new one)."""

    generation: int


@dataclass(frozen=True)
class TakeGeneration:
    """Run ``generation`` from here: input queues tagged with it, transport switched."""

    generation: int


@dataclass(frozen=True)
class ReadSnapshots:
    """Read the snapshot of every task in ``handles``, all before any task is built."""

    handles: Mapping[int, str]


@dataclass(frozen=True)
class BuildTasks:
    """Build ``tasks`` (in this order) from the snapshots read."""

    tasks: tuple[int, ...]


@dataclass(frozen=True)
class RestoreSinks:
    """Every built sink re-commits its restored staged transactions and recovers."""


@dataclass(frozen=True)
class AnswerReady:
    """Answer ``Ready(ok=True)``."""


PrepareStep = StopTasks | TakeGeneration | ReadSnapshots | BuildTasks | RestoreSinks \
    | AnswerReady


@dataclass(frozen=True)
class Ready:
    """The worker's answer to a Prepare."""

    generation: int
    ok: bool
    corrupt: bool = False
    """The failure was a damaged snapshot: the TM falls back to an older checkpoint."""
    error: str = ""
    failed_task: int = 0
    """The task whose read, build or sink restore failed (0: none)."""


def steps(order: PrepareOrder, current: int) -> tuple[PrepareStep, ...]:
    """The steps of ``order`` at a worker running generation ``current`` (see the
    module's docstring); none for a stale Prepare."""
    if order.generation < current:
        return ()
    reads = {t: order.handles[t] for t in order.tasks if order.handles.get(t)}
    return (*(() if order.partial else (StopTasks(order.generation),)),
            TakeGeneration(order.generation), ReadSnapshots(reads),
            BuildTasks(tuple(sorted(order.tasks))), RestoreSinks(), AnswerReady())


def failed(generation: int, task_id: int, error: BaseException) -> Ready:
    """The Ready of a Prepare whose read, build or sink restore of task ``task_id`` failed
    with ``error``: ``"<ExceptionType>: message"``, the form the TM reads an error no
    restart can fix from (``master/restart.py``), the task in ``failed_task``."""
    return Ready(generation, False, isinstance(error, CorruptSnapshotError),
                 f"{type(error).__name__}: {error}", task_id)


class PreparePort(Protocol):
    """How a runtime performs a Prepare's steps. A snapshot read answers through
    ``then``, at once (production) or later (the simulator's storage events)."""

    @property
    def generation(self) -> int:
        """The generation the worker runs now."""

    def stop_tasks(self, generation: int) -> None:
        """Stop and forget the old tasks; ``generation`` is the new one."""

    def take_generation(self, generation: int) -> None:
        """Tag the input queues with ``generation`` and switch the transport to it."""

    def read_snapshot(self, task_id: int, handle: str,
                      then: Callable[[Any, BaseException | None], None]) -> None:
        """Read task ``task_id``'s snapshot ``handle``; ``then(snapshot, error)``."""

    def current(self, generation: int) -> bool:
        """The Prepare of ``generation`` is still the one to answer (no newer one came
        while its snapshots were read, the worker lives)."""

    def begin_build(self, tasks: Sequence[int]) -> None:
        """The worker-wide wiring of ``tasks`` (channels, input queues), once every
        snapshot is read, before the first task is built."""

    def build_task(self, task_id: int, snapshot: Any) -> None:
        """Build task ``task_id`` from ``snapshot`` (None: fresh state); not started."""

    def built(self, tasks: Sequence[int]) -> None:
        """Every task of ``tasks`` is built: they are the worker's tasks now."""

    def sinks(self) -> Sequence[int]:
        """The built tasks that are sinks, in the order they restore."""

    def restore_sink(self, task_id: int) -> None:
        """Sink ``task_id`` re-commits its restored staged transactions and recovers."""

    def answerable(self, error: Exception) -> bool:
        """Whether ``error`` (raised by a build or a sink's restore) is the Prepare's
        answer, ``Ready(ok=False)``; any other propagates (a bug of the runtime)."""

    def ready(self, ready: Ready) -> None:
        """Send the answer."""


def perform(order: PrepareOrder, port: PreparePort) -> None:
    """The one driver: ``order``'s steps through ``port`` (see the module's docstring)."""
    _step(order, list(steps(order, port.generation)), port)


def _step(order: PrepareOrder, todo: list[PrepareStep], port: PreparePort,
          snapshots: Mapping[int, Any] | None = None) -> None:
    generation = order.generation
    while todo:
        step = todo.pop(0)
        match step:
            case StopTasks(g):
                port.stop_tasks(g)
            case TakeGeneration(g):
                port.take_generation(g)
            case ReadSnapshots(handles):
                _read_all(order, handles, todo, port)
                return  # the reads go on with the rest
            case BuildTasks(tasks):
                port.begin_build(tasks)
                for task_id in tasks:
                    try:
                        port.build_task(task_id, (snapshots or {}).get(task_id))
                    except Exception as exc:
                        if not port.answerable(exc):
                            raise
                        port.ready(failed(generation, task_id, exc))
                        return
                port.built(tasks)
            case RestoreSinks():
                for task_id in port.sinks():
                    try:
                        port.restore_sink(task_id)
                    except Exception as exc:
                        if not port.answerable(exc):
                            raise
                        port.ready(failed(generation, task_id, exc))
                        return
            case AnswerReady():
                port.ready(Ready(generation, True))


def _read_all(order: PrepareOrder, handles: Mapping[int, str], rest: list[PrepareStep],
              port: PreparePort) -> None:
    """Read every snapshot; once each read answered (or, after a failure, was not
    issued), go on with ``rest`` or answer the first failure."""
    read: dict[int, Any] = {}
    failure: list[tuple[int, BaseException]] = []
    left = [len(handles)]

    def answered() -> None:
        left[0] -= 1
        if left[0]:
            return
        if not port.current(order.generation):
            return
        if failure:
            task_id, error = failure[0]
            port.ready(failed(order.generation, task_id, error))
            return
        _step(order, rest, port, read)

    def read_one(task_id: int) -> Callable[[Any, BaseException | None], None]:
        def then(snapshot: Any, error: BaseException | None) -> None:
            if error is not None:
                failure.append((task_id, error))
            else:
                read[task_id] = snapshot
            answered()
        return then

    if not handles:
        left[0] = 1
        answered()
        return
    for task_id in sorted(handles):
        if failure:  # a read answered at once failed: the others are not needed
            answered()
        else:
            port.read_snapshot(task_id, handles[task_id], read_one(task_id))
