"""``run_inline``: run a topology (or a dataflow) in this process, with real checkpoints and
a simulated worker crash, and return what its :class:`~jstormpy.testing.TestingSink`
committed. For users' unit tests: no processes, no sockets, milliseconds.

It drives the engine's own pieces on one thread, deterministically:

- components are copies of the topology's (pickled and loaded, as a worker does), wired
  with the engine's routing (:func:`~jstormpy.runtime.routing.build_routes`, so a fields
  grouping sends a key to the task it would go to in a cluster);
- checkpoint barriers are injected at the spouts and aligned at every bolt by the
  engine's :class:`~barrier.aligner.BarrierAligner` (exactly-once alignment: records
  behind a barrier wait); every task's snapshot is pickled at its barrier, and a sink
  runs its two-phase commit through :class:`~barrier.transactions.SinkTransactions`
  (pre-commit at the barrier, commit when every task snapshotted);
- the crash: after the first completed checkpoint and some more records, every task is
  dropped without cleanup (its open and staged output left behind, as a killed worker
  leaves it), then rebuilt in a new generation, restored from the last completed
  checkpoint with the engine's ``restore_component``; sinks recover and replay. An
  exception from a component (a :class:`~jstormpy.testing.TestingSource` failure, a
  bug) is a crash too: the same restore, up to ``max_restarts`` times.

What it does not model: real concurrency and timing (processing-time ticks run once per
round), the Topology Master's RPCs, incremental checkpoints and state backends.
"""

from __future__ import annotations

import functools
import logging
import pickle
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from jstormpy.api.batch import Batch
from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.config import Config
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Topology
from jstormpy.barrier import task_barrier as barrier_steps
from jstormpy.barrier.aligner import BarrierAligner  # type: ignore[import-not-found]
from jstormpy.barrier.transactions import (  # type: ignore[import-not-found]
    Begin,
    Commit,
    FailCheckpoint,
    PreCommit,
    Recover,
    ReportCommitted,
    RetryCommit,
    SinkStep,
    SinkTransactions,
)
from jstormpy.keygroups import resolve_max_parallelism
from jstormpy.pickling import dumps
from jstormpy.runtime import prepare_steps
from jstormpy.runtime.routing import MessageKind, OutputCollector, build_routes
from jstormpy.runtime.task_wiring import input_field_index, restore_component
from jstormpy.testing.kit import TestingSink

log = logging.getLogger("jstormpy.testing.inline")


class InlineRunError(JStormError):
    """``run_inline`` gave up: more crashes than ``max_restarts``, or no TestingSink to
    read."""


@dataclass
class InlineStats:
    """What one :func:`run_inline` call did (``run_inline(..., stats=InlineStats())``)."""

    checkpoints: int = 0
    """Checkpoints completed (the final one included)."""
    crashes: int = 0
    """Simulated worker crashes and component failures recovered from."""
    restored_from: list[int] = field(default_factory=list)
    """The checkpoint each recovery restored (0: none had completed)."""


class _Crash(Exception):
    """A task raised: the run rolls back to the last completed checkpoint."""


@dataclass
class _Task:
    """One task as run_inline holds it: the component and the executor's bookkeeping."""

    task_id: int
    name: str
    kind: str
    comp: Any
    collector: OutputCollector
    inputs: tuple[int, ...]
    source_index: dict[tuple[int, str], tuple[str, dict[str, int]]]
    aligner: BarrierAligner
    txns: SinkTransactions | None
    eos_channels: set[int]
    channel_wm: dict[int, float]
    watermark: float
    inputs_finished: bool
    eos_sent: bool
    tuple_classes: dict[tuple[int, str], type[Tuple]] = field(default_factory=dict)
    next_tick: float = 0.0


class _BarrierPort:
    """How the inline runner performs a task's barrier steps
    (:class:`~jstormpy.barrier.task_barrier.BarrierPort`): synchronously, the snapshot
    pickled at the capture and kept as the checkpoint's bytes at the upload. No gray
    release runs inline: nothing pauses."""

    def __init__(self, run: _InlineRun, task: _Task) -> None:
        self.run, self.task = run, task
        self.data = b""

    def pause_ticks(self, barrier: int) -> None:
        pass

    def flush(self, barrier: int) -> None:
        self.task.collector.flush()

    def stage(self, barrier: int) -> bool:
        task = self.task
        assert task.txns is not None
        self.run._sink_steps(task, task.txns.barrier(barrier))
        return True  # a sink that gives a checkpoint up fails the inline run (_sink_steps)

    def capture(self, barrier: int, state: bool) -> None:
        self.data = self.run._snapshot(self.task)

    def broadcast(self, barrier: int) -> None:
        self.task.collector.broadcast(MessageKind.BARRIER, barrier)

    def upload(self, barrier: int, state: bool) -> None:
        self.run.taken.setdefault(barrier, {})[self.task.task_id] = self.data

    def begin_next(self, barrier: int) -> None:
        task = self.task
        assert task.txns is not None
        self.run._sink_steps(task, task.txns.snapshot_taken(barrier))

    def release(self, barrier: int) -> None:
        # records held behind the barrier go first, in arrival order (as the executor's
        # pending queue)
        for held in reversed(self.task.aligner.release()):
            self.run.queue.appendleft((self.task.task_id, held))

    def pause(self, barrier: int) -> None:
        pass


class _InlinePrepare:
    """The inline runner's :class:`~jstormpy.runtime.prepare_steps.PreparePort`: one
    worker holding every task; snapshots are read from the last completed checkpoint's
    bytes at once; a failure is the generation's crash (:attr:`failure`)."""

    def __init__(self, run: _InlineRun, restored_id: int | None,
                 snaps: dict[int, bytes]) -> None:
        self.run = run
        self.restored_id = restored_id
        self.snaps = snaps
        self.tasks: dict[int, _Task] = {}
        self.failure: _Crash | None = None

    @property
    def generation(self) -> int:
        return self.run.generation

    def stop_tasks(self, generation: int) -> None:
        self.run.tasks = {}  # lost with their process: no cleanup, no commit

    def take_generation(self, generation: int) -> None:
        self.run.generation = generation
        self.run.queue.clear()  # what the old generation had in flight is dropped
        self.run.taken.clear()

    def read_snapshot(self, task_id: int, handle: str,
                      then: Callable[[Any, BaseException | None], None]) -> None:
        then(self.snaps.get(task_id), None)

    def current(self, generation: int) -> bool:
        return generation == self.run.generation

    def begin_build(self, tasks: Sequence[int]) -> None:
        pass  # one process: no channels to set up

    def build_task(self, task_id: int, snapshot: Any) -> None:
        self.tasks[task_id] = self.run.build_task(task_id, snapshot)

    def built(self, tasks: Sequence[int]) -> None:
        self.run.tasks = self.tasks

    def sinks(self) -> Sequence[int]:
        return [t for t, task in self.tasks.items() if task.txns is not None]

    def restore_sink(self, task_id: int) -> None:
        task = self.tasks[task_id]
        assert task.txns is not None
        self.run._sink_steps(task, task.txns.restore(self.restored_id, self.run.last_id))

    def answerable(self, error: Exception) -> bool:
        if not isinstance(error, _Crash):
            return False  # a runtime error (a snapshot it cannot restore): raised as it is
        if self.failure is None:
            self.failure = error  # the generation's crash, raised by build()
        return True

    def ready(self, ready: prepare_steps.Ready) -> None:
        pass  # a failed one's crash is :attr:`failure`; every task runs in this process


class _InlineRun:
    """One topology run in this process (see the module docstring)."""

    def __init__(self, topo: Topology, config: Config, checkpoint_every: int,
                 crash: bool, max_restarts: int, stats: InlineStats,
                 timeout_s: float = 60.0, source_order: Sequence[str] = ()) -> None:
        self.source_order = tuple(source_order)
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.topo = topo
        self.config = config
        self.user_conf = {**config.to_dict(), **config.user}
        self.checkpoint_every = checkpoint_every
        self.crash_pending = crash
        self.max_restarts = max_restarts
        self.stats = stats
        self.component_tasks = topo.task_ids()
        self.task_component = {t: n for n, ts in self.component_tasks.items() for t in ts}
        self.max_parallelism = resolve_max_parallelism(
            config.max_parallelism, (len(ts) for ts in self.component_tasks.values()))
        # shipped as a worker gets them: code keeps its file name (jstormpy/pickling.py)
        self.blobs = {n: dumps(spec.obj) for n, spec in topo.components.items()}
        self.queue: deque[tuple[int, tuple[int, int, str, Any]]] = deque()
        self.tasks: dict[int, _Task] = {}
        self.generation = 0
        self.last_id = 0  # the last checkpoint id handed out (the id floor)
        self.completed: tuple[int, dict[int, bytes]] | None = None
        self.taken: dict[int, dict[int, bytes]] = {}  # checkpoint -> task -> snapshot

    # -- building and restoring ----------------------------------------------------------
    def build(self) -> None:
        """(Re)build every task for a new generation, restored from the last completed
        checkpoint (fresh when none completed): a worker's Prepare, in its one order
        (``runtime/prepare_steps.py``), then Start (each sink's first transaction)."""
        restored_id, snaps = self.completed if self.completed else (None, {})
        port = _InlinePrepare(self, restored_id, snaps)
        prepare_steps.perform(prepare_steps.PrepareOrder(
            self.generation + 1, tuple(sorted(self.task_component)),
            {t: str(t) for t in snaps}), port)
        if port.failure is not None:
            raise port.failure
        for task in self.tasks.values():  # Start: every task restored, as every worker Ready
            if task.txns is not None:
                self._sink_steps(task, task.txns.start(self.last_id + 1))

    def build_task(self, task_id: int, raw: bytes | None) -> _Task:
        """Task ``task_id`` of the current generation from its snapshot ``raw`` (None:
        fresh), opened or prepared; a user error is a crash (:class:`_Crash`)."""
        name = self.task_component[task_id]
        spec = self.topo.components[name]
        consumers = [(c.name, g) for c, g in self.topo.consumers(name)]
        inputs = tuple(sorted({t for g in spec.inputs for t in self.component_tasks[g.source]}))
        source_index = input_field_index(self.topo, name, self.component_tasks)
        task_workers = {t: 0 for t in self.task_component}
        obj = cloudpickle.loads(self.blobs[name])
        comp = obj() if isinstance(obj, type) else obj
        routes, channels = build_routes(task_id, name, spec.streams, consumers,
                                        self.component_tasks, task_workers, self._send,
                                        self.config.batch_size, self.max_parallelism)
        collector = OutputCollector(task_id, name, routes, channels, self._send,
                                    streams=dict(spec.streams))
        comp.__dict__["_jstorm_collector"] = collector
        comp.__dict__["emit"] = collector.emit
        comp.__dict__["_jstorm_log"] = log
        snap = restore_component(comp, pickle.loads(raw) if raw else None,
                                 self.max_parallelism,
                                 f"component {name!r}, task {task_id}") or {}
        context = TopologyContext(
            topology=self.topo.name, component=name, task_id=task_id,
            task_index=self.component_tasks[name].index(task_id), worker_id=0,
            component_tasks=self.component_tasks, input_tasks=inputs,
            output_fields=spec.streams, generation=self.generation)
        task = _Task(task_id, name, spec.kind, comp, collector, inputs, source_index,
                     BarrierAligner(list(inputs), True),
                     SinkTransactions(snap.get("sink_pending", ())) if spec.is_sink else None,
                     set(snap.get("eos_channels", ())), dict(snap.get("channel_wm", {})),
                     float(snap.get("watermark", float("-inf"))),
                     bool(snap.get("inputs_finished", False)),
                     bool(snap.get("eos_sent", False)))
        start = comp.open if spec.kind == "spout" else comp.prepare
        self._guard(task, functools.partial(start, self.user_conf, context))
        return task

    def _send(self, dst: int, item: tuple[int, int, str, Any]) -> None:
        self.queue.append((dst, item))

    def _guard(self, task: _Task, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            log.info("run_inline: task %s (%s) raised %r: rolling back", task.task_id,
                     task.name, exc)
            raise _Crash(f"task {task.task_id} ({task.name}): {exc!r}") from exc

    # -- a sink's two-phase commit ---------------------------------------------------------
    def _sink_steps(self, task: _Task, steps: list[SinkStep]) -> None:
        assert task.txns is not None
        sink = task.comp

        def perform(step: SinkStep) -> None:
            match step:
                case Begin(txn):
                    sink.begin(txn)
                case PreCommit(txn):
                    sink.pre_commit(txn)
                case Commit(txn):
                    sink.commit(txn)
                case Recover(restored):
                    sink.recover(restored)
                case ReportCommitted() | RetryCommit():
                    pass
                case FailCheckpoint(checkpoint_id, reason):
                    raise _Crash(f"sink {task.name} failed checkpoint {checkpoint_id}: "
                                 f"{reason}")

        self._guard(task, lambda: task.txns.run(steps, perform))  # type: ignore[union-attr]

    # -- snapshots ------------------------------------------------------------------------
    def _snapshot(self, task: _Task) -> bytes:
        """What the executor snapshots at a barrier, pickled now (a checkpoint's bytes)."""
        comp = task.comp
        snap: dict[str, Any] = {"states": comp.__dict__.get("_jstorm_states", {}),
                                "state_version": getattr(type(comp), "state_version", None),
                                "max_parallelism": self.max_parallelism}
        custom = getattr(comp, "snapshot", None)
        if callable(custom):
            snap["custom"] = self._guard(task, custom)
        if task.kind == "spout":
            snap["finished"] = comp.finished
            snap["eos_sent"] = task.eos_sent
        else:
            snap["eos_channels"] = sorted(task.eos_channels)
            snap["channel_wm"] = dict(task.channel_wm)
            snap["watermark"] = task.watermark
            snap["inputs_finished"] = task.inputs_finished
            snap["sink_pending"] = list(task.txns.pending) if task.txns else []
        return pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)

    def _complete_if_all(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completes when every task snapshotted it."""
        if len(self.taken.get(checkpoint_id, {})) < len(self.tasks):
            return
        self.completed = (checkpoint_id, self.taken.pop(checkpoint_id))
        self.stats.checkpoints += 1
        for task in self.tasks.values():
            if task.txns is not None:
                self._sink_steps(task, task.txns.complete(checkpoint_id))
            hook = getattr(task.comp, "on_checkpoint_complete", None)
            if callable(hook):
                self._guard(task, functools.partial(hook, checkpoint_id))

    # -- the spouts' side -----------------------------------------------------------------
    def _running_spouts(self) -> list[_Task]:
        """The spout tasks that take turns now: all of them, round-robin; with
        ``source_order``, the first listed source that has not ended (alone), and once
        every listed one has ended, the others."""
        spouts = [t for t in self.tasks.values() if t.kind == "spout"]
        for name in self.source_order:
            mine = [t for t in spouts if t.name == name]
            if not all(t.comp.finished and t.eos_sent for t in mine):
                return mine
        return [t for t in spouts if t.name not in self.source_order]

    def spout_round(self) -> bool:
        """One ``next_tuple`` per unfinished running spout task; True if any ran."""
        ran = False
        for task in self._running_spouts():
            ran = self._spout_step(task) or ran
        return ran

    def _spout_step(self, task: _Task) -> bool:
        """One ``next_tuple`` (or ``next_batch``) of a spout task, its output flushed; end
        of stream right behind its last record."""
        comp = task.comp
        ran = False
        if not comp.finished:
            next_batch = getattr(comp, "next_batch", None)
            self._guard(task, next_batch if callable(next_batch) else comp.next_tuple)
            ran = True
        task.collector.flush()
        if comp.finished and not task.eos_sent:
            task.collector.broadcast(MessageKind.END_OF_STREAM, None)
            task.eos_sent = True
        return ran

    def trigger(self) -> int:
        """Inject the next checkpoint's barrier at every spout task, one spout at a time
        with the others running in between (so bolts really align)."""
        self.last_id += 1
        checkpoint_id = self.last_id
        spouts = [t for t in self.tasks.values() if t.kind == "spout"]
        running = {t.task_id for t in self._running_spouts()}
        for i, task in enumerate(spouts):
            barrier_steps.perform(barrier_steps.TaskBarrier(barrier_steps.TaskKind.SPOUT),
                                  _BarrierPort(self, task), checkpoint_id)
            for other in spouts[i + 1:]:
                if other.task_id in running:
                    self._spout_step(other)
            self.drain()
        self._complete_if_all(checkpoint_id)
        return checkpoint_id

    # -- the bolts' side ------------------------------------------------------------------
    def drain(self) -> None:
        """Deliver every queued batch and marker, in order."""
        while self.queue:
            dst, item = self.queue.popleft()
            task = self.tasks[dst]
            src = item[0]
            if task.aligner.is_blocked(src):
                task.aligner.hold(src, item)
                continue
            self._handle(task, item)

    def _handle(self, task: _Task, item: tuple[int, int, str, Any]) -> None:
        src, kind, stream, payload = item
        if kind == MessageKind.DATA:
            self._execute(task, src, stream, payload)
        elif kind == MessageKind.BARRIER:
            self._on_barrier(task, src, payload)
        elif kind == MessageKind.WATERMARK:
            if payload > task.channel_wm.get(src, float("-inf")):
                task.channel_wm[src] = payload
            self._advance_watermark(task)
        elif kind == MessageKind.END_OF_STREAM:
            task.eos_channels.add(src)
            self._advance_watermark(task)
            if task.eos_channels >= set(task.inputs) and not task.inputs_finished:
                task.inputs_finished = True
                self._guard(task, task.comp.on_inputs_finished)
                task.collector.flush()
                task.collector.broadcast(MessageKind.END_OF_STREAM, None)
        task.collector.flush()

    def _execute(self, task: _Task, src: int, stream: str, payload: list[Any]) -> None:
        entry = task.source_index.get((src, stream))
        if entry is None:
            return
        source, index = entry
        cls = task.tuple_classes.get((src, stream))
        if cls is None:
            cls = task.tuple_classes[(src, stream)] = Tuple.bound(index, source, stream, src)
        batch_execute = getattr(task.comp, "execute_batch", None)
        if callable(batch_execute):
            self._guard(task, lambda: batch_execute(Batch(payload, index, source, stream, src,
                                                          cls)))
            return
        execute = task.comp.execute

        def run() -> None:
            for values in payload:
                execute(cls(values))  # type: ignore[call-arg]  # Tuple.bound

        self._guard(task, run)

    def _on_barrier(self, task: _Task, src: int, checkpoint_id: int) -> None:
        if not task.aligner.on_barrier(src, checkpoint_id, time.monotonic()):
            return
        # aligned: the task's barrier steps, in the executor's order (barrier/task_barrier.py)
        kind = barrier_steps.TaskKind.SINK if task.txns is not None else \
            barrier_steps.TaskKind.BOLT
        barrier_steps.perform(barrier_steps.TaskBarrier(kind), _BarrierPort(self, task),
                              checkpoint_id)

    def _advance_watermark(self, task: _Task) -> None:
        inf = float("inf")
        low = min((inf if c in task.eos_channels else task.channel_wm.get(c, float("-inf")))
                  for c in task.inputs) if task.inputs else inf
        if low > task.watermark:
            task.watermark = low
            self._guard(task, lambda: task.comp.on_watermark(low))
            if low != inf:
                task.collector.emit_watermark(low)

    def ticks(self) -> None:
        """Processing-time ticks of bolts that ask for them (once per round at most)."""
        now = time.monotonic()
        for task in self.tasks.values():
            interval = getattr(task.comp, "tick_interval_ms", None)
            if task.kind == "bolt" and interval and now >= task.next_tick:
                task.next_tick = now + interval / 1000.0
                self._guard(task, functools.partial(task.comp.on_tick, time.time() * 1000.0))
                task.collector.flush()

    # -- the run ---------------------------------------------------------------------------
    def done(self) -> bool:
        return all(t.comp.finished and t.eos_sent for t in self.tasks.values()
                   if t.kind == "spout") and not self.queue and \
            all(t.inputs_finished for t in self.tasks.values() if t.kind == "bolt")

    def run(self) -> None:
        while True:
            try:
                self.build()  # a prepare/open that raises is a crash of the generation too
                self._run_generation()
                return
            except _Crash as crash:
                self.stats.crashes += 1
                if self.stats.crashes > self.max_restarts:
                    raise InlineRunError(f"run_inline: more than {self.max_restarts} "
                                         f"crashes; the last: {crash}") from crash.__cause__
                self.stats.restored_from.append(self.completed[0] if self.completed else 0)

    def _run_generation(self) -> None:
        rounds = 0
        while not self.done():
            if time.monotonic() > self.deadline:
                raise InlineRunError(f"run_inline: the job did not end within "
                                     f"{self.timeout_s} s (does every spout call finish()?)")
            self.spout_round()
            self.drain()
            self.ticks()
            self.drain()
            rounds += 1
            if self.crash_pending and self.completed is not None and \
                    rounds % self.checkpoint_every == self.checkpoint_every // 2:
                self._simulated_crash()
            if rounds % self.checkpoint_every == 0:
                self.trigger()
        if self.crash_pending:  # ended before any checkpoint completed: crash at the end
            self._simulated_crash()
        checkpoint_id = self.trigger()  # the final checkpoint, after end of stream
        if self.completed is None or self.completed[0] != checkpoint_id:
            raise InlineRunError(f"run_inline: the final checkpoint {checkpoint_id} did not "
                                 "complete (a task never received its barrier)")

    def _simulated_crash(self) -> None:
        """Every task is lost: no cleanup, no commit; what they staged stays behind."""
        self.crash_pending = False
        raise _Crash("simulated worker crash")


def run_inline(target: Any, *, sink: str | None = None, config: Config | None = None,
               checkpoint_every: int = 4, crash: bool = True, max_restarts: int = 3,
               stats: InlineStats | None = None, timeout_s: float = 60.0,
               source_order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Run ``target`` (a ``Topology`` or a ``Dataflow``) in this process; return the
    committed records of its :class:`~jstormpy.testing.TestingSink` (``sink=``: the
    sink component's name, needed when there are several).

    Args:
        target: the topology or dataflow (``build()`` is called on a dataflow).
        sink: which TestingSink component to read (default: the only one).
        config: the job's ``Config`` (``user`` entries and ``batch_size`` matter here;
            the guarantee must be ``"exactly_once"``, the default).
        checkpoint_every: spout rounds (one ``next_tuple`` per spout task) between two
            checkpoints.
        crash: simulate one worker crash after the first completed checkpoint (or just
            before the final checkpoint if the input ends first).
        max_restarts: more crashes than this (component exceptions included) raise.
        stats: an :class:`InlineStats` to fill in (checkpoints, crashes).
        timeout_s: give up (``InlineRunError``) if the job has not ended by then: the
            sources must end (``finish()``).
        source_order: source (spout component) names run one after the other, each to
            its end, before the sources not listed (those take turns). By default every
            source takes turns, one ``next_tuple`` per task per round. Watermarks are
            the minimum over an operator's inputs, so which source runs ahead decides
            what is late: ``source_order=["orders", "payments"]`` pins the case of a
            cluster where the orders ran ahead of the payments.

    Every TestingSink of the topology is cleared first, so the run starts empty.

    Raises:
        InlineRunError: too many crashes, the timeout, or no (or no unique) TestingSink
            to read.
    """
    topo = target.build() if not isinstance(target, Topology) and hasattr(target, "build") \
        else target
    if not isinstance(topo, Topology):
        raise InlineRunError(f"run_inline takes a Topology or a Dataflow, got {target!r}")
    testing = {n: s.obj for n, s in topo.components.items() if isinstance(s.obj, TestingSink)}
    if sink is not None and sink not in testing:
        raise InlineRunError(f"run_inline: no TestingSink component named {sink!r} "
                             f"(TestingSinks: {sorted(testing)})")
    if sink is None and len(testing) != 1:
        raise InlineRunError(f"run_inline needs sink=NAME: the topology has "
                             f"{len(testing)} TestingSink components {sorted(testing)}")
    if checkpoint_every < 2:
        raise InlineRunError(f"run_inline checkpoint_every={checkpoint_every} must be >= 2")
    if config is not None and config.guarantee != "exactly_once":
        raise InlineRunError(f"run_inline runs the exactly-once protocol only; got "
                             f"Config(guarantee={config.guarantee!r})")
    spouts = sorted(n for n, spec in topo.components.items() if spec.kind == "spout")
    if isinstance(source_order, str) or any(n not in spouts for n in source_order) \
            or len(set(source_order)) != len(source_order):
        raise InlineRunError(f"run_inline source_order={source_order!r} must list distinct "
                             f"source names of the topology (its sources: {spouts})")
    for obj in testing.values():
        obj.clear()
    _InlineRun(topo, config or Config(), checkpoint_every, crash, max_restarts,
               stats if stats is not None else InlineStats(), timeout_s,
               source_order).run()
    return testing[sink if sink is not None else next(iter(testing))].items()
