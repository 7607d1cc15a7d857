"""The Topology Master's core: one topology's state, and the events that drive it.

Everything here runs under one lock, driven by messages from the worker control streams
and by ``tick()`` (a timer thread). Outbound commands go to per-worker queues that the
gRPC service drains. The core holds the task layout, the topology's state, its leadership
and its operations, and is split into parts that each see it through a narrow protocol of
exactly what they use:

- membership (the workers' sessions, registrations, losses): ``membership.Membership``,
  through ``MembershipHost``;
- recovery (generations, the restore, the Prepares, the restart strategy):
  ``recovery.MasterRecovery``, through ``RecoveryHost``;
- the checkpoint side (the coordinator, the commit path, the ids record, retention, the
  triggers): ``checkpoints.MasterCheckpoints``, through ``CheckpointHost``;
- status (``status()``, ``wait_state``, the errors, the failure): ``status.MasterStatus``,
  through ``StatusHost``;
- the quiescent operations (rescale, gray release) through ``operation_host.OperationHost``.

The core implements those protocols: most of its methods are thin delegates to the part
that owns the act. Protocol: DESIGN §4 and ``docs/checkpointing.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
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
from jstormpy.master.membership import Membership
from jstormpy.master.metrics import MetricsStore
from jstormpy.master.recovery import MasterRecovery
from jstormpy.master.rescale import RescaleController
from jstormpy.master.restore_plan import (
    LATEST,
    ReadMetadata,
    RestorePlan,
    RetryLater,
)
from jstormpy.master.session import WorkerSession
from jstormpy.master.status import MasterStatus
from jstormpy.master.topology_state import TopologyState
from jstormpy.master.upgrade import UpgradeController
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.run_identity import RunIdentity, load_run_identity
from jstormpy.state_backends import StateBackend

log = logging.getLogger("jstormpy.master")


class MasterCore:
    """State of one topology, owned by its Topology Master."""

    def __init__(self, name: str, config: Config, descriptor: dict[str, Any],
                 backend: StateBackend, resume: bool = False) -> None:
        self.name = name
        self.config = config
        self.backend = backend
        self.lock = threading.RLock()
        self.membership = Membership(self)  # the workers' sessions (master/membership.py)
        self.state = TopologyState.STARTING
        self.state_changed = threading.Condition(self.lock)
        self.stateful = config.guarantee != "at_most_once"
        # every state-backend call after start-up runs there, never under self.lock
        self.backend_io = BackendIO(f"tm-backend-{name}")
        # the checkpoint side: the coordinator and all that performs it (checkpoints.py)
        self.checkpointing = MasterCheckpoints(self, name, config, backend, self.backend_io)
        self.set_descriptor(descriptor)
        # errors, the failure, status() (master/status.py)
        self.reports = MasterStatus(self)
        self.finished_spouts: set[int] = set()
        persisted = backend.get_meta("generation") if resume else None
        # generations, the restore, the restart strategy (master/recovery.py)
        self.recovery = MasterRecovery(self, int(persisted.decode()) if persisted else 0)
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

    # -- the parts' state, read-only (the service, the UI, the metrics read it) ---------------
    @property
    def sessions(self) -> dict[int, WorkerSession]:
        """Worker id -> its latest session (``membership``)."""
        return self.membership.sessions

    @property
    def generation(self) -> int:
        """The current generation (``recovery``)."""
        return self.recovery.generation

    @property
    def restarts(self) -> int:
        """Failures restarted so far (``recovery``)."""
        return self.recovery.restarts

    @property
    def recoveries(self) -> Sequence[dict[str, Any]]:
        """The last recoveries (``recovery``)."""
        return self.recovery.recoveries

    @property
    def recovery_reason(self) -> str:
        """Why the latest generation began (``recovery``)."""
        return self.recovery.recovery_reason

    @property
    def errors(self) -> Sequence[dict[str, Any]]:
        """The last errors, the tasks' and the TM's own (``reports``)."""
        return self.reports.errors

    @property
    def failure(self) -> dict[str, Any] | None:
        """Why the topology failed for good, None while it has not (``reports``)."""
        return self.reports.failure

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
        return self.membership.alive_sessions()

    def broadcast(self, **body: Any) -> None:
        """Send one control message (``body``: the oneof field) to every live worker."""
        self.membership.broadcast(**body)

    def peer_addresses(self) -> list[Any]:
        """The data-plane address of every live worker, as sent in ``Peers``."""
        return self.membership.peer_addresses()

    def session(self, worker_id: int) -> WorkerSession | None:
        """The session of worker ``worker_id`` (alive or not), if it ever registered."""
        return self.membership.session(worker_id)

    def record_error(self, component: str, message: str) -> None:
        """Keep an error that is no user task's (a lost worker, a recovery that waits, an
        operation's abort) for ``status()["errors"]``."""
        self.reports.record_error(component, message)

    def record_error_once(self, component: str, message: str) -> None:
        """``record_error``, unless the last error kept says the same (``RecoveryHost``)."""
        self.reports.record_error_once(component, message)

    def record_task_error(self, error: dict[str, Any]) -> None:
        """Keep a task's error for ``status()["errors"]`` (``RecoveryHost``)."""
        self.reports.record_task_error(error)

    def adopt_layout(self, config: Config, descriptor: dict[str, Any]) -> None:
        """A rescale committed (under the lock): run ``config`` and ``descriptor``'s task
        layout from now on."""
        self.config = config
        self.set_descriptor(descriptor)

    def forget_surplus_workers(self) -> None:
        """Drop the sessions of worker ids the configuration no longer has (a rescale to
        fewer workers stopped them for good)."""
        self.membership.forget_surplus_workers()

    # -- worker membership: membership.py's Membership ----------------------------------------
    def register(self, session: WorkerSession, reported_generation: int) -> None:
        """A worker opened its control stream (``Membership.register``)."""
        self.membership.register(session, reported_generation)

    def worker_lost(self, session: WorkerSession, reason: str) -> None:
        """A control stream ended or heartbeats stopped (``Membership.worker_lost``)."""
        self.membership.worker_lost(session, reason)

    # what a worker's arrival or loss means to the recovery and the operations
    # (``MembershipHost``), and what the recovery hears of the rest (``RecoveryHost``)
    def note_generation(self, reported: int) -> None:
        self.recovery.note_generation(reported)

    def part_of_recovery(self, session: WorkerSession) -> bool:
        return self.recovery.part_of_recovery(session)

    def worker_replaced(self, worker_id: int) -> None:
        self.recovery.worker_replaced(worker_id)

    def worker_failed(self, worker_id: int, reason: str, knock_on: bool) -> None:
        self.recovery.worker_failed(worker_id, reason, knock_on)

    def operation_takes(self, session: WorkerSession, reported_generation: int) -> bool:
        return (self.rescale.on_register(session, reported_generation)  # rescale hook
                or self.upgrade.on_register(session, reported_generation))  # upgrade hook

    def worker_joined(self, session: WorkerSession) -> None:
        self.recovery.worker_joined(session)

    def operations_hear(self, reason: str) -> None:
        self.upgrade.on_new_generation(reason)  # upgrade hook
        self.rescale.on_new_generation(reason)  # rescale hook

    def operations_lose_worker(self, worker_id: int, reason: str) -> None:
        self.upgrade.on_worker_failed(worker_id, reason)  # upgrade hook

    def generation_began(self) -> None:
        self.backpressure.reset()
        self.finished_spouts = set()

    # -- generations and recovery: recovery.py's MasterRecovery -------------------------------
    def begin_recovery(self, reason: str, target: int | None = None,
                       count_restart: bool = True) -> None:
        """Start a new generation restoring ``target`` (the latest checkpoint if None)."""
        self.recovery.begin_recovery(reason, target, count_restart)

    def begin_generation(self, reason: str, target: int | None, count_restart: bool) -> None:
        """Stop every task and start generation ``generation + 1`` from ``target``
        (``MasterRecovery.begin_generation``)."""
        self.recovery.begin_generation(reason, target, count_restart)

    def maybe_prepare_all(self) -> None:
        """Resolve what to restore, then, once every worker is registered, send the
        Prepares (``MasterRecovery.maybe_prepare_all``)."""
        self.recovery.maybe_prepare_all()

    def resolve_ahead(self) -> None:
        """Taken over, before serving: resolve the first generation's restore while the
        workers start (``MasterRecovery.resolve_ahead``)."""
        self.recovery.resolve_ahead()

    def on_ready(self, msg: Any) -> None:
        """A worker finished Prepare."""
        with self.lock:
            if self.upgrade.on_ready(msg):  # upgrade hook
                return
            self.recovery.on_ready(msg)

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
                self.metrics.update(tm, hb.generation)
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
            self.reports.record_task_error(error)
            # a transport report about a peer the TM already knows is dead adds nothing
            if msg.generation == self.generation and self.stateful \
                    and self.state == TopologyState.RUNNING \
                    and not (msg.task_id < 0 and self.membership.any_lost()):
                self.recovery.task_failed(msg, error)

    def fail(self, reason: str, error: dict[str, Any] | None = None) -> None:
        """Fail the topology for good, keeping why (``MasterStatus.fail``)."""
        self.reports.fail(reason, error)

    def _send_throttle(self, spout_tasks: list[int], release: bool, lease_ms: int) -> None:
        by_worker: dict[int, list[int]] = {}
        for t in spout_tasks:
            by_worker.setdefault(self.plan[t], []).append(t)
        for wid, tasks in by_worker.items():
            s = self.membership.session(wid)
            if s is not None and s.alive:
                s.send(throttle=pb.Throttle(spout_tasks=tasks, lease_ms=lease_ms,
                                            release=release))

    # -- checkpoints: checkpoints.py's MasterCheckpoints performs them ---------------------
    def may_checkpoint(self) -> bool:
        """A checkpoint may start: running, no gray release or rescale holds checkpoints,
        and every worker can ack (``CheckpointHost``). Called under the lock."""
        if self.state != TopologyState.RUNNING or self.upgrade.holds_checkpoints() \
                or self.rescale.holds_checkpoints():  # upgrade/rescale hooks
            return False
        # at_most_once with a worker being respawned: it could not ack
        return (len(self.alive_sessions()) >= self.config.workers
                and self.recovery.pending_partial_start is None)

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
            self.recovery.tick(now)  # a restore that waits is tried again when due
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
                                   persisted_generation=self.recovery.persisted_generation,
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

    # -- status: status.py's MasterStatus -----------------------------------------------------
    def wait_state(self, states: tuple[TopologyState, ...], timeout: float) -> bool:
        """Block until the topology is in one of ``states``."""
        return self.reports.wait_state(states, timeout)

    def status(self) -> dict[str, Any]:
        """Everything `jstorm status` shows (JSON-serialisable)."""
        return self.reports.status()
