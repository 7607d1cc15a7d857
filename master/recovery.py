"""The Topology Master's recovery: generations, the restore, the Prepares, the start.

``MasterRecovery`` holds the TM's generation and the bookkeeping of the recovery under way
(the checkpoint it restores, the workers ready, the restart strategy, the recoveries done)
and performs the steps of the pure modules shared with the simulator's TM: a generation's
start (``generation_steps.begin``, through :class:`MasterGenerationPort`) and its restore
(``recovery_steps.perform``, through :class:`MasterRecoveryPort`, on the BackendIO thread,
its outcome under the lock), then the Prepares, the Readies and the Start.

A worker's arrival or loss comes from membership (``membership.Membership``), which asks
what it means for the generation through ``MasterCore``'s narrow methods
(``worker_joined``, ``worker_replaced``, ``worker_failed``, ``part_of_recovery``,
``note_generation``). What this class uses of the rest of the TM is the
:class:`RecoveryHost` protocol, which ``MasterCore`` implements (public members only).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.api.errors import BackendError
from jstormpy.master.backend_io import BackendIO
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.generation_steps import begin as begin_generation
from jstormpy.master.recovery_steps import (
    UNUSABLE_METADATA,
    FallBack,
    Gate,
    Listing,
    Prepare,
    PrepareFailed,
    StartAll,
    may_resolve,
    worker_ready,
)
from jstormpy.master.recovery_steps import perform as perform_recovery
from jstormpy.master.restart import ErrorSignature, RestartTracker, unrestartable_reason
from jstormpy.master.restore_plan import LATEST, RestorePlan
from jstormpy.master.session import WorkerSession
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.run_identity import RunIdentity
from jstormpy.state_backends import StateBackend
from jstormpy.state_backends.base import CHECKPOINT_IDS_META, COMPLETED_META

log = logging.getLogger("jstormpy.master")

PREPARE_RETRY_S = 1.0
"""How long a recovery waiting for the state backend waits before it tries again."""


class RecoveryCheckpoints(Protocol):
    """What the recovery uses of the checkpoint side (``checkpoints.MasterCheckpoints``)."""

    @property
    def persisted_floor(self) -> int:
        """The completed floor as last stored."""

    def floor_stored(self, cid: int) -> None:
        """The recovery stored completed floor ``cid``."""

    def abort_all(self, reason: str) -> None:
        """Abort every checkpoint in flight."""


class RecoveryHost(Protocol):
    """What the recovery uses of the rest of the Topology Master (``MasterCore``): its lock,
    where the topology is, the task layout, the workers, the state backend, the checkpoint
    side, and the few acts that belong to membership, status and the operations."""

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The TM's one lock (re-entrant): every event runs under it."""

    @property
    def state(self) -> TopologyState:
        """Where the topology is."""

    @property
    def name(self) -> str:
        """The topology's name."""

    @property
    def config(self) -> Config:
        """The running configuration."""

    @property
    def stateful(self) -> bool:
        """Not at_most_once: a failure restores a checkpoint."""

    @property
    def resume(self) -> bool:
        """The TM resumes a run (the first generation restores the latest checkpoint)."""

    @property
    def plan(self) -> Mapping[int, int]:
        """Task id -> worker id."""

    @property
    def task_component(self) -> Mapping[int, str]:
        """Task id -> component name."""

    @property
    def backend(self) -> StateBackend:
        """The state backend (called on ``backend_io`` only)."""

    @property
    def backend_io(self) -> BackendIO:
        """The thread every state-backend call runs on."""

    @property
    def run(self) -> RunIdentity | None:
        """This TM's run identity (its epoch), if it has one."""

    @property
    def checkpoints(self) -> CheckpointCoordinator:
        """The checkpoint coordinator."""

    @property
    def checkpointing(self) -> RecoveryCheckpoints:
        """The checkpoint side."""

    def set_state(self, state: TopologyState) -> None:
        """Move the topology to ``state``."""

    def alive_sessions(self) -> list[WorkerSession]:
        """The sessions of the workers that are alive."""

    def session(self, worker_id: int) -> WorkerSession | None:
        """The session of worker ``worker_id`` (alive or not), if it ever registered."""

    def broadcast(self, **body: Any) -> None:
        """Send one control message to every live worker."""

    def peer_addresses(self) -> list[Any]:
        """The data-plane address of every live worker."""

    def record_error(self, component: str, message: str) -> None:
        """Keep an error that is no user task's for ``status()``."""

    def record_error_once(self, component: str, message: str) -> None:
        """``record_error``, unless the last error kept says the same."""

    def record_task_error(self, error: dict[str, Any]) -> None:
        """Keep a task's error for ``status()``."""

    def fail(self, reason: str, error: dict[str, Any] | None = None) -> None:
        """Fail the topology for good."""

    def operations_hear(self, reason: str) -> None:
        """A new generation begins: the rescale's and gray release's hooks."""

    def operations_lose_worker(self, worker_id: int, reason: str) -> None:
        """A worker failed: the gray release's hook."""

    def generation_began(self) -> None:
        """A new generation began: the TM's per-generation state (backpressure, finished
        spouts) starts afresh."""


class MasterRecovery:
    """The generation and the recovery under way of one topology."""

    def __init__(self, host: RecoveryHost, generation: int) -> None:
        self.host = host
        self.generation = generation
        self.persisted_generation = generation
        self.target_checkpoint: int | None = None
        self.prepared_base = 0
        self.prepared_generation = 0  # the generation whose Prepares went out last
        self.retry_prepare_at: float | None = None
        self.ready: set[int] = set()
        self.preparing: int | None = None  # generation whose restore is being resolved
        # generation whose restore was decided before its last worker registered (held)
        self.held: int | None = None
        self.restarts = 0
        # restart strategy and deterministic-error check (master/restart.py)
        self.restart_tracker = RestartTracker(host.config.restart(), host.config.max_restarts)
        self.recoveries: deque[dict[str, Any]] = deque(maxlen=50)
        self.recovery_started: float | None = None
        self.recovery_reason = ""
        self.pending_partial_start: int | None = None

    # -- what membership asks ------------------------------------------------------------------
    def note_generation(self, reported: int) -> None:
        """A registering worker reported generation ``reported``."""
        self.generation = max(self.generation, reported)

    def part_of_recovery(self, session: WorkerSession) -> bool:
        """``session``'s worker registered before the recovery under way began."""
        return (self.host.state == TopologyState.RECOVERING
                and self.recovery_started is not None
                and session.registered_mono < self.recovery_started)

    def worker_replaced(self, worker_id: int) -> None:
        """A live worker's session was replaced by a newer registration."""
        if self.host.state == TopologyState.RUNNING:
            self.worker_failed(worker_id, "worker re-registered")
        elif self.host.state == TopologyState.RECOVERING \
                and self.prepared_generation == self.generation:
            # its Prepare went out on the old stream: prepare everyone again in a
            # new generation, so that no Ready of the old Prepares can start it
            # (found by the deterministic simulator, docs/simulation.md)
            self.worker_failed(worker_id, "worker re-registered", knock_on=True)

    def worker_joined(self, session: WorkerSession) -> None:
        """A worker registered (and no operation took it over)."""
        state = self.host.state
        if state == TopologyState.RUNNING and not self.host.stateful:
            self.prepare_partial(session)
            return
        if state == TopologyState.STARTING:
            resume = self.host.resume
            self.begin_generation("start" if not resume else "resume",
                                  LATEST if resume else None, count_restart=False)
        elif state == TopologyState.RECOVERING:
            self.maybe_prepare_all()

    def worker_failed(self, worker_id: int, reason: str, knock_on: bool = False) -> None:
        """Worker ``worker_id`` is gone (``knock_on``: part of the recovery under way, no
        second restart, the first reason kept)."""
        if self.host.state in TERMINAL_STATES:
            return
        self.host.operations_lose_worker(worker_id, reason)  # upgrade hook
        if not self.host.stateful:
            self.host.record_error("", reason)
            # the lost tasks' acks never come: abort in-flight checkpoints now rather than
            # stall commits until checkpoint_timeout_ms
            self.host.checkpointing.abort_all(reason)
            return  # at-most-once: the others keep running; the respawn gets a partial prepare
        if knock_on:
            first, started = self.recovery_reason, self.recovery_started
            self.begin_recovery(reason, count_restart=False)
            self.recovery_reason, self.recovery_started = first, started
            return
        self.begin_recovery(reason)

    def prepare_partial(self, session: WorkerSession) -> None:
        """at_most_once: a respawned worker opens its tasks afresh, the others keep
        running."""
        tasks = [t for t, w in self.host.plan.items() if w == session.worker_id]
        # nothing is restored; the id tells a respawned sink which transactions are
        # already committed, so its new ones do not reuse their ids
        last_completed = self.host.checkpoints.last_completed
        last = last_completed["id"] if last_completed else 0
        session.send(prepare=pb.Prepare(
            generation=self.generation, checkpoint_id=last, task_ids=tasks,
            peers=self.host.peer_addresses(), task_workers=self.host.plan, partial=True,
            restored_checkpoint_id=last))
        self.host.broadcast(peers=pb.Peers(peers=self.host.peer_addresses(),
                                           generation=self.generation))
        self.pending_partial_start = session.worker_id

    # -- generations and recovery --------------------------------------------------------------
    def begin_recovery(self, reason: str, target: int | None = None,
                       count_restart: bool = True) -> None:
        """Start a new generation restoring ``target`` (the latest checkpoint if None)."""
        self.begin_generation(reason, LATEST if target is None else target, count_restart)

    def begin_generation(self, reason: str, target: int | None, count_restart: bool) -> None:
        """Stop every task and start generation ``generation + 1`` from ``target`` (a
        checkpoint id, ``LATEST``, or None for empty state); ``count_restart``: a failure,
        counted against the restart strategy (a rescale or an upgrade is not). The steps
        are ``generation_steps.begin`` (the simulator's TM performs the same)."""
        begin_generation(self.host.checkpoints, MasterGenerationPort(self), reason, target,
                         count_restart=count_restart)

    def resolve_ahead(self) -> None:
        """The TM took the run over and no worker registered yet: resolve the first
        generation's restore now, on backend_io, while the workers start (its stores, a
        write and two fsyncs each, are off the path to the first record). The generation
        it resolves is the one the first registration begins, unless a worker reports a
        later one (then this one is no longer current and stops); its outcome is held
        until every worker registered (``recovery_steps``, ``RecoveryPort.hold``)."""
        with self.host.lock:
            if self.host.state != TopologyState.STARTING or self.preparing is not None:
                return
            self.preparing = generation = self.generation + 1
            target = LATEST if self.host.resume else None
            bad, floor = set(self.host.checkpoints.bad), self.host.checkpoints.layout_floor
        self.host.backend_io.submit(lambda: self._resolve_restore(generation, target, bad,
                                                                  floor))

    def maybe_prepare_all(self) -> None:
        """Resolve what to restore (on backend_io, off the lock), then, once every worker
        is registered, send the Prepares."""
        checkpoints = self.host.checkpoints
        gate = may_resolve(registered=len(self.host.alive_sessions()),
                           workers=self.host.config.workers,
                           resolving=self.preparing == self.generation,
                           committing=bool(checkpoints.committing),
                           backed_off=self.restart_tracker.due(),
                           held=self.held == self.generation)
        if gate == Gate.BACKING_OFF:  # the restart strategy's back-off: tick() comes back
            self.retry_prepare_at = self.restart_tracker.restart_at
        if gate != Gate.GO:
            return
        self.retry_prepare_at = None
        self.preparing = generation = self.generation
        target, bad = self.target_checkpoint, set(checkpoints.bad)
        floor = checkpoints.layout_floor
        self.host.backend_io.submit(lambda: self._resolve_restore(generation, target, bad,
                                                                  floor))

    def _resolve_restore(self, generation: int, target: int | None, bad: set[int],
                         layout_floor: int = 0) -> None:
        """BackendIO thread: perform the recovery's :class:`RestorePlan` (store the
        generation, list completed checkpoints, read the target's metadata), then act on
        its outcome under the lock, through the one driver (``recovery_steps.perform``,
        which the simulator's TM runs too)."""
        checkpoints, run = self.host.checkpoints, self.host.run
        plan = RestorePlan(generation, target, stateful=self.host.stateful,
                           persisted_generation=self.persisted_generation,
                           completed_floor=checkpoints.completed_floor, bad=bad,
                           uri=self.host.backend.uri, name=self.host.name,
                           layout_floor=layout_floor,
                           persisted_floor=self.host.checkpointing.persisted_floor,
                           epoch=run.epoch if run is not None else 0,
                           epoch_starts=checkpoints.epoch_starts)
        perform_recovery(plan, checkpoints, MasterRecoveryPort(self, generation))

    def send_prepares(self, prepare: Prepare) -> None:
        """The restore is resolved: every live worker opens its tasks from it."""
        alive = self.host.alive_sessions()
        if len(alive) < self.host.config.workers:
            return  # one died meanwhile: its re-registration prepares again
        peers = self.host.peer_addresses()
        # the id the tasks resume after (sinks open transaction base + 1); the restored state
        # itself comes from the handles of target_checkpoint, and sinks recover to it: a
        # transaction staged above it (up to the floor) is covered by no completed
        # checkpoint, and the replay produces its rows again (issue 23 hole 2)
        restored, base, restores = prepare.restored, prepare.base, prepare.handles
        self.prepared_base = base
        self.prepared_generation = self.generation
        plan = self.host.plan
        for s in alive:
            tasks = [t for t, w in plan.items() if w == s.worker_id]
            s.send(prepare=pb.Prepare(
                generation=self.generation, checkpoint_id=base,
                restored_checkpoint_id=restored, task_ids=tasks,
                restores=[pb.TaskRestore(task_id=t, handle=restores.get(t, "")) for t in tasks],
                peers=peers, task_workers=plan, partial=False))

    def note_fallback(self, listed: list[int]) -> None:
        """Recovering to an older checkpoint than the newest completed one (those are
        unusable) replays output sinks may already have committed: say so in status.

        Only completed checkpoints count: what sinks staged for a checkpoint that never
        completed (e.g. its metadata write failed) is discarded by their recovery."""
        target = self.target_checkpoint or 0
        skipped = [c for c in listed if c > target]
        if not skipped:
            return
        message = (f"fell back to checkpoint {target or 'none'} past unusable completed "
                   f"checkpoint(s) {skipped}: output sinks already committed for checkpoints "
                   f"{target + 1}..{skipped[-1]} is emitted again under new checkpoint ids "
                   "(at-least-once for that span)")
        log.error("%s", message)
        self.host.record_error("", message)

    def retry_prepare(self, why: str) -> None:
        """The restore could not be resolved (the state backend): try again later."""
        log.error("recovery of generation %d waits for the state backend: %s; retrying in "
                  "%.0f s", self.generation, why, PREPARE_RETRY_S)
        self.retry_prepare_at = time.monotonic() + PREPARE_RETRY_S
        self.host.record_error_once("", f"recovery of generation {self.generation} waits: "
                                        f"{why}")

    def tick(self, now: float) -> None:
        """The periodic part: a restore that waits (the state backend, the back-off) is
        tried again when due."""
        if self.host.state == TopologyState.RECOVERING and self.retry_prepare_at is not None \
                and now >= self.retry_prepare_at:
            self.maybe_prepare_all()

    def on_ready(self, msg: Any) -> None:
        """A worker finished Prepare (no operation took the Ready)."""
        if self.pending_partial_start == msg.worker_id and \
                msg.generation == self.generation and self.host.state == TopologyState.RUNNING:
            session = self.host.session(msg.worker_id)
            if session is not None:  # it registered: its partial Prepare went out
                session.send(start=pb.Start(generation=self.generation))
            self.pending_partial_start = None
            return
        if msg.generation != self.generation or self.host.state != TopologyState.RECOVERING:
            return
        base = self.prepared_base if self.host.stateful else self.host.checkpoints.next_id - 1
        outcome = worker_ready(self.host.checkpoints, self.ready, msg.worker_id, ok=msg.ok,
                               corrupt=msg.corrupt_snapshot,
                               target=self.target_checkpoint,
                               workers=self.host.config.workers,
                               base=base, now=time.monotonic())
        match outcome:
            case FallBack(cid):
                log.error("checkpoint %s has a corrupt snapshot (%s); falling back to the "
                          "previous complete checkpoint", cid, msg.error)
                self.begin_recovery(f"corrupt snapshot in checkpoint {cid}: {msg.error}",
                                    count_restart=False)
            case PrepareFailed():
                error = {"time": time.time(), "task": msg.failed_task,
                         "component": self.host.task_component.get(msg.failed_task, ""),
                         "message": msg.error, "traceback": "", "tuple": "",
                         "generation": self.generation, "worker": msg.worker_id}
                self.host.record_task_error(error)
                why = unrestartable_reason(msg.error)
                if why is not None:
                    self.host.fail(f"worker {msg.worker_id} could not open its tasks: {why}",
                                   error)
                    return
                self.begin_recovery(f"worker {msg.worker_id} failed to prepare: {msg.error}")
            case StartAll():
                self.host.broadcast(start=pb.Start(generation=self.generation))
                took = (time.monotonic() - (self.recovery_started or time.monotonic())) * 1000
                if self.recovery_reason != "start":  # a fresh start restores nothing
                    self.recoveries.append({"generation": self.generation,
                                            "reason": self.recovery_reason,
                                            "checkpoint": self.target_checkpoint,
                                            "time": time.time(),
                                            "duration_ms": round(took, 1)})
                self.host.set_state(TopologyState.RUNNING)

    def task_failed(self, msg: Any, error: dict[str, Any]) -> None:
        """A task of the running generation raised (``error``, already kept): fail for good
        if restarting cannot help, else recover."""
        why = unrestartable_reason(msg.message)
        if why is not None:
            self.host.fail(why, error)
            return
        signature = ErrorSignature(msg.component, msg.message, msg.tuple_repr)
        if msg.task_id >= 0 and msg.tuple_repr not in ("", "None") and \
                self.restart_tracker.is_deterministic(signature, self.generation):
            self.host.fail("deterministic error: the same exception on the same tuple "
                           "again right after the restore it caused, so restarting "
                           "cannot help; fix the component (or use "
                           "Config(on_error='dead_letter'))", error)
            return
        self.begin_recovery(f"task {msg.task_id} ({msg.component}) raised {msg.message}")


class MasterRecoveryPort:
    """How ``MasterCore`` performs a recovery's restore
    (:class:`~jstormpy.master.recovery_steps.RecoveryPort`): the state backend on its
    BackendIO thread, answering each call at once; the outcome under its lock."""

    def __init__(self, recovery: MasterRecovery, generation: int) -> None:
        self.recovery, self.generation = recovery, generation

    def locked(self) -> AbstractContextManager[Any]:
        return self.recovery.host.lock

    def current(self) -> bool:
        recovery = self.recovery
        if recovery.host.state == TopologyState.STARTING:  # resolve_ahead's generation
            return self.generation == recovery.generation + 1
        return (self.generation == recovery.generation
                and recovery.host.state == TopologyState.RECOVERING)

    def may_prepare(self) -> bool:
        recovery = self.recovery
        return (recovery.host.state == TopologyState.RECOVERING
                and len(recovery.host.alive_sessions()) >= recovery.host.config.workers)

    def put_generation(self, generation: int,
                       then: Callable[[BaseException | None], None]) -> None:
        try:
            self.recovery.host.backend.put_meta("generation", str(generation).encode())
        except BackendError as exc:
            log.error("cannot persist generation %d: %s", generation, exc)
            then(exc)
            return
        then(None)

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        self._put(CHECKPOINT_IDS_META, ids, then)

    def put_floor(self, checkpoint_id: int,
                  then: Callable[[BaseException | None], None]) -> None:
        self._put(COMPLETED_META, str(checkpoint_id).encode(), then)

    def _put(self, name: str, value: bytes,
             then: Callable[[BaseException | None], None]) -> None:
        try:
            self.recovery.host.backend.put_meta(name, value)
        except BackendError as exc:
            then(exc)
            return
        then(None)

    def list_checkpoints(self,
                         then: Callable[[Listing | None, BaseException | None], None]) -> None:
        try:
            listing = Listing(self.recovery.host.backend.list_completed(),
                              self.recovery.host.backend.list_checkpoint_ids())
        except BackendError as exc:
            then(None, exc)
            return
        then(listing, None)

    def read_metadata(self, checkpoint_id: int,
                      then: Callable[[Mapping[str, Any] | None, BaseException | None],
                                     None]) -> None:
        try:
            metadata = self.recovery.host.backend.read_metadata(checkpoint_id)
        except (*UNUSABLE_METADATA, BackendError) as exc:
            then(None, exc)
            return
        then(metadata, None)

    def generation_stored(self, generation: int) -> None:
        recovery = self.recovery
        recovery.persisted_generation = max(recovery.persisted_generation, generation)

    def floor_stored(self, checkpoint_id: int) -> None:
        self.recovery.host.checkpointing.floor_stored(checkpoint_id)

    def retry_later(self, reason: str) -> None:
        self.recovery.preparing = None
        self.recovery.retry_prepare(reason)

    def refuse(self, reason: str) -> None:
        self.recovery.preparing = None
        self.recovery.host.fail(reason)

    def recover_again(self, checkpoint_id: int, why: str) -> None:
        recovery = self.recovery
        recovery.preparing = None
        log.error("checkpoint %s unusable (%s); falling back", checkpoint_id, why)
        recovery.begin_recovery(f"checkpoint {checkpoint_id} unusable", count_restart=False)

    def hold(self) -> None:
        recovery = self.recovery
        recovery.preparing = None
        recovery.held = self.generation

    def prepare(self, prepare: Prepare) -> None:
        recovery = self.recovery
        recovery.preparing = None
        recovery.target_checkpoint = prepare.target
        if prepare.listing:
            recovery.note_fallback(list(prepare.listing))
        recovery.send_prepares(prepare)


class MasterGenerationPort:
    """How ``MasterCore`` starts a generation
    (:class:`~jstormpy.master.generation_steps.GenerationPort`), under its lock."""

    def __init__(self, recovery: MasterRecovery) -> None:
        self.recovery = recovery

    @property
    def generation(self) -> int:
        return self.recovery.generation

    def operations_hear(self, reason: str) -> None:
        self.recovery.host.operations_hear(reason)  # upgrade and rescale hooks

    def count_restart(self, reason: str) -> str | None:
        recovery = self.recovery
        decision = recovery.restart_tracker.on_failure(reason)
        recovery.restarts = recovery.restart_tracker.restarts
        if not decision.restart:
            return f"{decision.reason}; last failure: {reason}"
        if decision.delay_s:
            log.info("restart %d after a back-off of %.0f ms (%s)", recovery.restarts,
                     decision.delay_s * 1000, recovery.host.config.restart().kind.value)
        return None

    def fail(self, reason: str) -> None:
        self.recovery.host.fail(reason)

    def recovering(self, generation: int, target: int | None, reason: str) -> None:
        recovery = self.recovery
        recovery.generation = generation  # stored before any Prepare names it
        recovery.host.generation_began()  # backpressure, finished spouts afresh
        recovery.target_checkpoint = target
        recovery.ready = set()
        recovery.recovery_started = time.monotonic()
        recovery.recovery_reason = reason
        log.info("generation %d: %s; restoring checkpoint %s", generation, reason,
                 "the latest" if target == LATEST else
                 target if target is not None else "none (fresh state)")
        recovery.host.set_state(TopologyState.RECOVERING)

    def maybe_prepare(self) -> None:
        self.recovery.maybe_prepare_all()
