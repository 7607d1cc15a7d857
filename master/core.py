"""The Topology Master's core: workers, generations, recovery, status.

Everything here runs under one lock, driven by messages from the worker control streams
and by ``tick()`` (a timer thread). Outbound commands go to per-worker queues that the
gRPC service drains. The checkpoint side (the coordinator, the commit path, the ids
record, retention, the triggers) is ``checkpoints.MasterCheckpoints``, which this core
holds and serves as its ``CheckpointHost``. Protocol: DESIGN §4 and
``docs/checkpointing.md``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jstormpy.api.config import Config
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import assign_tasks
from jstormpy.leader_lease import LeaderLease
from jstormpy.master.backend_io import BackendIO
from jstormpy.master.backpressure import BackpressureCoordinator
from jstormpy.master.checkpoint_health import CheckpointHealth
from jstormpy.master.checkpoints import MasterCheckpoints
from jstormpy.master.commit_point import CommitOutcome
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.generation_steps import begin as begin_generation
from jstormpy.master.metrics import MetricsStore
from jstormpy.master.recovery import MasterGenerationPort, MasterRecoveryPort
from jstormpy.master.recovery_steps import (
    FallBack,
    Gate,
    Prepare,
    PrepareFailed,
    StartAll,
    may_resolve,
    worker_ready,
)
from jstormpy.master.recovery_steps import perform as perform_recovery
from jstormpy.master.rescale import RescaleController
from jstormpy.master.restart import ErrorSignature, RestartTracker, unrestartable_reason
from jstormpy.master.restore_plan import (
    LATEST,
    ReadMetadata,
    RestorePlan,
    RetryLater,
)
from jstormpy.master.session import WorkerSession
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.master.upgrade import UpgradeController
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.run_identity import RunIdentity, load_run_identity
from jstormpy.state_backends import StateBackend

log = logging.getLogger("jstormpy.master")
RUN_DIR_ENV = "JSTORM_RUN_DIR"  # = jstormpy.runtime.taskops.RUN_DIR_ENV (set by launchers)

"""Recovery target meaning "the newest usable completed checkpoint", resolved (by listing
the backend) when the workers are prepared, so an unreachable backend delays the recovery
instead of making it start from scratch."""
PREPARE_RETRY_S = 1.0


class MasterCore:
    """State of one topology, owned by its Topology Master."""

    def __init__(self, name: str, config: Config, descriptor: dict[str, Any],
                 backend: StateBackend, resume: bool = False) -> None:
        self.name = name
        self.config = config
        self.backend = backend
        self.lock = threading.RLock()
        self.sessions: dict[int, WorkerSession] = {}
        self.state = TopologyState.STARTING
        self.state_changed = threading.Condition(self.lock)
        self.stateful = config.guarantee != "at_most_once"
        # every state-backend call after start-up runs there, never under self.lock
        self.backend_io = BackendIO(f"tm-backend-{name}")
        # the checkpoint side: the coordinator and all that performs it (checkpoints.py)
        self.checkpointing = MasterCheckpoints(self, name, config, backend, self.backend_io)
        self.set_descriptor(descriptor)
        self.generation = 0
        self.target_checkpoint: int | None = None
        self.prepared_base = 0
        self.prepared_generation = 0  # the generation whose Prepares went out last
        self.retry_prepare_at: float | None = None
        self.ready: set[int] = set()
        self.preparing: int | None = None  # generation whose restore is being resolved
        self.restarts = 0
        # restart strategy and deterministic-error check (master/restart.py)
        self.restart_tracker = RestartTracker(config.restart(), config.max_restarts)
        self.failure: dict[str, Any] | None = None  # why the topology failed, for the user
        self.recoveries: deque[dict[str, Any]] = deque(maxlen=50)
        self.recovery_started: float | None = None
        self.recovery_reason = ""
        self.errors: deque[dict[str, Any]] = deque(maxlen=50)
        self.started_at = time.time()
        self.finished_spouts: set[int] = set()
        self.pending_partial_start: int | None = None
        persisted = backend.get_meta("generation") if resume else None
        if persisted:
            self.generation = int(persisted.decode())
        self.persisted_generation = self.generation
        self.checkpointing.load_stored(resume)
        self.resume = resume
        self.run: RunIdentity | None = None  # set by the TM process (run_identity.py)
        # with --ha: the launcher's leader lease (jstormpy/leader_lease.py); no commit
        # point is written, and no sink told to commit, without it
        self.lease: LeaderLease | None = None
        self.fenced = ""  # why this TM stopped committing for good ("" while it may)
        self.fenced_event = threading.Event()
        self.upgrade = UpgradeController(self)  # gray release (master/upgrade.py)
        self.rescale = RescaleController(self)  # in-place rescale (master/rescale.py)

    @property
    def checkpoints(self) -> CheckpointCoordinator:
        """The checkpoint coordinator (``checkpointing.coordinator``): ids, checkpoints in
        flight and completed, their history."""
        return self.checkpointing.coordinator

    def set_descriptor(self, descriptor: dict[str, Any]) -> None:
        """The task layout: components, their tasks, the plan (again after a rescale)."""
        self.descriptor = descriptor
        self.component_tasks = {c["name"]: list(c["tasks"]) for c in descriptor["components"]}
        self.all_tasks = sorted(t for ts in self.component_tasks.values() for t in ts)
        self.spout_tasks = sorted(t for c in descriptor["components"] if c["kind"] == "spout"
                                  for t in c["tasks"])
        self.sink_tasks = sorted(t for c in descriptor["components"] if c.get("is_sink")
                                 for t in c["tasks"])
        self.task_component = {t: n for n, ts in self.component_tasks.items() for t in ts}
        self.checkpoints.set_layout(self.task_component, self.spout_tasks, self.sink_tasks)
        self.plan = assign_tasks(self.component_tasks, self.config.workers)
        self.metrics = MetricsStore(self.task_component, self.plan)
        self.backpressure = BackpressureCoordinator(
            descriptor, self.config.backpressure_high_watermark,
            self.config.backpressure_low_watermark, self.config.throttle_lease_ms,
            self._send_throttle)

    # -- helpers -------------------------------------------------------------------------------
    def set_state(self, state: TopologyState) -> None:
        if state != self.state:
            log.info("topology %s: %s -> %s (generation %d)", self.name, self.state, state,
                     self.generation)
            self.state = state
            self.state_changed.notify_all()

    def alive_sessions(self) -> list[WorkerSession]:
        """The sessions of the workers that are alive (rescale and upgrade drive them too)."""
        return [s for s in self.sessions.values() if s.alive]

    def broadcast(self, **body: Any) -> None:
        """Send one control message (``body``: the oneof field) to every live worker."""
        for s in self.alive_sessions():
            s.send(**body)

    def peer_addresses(self) -> list[Any]:
        """The data-plane address of every live worker, as sent in ``Peers``."""
        return [pb.WorkerAddress(worker_id=s.worker_id, host=s.host, port=s.port)
                for s in self.alive_sessions()]

    def session(self, worker_id: int) -> WorkerSession | None:
        """The session of worker ``worker_id`` (alive or not), if it ever registered."""
        return self.sessions.get(worker_id)

    def record_error(self, component: str, message: str) -> None:
        """Keep an error that is no user task's (a lost worker, a recovery that waits, an
        operation's abort) for ``status()["errors"]``."""
        self.errors.append({"time": time.time(), "task": -1, "component": component,
                            "message": message, "traceback": "", "tuple": ""})

    def adopt_layout(self, config: Config, descriptor: dict[str, Any]) -> None:
        """A rescale committed (under the lock): run ``config`` and ``descriptor``'s task
        layout from now on."""
        self.config = config
        self.set_descriptor(descriptor)

    def forget_surplus_workers(self) -> None:
        """Drop the sessions of worker ids the configuration no longer has (a rescale to
        fewer workers stopped them for good)."""
        for wid in [w for w in self.sessions if w >= self.config.workers]:
            del self.sessions[wid]

    # -- worker membership ---------------------------------------------------------------------
    def register(self, session: WorkerSession, reported_generation: int) -> None:
        """A worker opened its control stream."""
        with self.lock:
            if session.worker_id < 0:
                raise JStormError(f"worker id {session.worker_id} is negative")
            if session.worker_id >= self.config.workers:
                # not part of the plan, e.g. a surplus worker of a rescale to fewer workers
                # that outlived a TM crash after the commit point: tell it to stop for good
                # (exit 0: the launcher does not restart it) rather than let it retry
                log.warning("worker %d (pid %d) is not part of the plan (%d workers): told "
                            "to stop", session.worker_id, session.pid, self.config.workers)
                session.alive = False
                session.send(shutdown=pb.Shutdown(
                    reason=f"worker id {session.worker_id} is not part of the plan: the "
                           f"topology runs {self.config.workers} workers", exit_code=0))
                return
            old = self.sessions.get(session.worker_id)
            if old is not None and old.alive and 0 < reported_generation < self.generation:
                # a zombie (frozen past its timeout, replaced meanwhile) reconnecting with
                # the generation it froze in: fenced off, the live worker stays
                log.warning("worker %d (pid %d) registered with stale generation %d < %d: "
                            "fenced off", session.worker_id, session.pid,
                            reported_generation, self.generation)
                session.alive = False
                session.send(shutdown=pb.Shutdown(reason="fenced: stale generation"))
                return
            if session.launch_attempt:
                self._supersede_older_launches(session.launch_attempt)
            if old is not None and old.alive:
                old.alive = False
                old.send(shutdown=pb.Shutdown(reason="replaced by a newer registration"))
                if self.state == TopologyState.RUNNING:
                    self._worker_failed(session.worker_id, "worker re-registered")
                elif self.state == TopologyState.RECOVERING \
                        and self.prepared_generation == self.generation:
                    # its Prepare went out on the old stream: prepare everyone again in a
                    # new generation, so that no Ready of the old Prepares can start it
                    # (found by the deterministic simulator, docs/simulation.md)
                    self._worker_failed(session.worker_id, "worker re-registered",
                                        knock_on=True)
            self.sessions[session.worker_id] = session
            self.generation = max(self.generation, reported_generation)
            log.info("worker %d registered (pid %d, data port %d)", session.worker_id,
                     session.pid, session.port)
            if self.state in TERMINAL_STATES:
                session.send(shutdown=pb.Shutdown(reason=f"topology is {self.state}"))
                return
            if self.rescale.on_register(session, reported_generation):  # rescale hook
                return
            if self.upgrade.on_register(session, reported_generation):  # upgrade hook
                return
            if self.state == TopologyState.RUNNING and not self.stateful:
                self._prepare_partial(session)
                return
            if self.state == TopologyState.STARTING:
                target = LATEST if self.resume else None
                self.begin_generation("start" if not self.resume else "resume", target,
                                       count_restart=False)
            elif self.state == TopologyState.RECOVERING:
                self.maybe_prepare_all()

    def _supersede_older_launches(self, attempt: int) -> None:
        """On Spark a failed barrier stage is resubmitted whole: once a worker of launch
        attempt N registers, every worker of an earlier attempt is on its way out, even if its
        control stream has not closed yet. Each is dropped now -- a knock-on of the failure
        under recovery (no second restart, the first reason kept) -- so that the recovery
        waits for the new attempt's workers instead of completing with a doomed one and
        being followed by a second recovery when it is replaced."""
        for old in self.alive_sessions():
            if 0 < old.launch_attempt < attempt:
                old.alive = False
                old.send(shutdown=pb.Shutdown(reason=f"superseded by launch attempt {attempt}"))
                knock_on = (self.state == TopologyState.RECOVERING
                            and self.recovery_started is not None
                            and old.registered_mono < self.recovery_started)
                log.warning("worker %d (pid %d, launch attempt %d) superseded by launch "
                            "attempt %d%s", old.worker_id, old.pid, old.launch_attempt, attempt,
                            " (part of the failure being recovered)" if knock_on else "")
                self._worker_failed(old.worker_id, f"worker {old.worker_id} lost: superseded "
                                    f"by launch attempt {attempt}", knock_on)

    def worker_lost(self, session: WorkerSession, reason: str) -> None:
        """A control stream ended or heartbeats stopped."""
        with self.lock:
            known = self.sessions.get(session.worker_id)
            if known is None or known is not session or not session.alive:
                return
            session.alive = False
            if self.state in TERMINAL_STATES:  # it told its workers to go: expected
                log.info("worker %d left: %s (topology %s)", session.worker_id, reason, self.state)
                return
            # a worker that registered before the recovery under way began goes down with
            # the failure that recovery handles (on Spark a lost task fails the whole
            # barrier stage): it costs no second restart and keeps the first reason
            knock_on = (self.state == TopologyState.RECOVERING and self.recovery_started is not None
                        and session.registered_mono < self.recovery_started)
            log.warning("worker %d lost: %s%s", session.worker_id, reason,
                        " (part of the failure being recovered)" if knock_on else "")
            self._worker_failed(session.worker_id, f"worker {session.worker_id} lost: {reason}",
                                knock_on)

    def _worker_failed(self, worker_id: int, reason: str, knock_on: bool = False) -> None:
        if self.state in TERMINAL_STATES:
            return
        self.upgrade.on_worker_failed(worker_id, reason)  # upgrade hook
        if not self.stateful:
            self.record_error("", reason)
            # the lost tasks' acks never come: abort in-flight checkpoints now rather than
            # stall commits until checkpoint_timeout_ms
            self.checkpointing.abort_all(reason)
            return  # at-most-once: the others keep running; the respawn gets a partial prepare
        if knock_on:
            first, started = self.recovery_reason, self.recovery_started
            self.begin_recovery(reason, count_restart=False)
            self.recovery_reason, self.recovery_started = first, started
            return
        self.begin_recovery(reason)

    def _prepare_partial(self, session: WorkerSession) -> None:
        tasks = [t for t, w in self.plan.items() if w == session.worker_id]
        # nothing is restored; the id tells a respawned sink which transactions are
        # already committed, so its new ones do not reuse their ids
        last = self.checkpoints.last_completed["id"] if self.checkpoints.last_completed else 0
        session.send(prepare=pb.Prepare(
            generation=self.generation, checkpoint_id=last, task_ids=tasks,
            peers=self.peer_addresses(), task_workers=self.plan, partial=True,
            restored_checkpoint_id=last))
        self.broadcast(peers=pb.Peers(peers=self.peer_addresses(), generation=self.generation))
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
        begin_generation(self.checkpoints, MasterGenerationPort(self), reason, target,
                         count_restart=count_restart)

    def maybe_prepare_all(self) -> None:
        """Every worker is registered: resolve what to restore (on backend_io, off the
        lock), then send the Prepares."""
        gate = may_resolve(registered=len(self.alive_sessions()), workers=self.config.workers,
                           resolving=self.preparing == self.generation,
                           committing=bool(self.checkpoints.committing),
                           backed_off=self.restart_tracker.due())
        if gate == Gate.BACKING_OFF:  # the restart strategy's back-off: tick() comes back
            self.retry_prepare_at = self.restart_tracker.restart_at
        if gate != Gate.GO:
            return
        self.retry_prepare_at = None
        self.preparing = generation = self.generation
        target, bad = self.target_checkpoint, set(self.checkpoints.bad)
        floor = self.checkpoints.layout_floor
        self.backend_io.submit(lambda: self._resolve_restore(generation, target, bad, floor))

    def _resolve_restore(self, generation: int, target: int | None, bad: set[int],
                         layout_floor: int = 0) -> None:
        """BackendIO thread: perform the recovery's :class:`RestorePlan` (store the
        generation, list completed checkpoints, read the target's metadata), then act on
        its outcome under the lock, through the one driver (``recovery_steps.perform``,
        which the simulator's TM runs too)."""
        plan = RestorePlan(generation, target, stateful=self.stateful,
                           persisted_generation=self.persisted_generation,
                           completed_floor=self.checkpoints.completed_floor, bad=bad,
                           uri=self.backend.uri, name=self.name, layout_floor=layout_floor,
                           persisted_floor=self.checkpointing.persisted_floor,
                           epoch=self.run.epoch if self.run is not None else 0,
                           epoch_starts=self.checkpoints.epoch_starts)
        perform_recovery(plan, self.checkpoints, MasterRecoveryPort(self, generation))

    def send_prepares(self, prepare: Prepare) -> None:
        alive = self.alive_sessions()
        if len(alive) < self.config.workers:
            return  # one died meanwhile: its re-registration prepares again
        peers = self.peer_addresses()
        # the id the tasks resume after (sinks open transaction base + 1); the restored state
        # itself comes from the handles of target_checkpoint, and sinks recover to it: a
        # transaction staged above it (up to the floor) is covered by no completed
        # checkpoint, and the replay produces its rows again (issue 23 hole 2)
        restored, base, restores = prepare.restored, prepare.base, prepare.handles
        self.prepared_base = base
        self.prepared_generation = self.generation
        for s in alive:
            tasks = [t for t, w in self.plan.items() if w == s.worker_id]
            s.send(prepare=pb.Prepare(
                generation=self.generation, checkpoint_id=base,
                restored_checkpoint_id=restored, task_ids=tasks,
                restores=[pb.TaskRestore(task_id=t, handle=restores.get(t, "")) for t in tasks],
                peers=peers, task_workers=self.plan, partial=False))

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
        self.record_error("", message)

    def retry_prepare(self, why: str) -> None:
        log.error("recovery of generation %d waits for the state backend: %s; retrying in "
                  "%.0f s", self.generation, why, PREPARE_RETRY_S)
        self.retry_prepare_at = time.monotonic() + PREPARE_RETRY_S
        message = f"recovery of generation {self.generation} waits: {why}"
        if not self.errors or self.errors[-1]["message"] != message:  # once per cause
            self.record_error("", message)

    def on_ready(self, msg: Any) -> None:
        """A worker finished Prepare."""
        with self.lock:
            if self.upgrade.on_ready(msg):  # upgrade hook
                return
            if getattr(self, "pending_partial_start", None) == msg.worker_id and \
                    msg.generation == self.generation and self.state == TopologyState.RUNNING:
                self.sessions[msg.worker_id].send(start=pb.Start(generation=self.generation))
                self.pending_partial_start = None
                return
            if msg.generation != self.generation or self.state != TopologyState.RECOVERING:
                return
            base = self.prepared_base if self.stateful else self.checkpoints.next_id - 1
            outcome = worker_ready(self.checkpoints, self.ready, msg.worker_id, ok=msg.ok,
                                   corrupt=msg.corrupt_snapshot,
                                   target=self.target_checkpoint, workers=self.config.workers,
                                   base=base, now=time.monotonic())
            match outcome:
                case FallBack(cid):
                    log.error("checkpoint %s has a corrupt snapshot (%s); falling back to the "
                              "previous complete checkpoint", cid, msg.error)
                    self.begin_recovery(f"corrupt snapshot in checkpoint {cid}: {msg.error}",
                                        count_restart=False)
                case PrepareFailed():
                    error = {"time": time.time(), "task": msg.failed_task,
                             "component": self.task_component.get(msg.failed_task, ""),
                             "message": msg.error, "traceback": "", "tuple": "",
                             "generation": self.generation, "worker": msg.worker_id}
                    self.errors.append(error)
                    why = unrestartable_reason(msg.error)
                    if why is not None:
                        self.fail(f"worker {msg.worker_id} could not open its tasks: {why}",
                                   error)
                        return
                    self.begin_recovery(f"worker {msg.worker_id} failed to prepare: {msg.error}")
                case StartAll():
                    self.broadcast(start=pb.Start(generation=self.generation))
                    took = (time.monotonic() - (self.recovery_started or time.monotonic())) * 1000
                    if self.recovery_reason != "start":  # a fresh start restores nothing
                        self.recoveries.append({"generation": self.generation,
                                                "reason": self.recovery_reason,
                                                "checkpoint": self.target_checkpoint,
                                                "time": time.time(),
                                                "duration_ms": round(took, 1)})
                    self.set_state(TopologyState.RUNNING)

    # -- heartbeats, errors --------------------------------------------------------------------
    def on_heartbeat(self, session: WorkerSession, hb: Any) -> None:
        """Record a worker's metrics and liveness."""
        with self.lock:
            session.last_seen = time.monotonic()
            session.rss_bytes = hb.rss_bytes
            session.cpu_percent = hb.cpu_percent
            if hb.generation != self.generation:
                return
            for tm in hb.tasks:
                self.metrics.update(tm)
                self.backpressure.report(tm.task_id, tm.queue_depth, tm.queue_capacity)
                if tm.task_id in self.spout_tasks:
                    if tm.finished:
                        self.finished_spouts.add(tm.task_id)
                    else:
                        self.finished_spouts.discard(tm.task_id)
            self.checkpointing.maybe_final_checkpoint()

    def on_task_error(self, msg: Any) -> None:
        """A task's user code raised."""
        with self.lock:
            error = {"time": time.time(), "task": msg.task_id,
                     "component": msg.component, "message": msg.message,
                     "traceback": msg.traceback, "tuple": msg.tuple_repr,
                     "generation": msg.generation}
            self.errors.append(error)
            if msg.generation == self.generation and self.stateful \
                    and self.state == TopologyState.RUNNING \
                    and not self._worker_of_task_lost(msg):
                why = unrestartable_reason(msg.message)
                if why is not None:
                    self.fail(why, error)
                    return
                signature = ErrorSignature(msg.component, msg.message, msg.tuple_repr)
                if msg.task_id >= 0 and msg.tuple_repr not in ("", "None") and \
                        self.restart_tracker.is_deterministic(signature, self.generation):
                    self.fail("deterministic error: the same exception on the same tuple "
                               "again right after the restore it caused, so restarting "
                               "cannot help; fix the component (or use "
                               "Config(on_error='dead_letter'))", error)
                    return
                self.begin_recovery(f"task {msg.task_id} ({msg.component}) raised "
                                     f"{msg.message}")

    def fail(self, reason: str, error: dict[str, Any] | None = None) -> None:
        """Fail the topology for good, keeping why (with the user error that caused it)
        for ``status()`` and so for the console and ``handle.wait()``."""
        if error is None:  # the last user error of this or the previous generation
            error = next((e for e in reversed(self.errors) if e["task"] >= 0
                          and e.get("generation", -1) >= self.generation - 1), None)
        self.failure = {"reason": reason, "restarts": self.restarts,
                        "restart_strategy": self.config.restart().describe(
                            self.config.max_restarts),
                        "error": error, "logs": self._log_paths(error)}
        log.error("topology %s failed: %s", self.name, reason)
        self.set_state(TopologyState.FAILED)
        self.broadcast(shutdown=pb.Shutdown(reason="topology failed"))

    def _log_paths(self, error: dict[str, Any] | None) -> list[str]:
        run_dir = os.environ.get(RUN_DIR_ENV)
        if not run_dir:
            return []
        logs = Path(run_dir) / "logs"
        if error is None or error["task"] < 0:
            return [str(logs / "master.log")]
        worker = self.plan.get(error["task"], error.get("worker"))
        if worker is None:
            return [str(logs / "master.log")]
        return [str(logs / f"worker-{worker}.log"),
                str(logs / "tasks" / f"{error['component']}-{error['task']}.log")]

    def _send_throttle(self, spout_tasks: list[int], release: bool, lease_ms: int) -> None:
        by_worker: dict[int, list[int]] = {}
        for t in spout_tasks:
            by_worker.setdefault(self.plan[t], []).append(t)
        for wid, tasks in by_worker.items():
            s = self.sessions.get(wid)
            if s is not None and s.alive:
                s.send(throttle=pb.Throttle(spout_tasks=tasks, lease_ms=lease_ms,
                                            release=release))

    def _worker_of_task_lost(self, msg: Any) -> bool:
        # a transport report about a peer the TM already knows is dead adds nothing
        return msg.task_id < 0 and any(not s.alive for s in self.sessions.values())

    # -- checkpoints: checkpoints.py's MasterCheckpoints performs them ---------------------
    def may_checkpoint(self) -> bool:
        """A checkpoint may start: running, no gray release or rescale holds checkpoints,
        and every worker can ack (``CheckpointHost``). Called under the lock."""
        if self.state != TopologyState.RUNNING or self.upgrade.holds_checkpoints() \
                or self.rescale.holds_checkpoints():  # upgrade/rescale hooks
            return False
        # at_most_once with a worker being respawned: it could not ack
        return (len(self.alive_sessions()) >= self.config.workers
                and self.pending_partial_start is None)

    def spouts_finished(self) -> bool:
        """Every spout task reported its input finished (``CheckpointHost``)."""
        return bool(self.spout_tasks) and self.finished_spouts >= set(self.spout_tasks)

    def trigger_checkpoint(self, force: bool = False) -> int | None:
        """Start a checkpoint now (if running and within the concurrency limit)."""
        return self.checkpointing.trigger(force)

    def start_checkpoint(self, pause: bool = False) -> tuple[int, float]:
        """Start the next checkpoint now, under the lock (``MasterCheckpoints.start``)."""
        return self.checkpointing.start(pause)

    def on_checkpoint_ack(self, ack: Any) -> None:
        """A task snapshotted for a checkpoint."""
        self.checkpointing.on_ack(ack)

    def on_checkpoint_failed(self, msg: Any) -> None:
        """A task could not snapshot: abort that checkpoint, keep running."""
        self.checkpointing.on_failed(msg)

    def on_sink_committed(self, msg: Any) -> None:
        """A sink made a checkpoint's output visible."""
        with self.lock:
            if msg.generation != self.generation:
                return
            self.rescale.on_sink_committed(msg)  # rescale hook
            self.checkpointing.on_sink_committed(msg)

    def create_commit_point(self, cid: int, metadata: Mapping[str, Any]) -> CommitOutcome:
        """BackendIO thread: the one commit path (``MasterCheckpoints.create_commit_point``),
        which a rescale's checkpoint takes too."""
        return self.checkpointing.create_commit_point(cid, metadata)

    def store_ids_record_now(self, why: str) -> None:
        """BackendIO thread: store the ids record at once, best effort
        (``MasterCheckpoints.store_ids_record_now``)."""
        self.checkpointing.store_ids_record_now(why)

    def check_fenced(self, cid: int, moment: str) -> bool:
        """BackendIO thread, with a leader lease only: True (and this TM fenced for good)
        if the lease expired or the state backend's run epoch is newer than this TM's: a
        standby took the run over, so checkpoint ``cid`` must not commit."""
        if self.lease is None:
            return False
        reason = ""
        if self.fenced:
            reason = self.fenced
        elif not self.lease.valid():
            reason = "its leader lease expired (no ZooKeeper answer within the lease)"
        elif moment.startswith("after") and self.run is not None:
            stored = load_run_identity(self.backend)
            if stored is not None and (stored.job_id != self.run.job_id
                                       or stored.epoch > self.run.epoch):
                reason = f"the state backend names {stored}, a newer Topology Master"
        if not reason:
            return False
        with self.lock:
            if not self.fenced:
                log.error("fenced: %s; checkpoint %d (%s) is not committed and this Topology "
                          "Master stops", reason, cid, moment)
                self.fenced = reason
                self.fenced_event.set()
        return True

    # -- periodic work -------------------------------------------------------------------------
    def tick(self) -> None:
        """Heartbeat timeouts, checkpoint triggers and timeouts."""
        now = time.monotonic()
        with self.lock:
            timeout = self.config.worker_timeout_ms / 1000.0
            for s in self.alive_sessions():
                if now - s.last_seen > timeout:
                    # non-zero: a worker that was only frozen or cut off exits when it
                    # hears this, and its launcher restarts it for the recovery (exit 0
                    # would leave the recovery waiting for it for ever)
                    s.send(shutdown=pb.Shutdown(reason="heartbeat timeout", exit_code=1))
                    self.worker_lost(s, f"no heartbeat for {timeout:.1f} s")
            if self.state == TopologyState.RECOVERING and self.retry_prepare_at is not None \
                    and now >= self.retry_prepare_at:
                self.maybe_prepare_all()
            self.upgrade.tick(now)  # upgrade hook
            self.rescale.tick(now)  # rescale hook
            if self.state != TopologyState.RUNNING:
                return
            self.backpressure.evaluate(now)
            self.checkpointing.tick(now)  # reserve ids, time-outs, the next trigger

    def checkpoint_health(self) -> CheckpointHealth:
        """Whether checkpoints keep up with their interval (master/checkpoint_health.py).
        Called under the lock."""
        return self.checkpointing.health()

    # -- operations ----------------------------------------------------------------------------
    def kill(self, reason: str) -> None:
        """Stop the topology: every worker shuts down."""
        with self.lock:
            self.set_state(TopologyState.KILLED)
            self.broadcast(shutdown=pb.Shutdown(reason=reason or "killed"))

    def rollback(self, checkpoint_id: int | None) -> tuple[int | None, int]:
        """Roll every task back to a completed checkpoint (latest if None)."""
        if not self.stateful:
            raise JStormError("rollback needs checkpoints: the topology runs at_most_once")
        done = self.backend.list_completed()  # off the lock: the backend may be slow
        with self.lock:
            if self.state not in (TopologyState.RUNNING, TopologyState.RECOVERING):
                raise JStormError(f"cannot roll back a topology that is {self.state}")
            self.checkpoints.ids_seen(done)
            if checkpoint_id:
                if checkpoint_id not in done:
                    raise JStormError(f"checkpoint {checkpoint_id} is not a completed checkpoint "
                                      f"(completed: {done})")
                if checkpoint_id < self.checkpoints.layout_floor:
                    raise JStormError(f"checkpoint {checkpoint_id} holds the layout before the "
                                      f"rescale of checkpoint {self.checkpoints.layout_floor}: "
                                      "it cannot "
                                      "restore into the running layout")
                target: int | None = checkpoint_id
            else:
                plan = RestorePlan(self.generation, LATEST, stateful=True,
                                   persisted_generation=self.persisted_generation,
                                   completed_floor=self.checkpoints.completed_floor,
                                   bad=self.checkpoints.bad, uri=self.backend.uri,
                                   name=self.name,
                                   layout_floor=self.checkpoints.layout_floor)
                match plan.listed(done)[0]:
                    case RetryLater(short):
                        raise JStormError(f"rollback to the latest checkpoint refused: {short}")
                    case ReadMetadata(latest):
                        target = latest
                    case _:
                        target = None
            self.begin_recovery(f"rollback requested to checkpoint {target}", target,
                                 count_restart=False)
            return target, self.generation

    def wait_state(self, states: tuple[TopologyState, ...], timeout: float) -> bool:
        """Block until the topology is in one of ``states``."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.state not in states:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.state_changed.wait(left)
            return True

    def status(self) -> dict[str, Any]:
        """Everything `jstorm status` shows (JSON-serialisable)."""
        with self.lock:
            now = time.time()
            workers = []
            for wid in range(self.config.workers):
                s = self.sessions.get(wid)
                workers.append({
                    "id": wid, "alive": bool(s and s.alive), "pid": s.pid if s else None,
                    "host": s.host if s else None, "port": s.port if s else None,
                    "code_version": s.code_version if s else None,
                    "uptime_s": round(now - s.started_at, 1) if s else None,
                    "rss_bytes": s.rss_bytes if s else None,
                    "cpu_percent": s.cpu_percent if s else None,
                    "tasks": [t for t, w in self.plan.items() if w == wid]})
            return {
                "name": self.name, "state": self.state, "generation": self.generation,
                "guarantee": self.config.guarantee, "workers": workers,
                "last_completed_checkpoint": self.checkpoints.last_completed,
                "checkpoints": list(self.checkpoints.history)[-50:],
                "checkpoint_health": self.checkpoint_health().to_dict(),
                "inflight_checkpoints": sorted(self.checkpoints.inflight),
                "restarts": self.restarts, "recoveries": list(self.recoveries),
                "errors": list(self.errors)[-20:],
                "failure": self.failure,
                "spouts_finished": sorted(self.finished_spouts),
                "final_checkpoint": self.checkpoints.final_checkpoint,
                "uptime_s": round(now - self.started_at, 1),
                "state_backend": self.backend.uri,
                "backpressure": self.backpressure.status(),
                "components": self.descriptor["components"],
                "plan": {str(t): w for t, w in self.plan.items()},
                "upgrade": self.upgrade.status(),
                "rescale": self.rescale.status(),
                "run": self.run.to_dict() if self.run is not None else None,
            }

