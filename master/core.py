"""The Topology Master's brain: workers, generations, recovery, checkpoints, drain.

Everything here runs under one lock, driven by messages from the worker control streams
and by ``tick()`` (a timer thread). Outbound commands go to per-worker queues that the
gRPC service drains. Protocol: DESIGN §4 and ``docs/checkpointing.md``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from jstormpy.config import Config
from jstormpy.errors import BackendError, CorruptSnapshotError, JStormError, SnapshotNotFoundError
from jstormpy.faults import fault_point
from jstormpy.master.backpressure import BackpressureCoordinator
from jstormpy.master.metrics import MetricsStore
from jstormpy.master.upgrade import UpgradeController
from jstormpy.metrics import CHECKPOINT_BUCKETS_MS, CumulativeHistogram
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends import StateBackend
from jstormpy.topology import assign_tasks

log = logging.getLogger("jstormpy.master")

LATEST = -1
"""Recovery target meaning "the newest usable completed checkpoint", resolved (by listing
the backend) when the workers are prepared, so an unreachable backend delays the recovery
instead of making it start from scratch."""
PREPARE_RETRY_S = 1.0


@dataclass
class WorkerSession:
    """One connected worker (one control stream)."""

    worker_id: int
    pid: int
    host: str
    port: int
    code_version: str
    outq: queue.Queue[Any] = field(default_factory=queue.Queue)
    alive: bool = True
    last_seen: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    registered_mono: float = field(default_factory=time.monotonic)
    rss_bytes: int = 0
    cpu_percent: float = 0.0
    generation: int = 0

    def send(self, **body: Any) -> None:
        """Queue one MasterMessage for this worker."""
        self.outq.put(pb.MasterMessage(**body))


@dataclass
class PendingCheckpoint:
    """A checkpoint in flight."""

    checkpoint_id: int
    generation: int
    started: float
    started_wall: float
    acks: dict[int, Any] = field(default_factory=dict)
    alignment_ms: float = 0.0


class MasterCore:
    """State of one topology, owned by its Topology Master."""

    def __init__(self, name: str, config: Config, descriptor: dict[str, Any],
                 backend: StateBackend, resume: bool = False) -> None:
        self.name = name
        self.config = config
        self.descriptor = descriptor
        self.backend = backend
        self.lock = threading.RLock()
        self.sessions: dict[int, WorkerSession] = {}
        self.state = "starting"
        self.state_changed = threading.Condition(self.lock)
        self.component_tasks = {c["name"]: list(c["tasks"]) for c in descriptor["components"]}
        self.all_tasks = sorted(t for ts in self.component_tasks.values() for t in ts)
        self.spout_tasks = sorted(t for c in descriptor["components"] if c["kind"] == "spout"
                                  for t in c["tasks"])
        self.sink_tasks = sorted(t for c in descriptor["components"] if c.get("is_sink")
                                 for t in c["tasks"])
        self.task_component = {t: n for n, ts in self.component_tasks.items() for t in ts}
        workers = config.workers
        self.plan = assign_tasks(self.component_tasks, workers)
        self.generation = 0
        self.target_checkpoint: int | None = None
        self.bad_checkpoints: set[int] = set()
        # highest checkpoint id known to have completed: ids handed out after a recovery
        # stay above it, so a fallback/rollback to an older checkpoint never reuses the id
        # of a transaction a sink may already have committed
        self.id_floor = 0
        self.prepared_base = 0
        self.retry_prepare_at: float | None = None
        self.ready: set[int] = set()
        self.next_checkpoint_id = 1
        self.inflight: dict[int, PendingCheckpoint] = {}
        self.history: deque[dict[str, Any]] = deque(maxlen=200)
        self.checkpoint_durations = CumulativeHistogram(CHECKPOINT_BUCKETS_MS)
        self.last_completed: dict[str, Any] | None = None
        self.last_trigger = time.monotonic()
        self.final_checkpoint: int | None = None
        self.commits_needed: set[int] = set()
        self.restarts = 0
        self.recoveries: deque[dict[str, Any]] = deque(maxlen=50)
        self.recovery_started: float | None = None
        self.recovery_reason = ""
        self.timed_out_in_a_row = 0
        self.errors: deque[dict[str, Any]] = deque(maxlen=50)
        self.metrics = MetricsStore(self.task_component, self.plan)
        self.backpressure = BackpressureCoordinator(
            descriptor, config.backpressure_high_watermark, config.backpressure_low_watermark,
            config.throttle_lease_ms, self._send_throttle)
        self.started_at = time.time()
        self.finished_spouts: set[int] = set()
        self.stateful = config.guarantee != "at_most_once"
        self.pending_partial_start: int | None = None
        persisted = backend.get_meta("generation") if resume else None
        if persisted:
            self.generation = int(persisted.decode())
        if not resume:
            stale = backend.list_completed()
            if stale:
                log.warning("fresh run: discarding %d checkpoint(s) left in %s by an earlier "
                            "run (use resume to continue from them)", len(stale), backend.uri)
                backend.delete_objects("chk-")
        self.resume = resume
        self.upgrade = UpgradeController(self)  # gray release (master/upgrade.py)

    # -- helpers -------------------------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        if state != self.state:
            log.info("topology %s: %s -> %s (generation %d)", self.name, self.state, state,
                     self.generation)
            self.state = state
            self.state_changed.notify_all()

    def _alive(self) -> list[WorkerSession]:
        return [s for s in self.sessions.values() if s.alive]

    def _broadcast(self, **body: Any) -> None:
        for s in self._alive():
            s.send(**body)

    def _peers(self) -> list[Any]:
        return [pb.WorkerAddress(worker_id=s.worker_id, host=s.host, port=s.port)
                for s in self._alive()]

    # -- worker membership ---------------------------------------------------------------------
    def register(self, session: WorkerSession, reported_generation: int) -> None:
        """A worker opened its control stream."""
        with self.lock:
            if not 0 <= session.worker_id < self.config.workers:
                raise JStormError(f"worker id {session.worker_id} outside "
                                  f"0..{self.config.workers - 1}")
            old = self.sessions.get(session.worker_id)
            if old is not None and old.alive:
                old.alive = False
                old.send(shutdown=pb.Shutdown(reason="replaced by a newer registration"))
                if self.state == "running":
                    self._worker_failed(session.worker_id, "worker re-registered")
            self.sessions[session.worker_id] = session
            self.generation = max(self.generation, reported_generation)
            log.info("worker %d registered (pid %d, data port %d)", session.worker_id,
                     session.pid, session.port)
            if self.state in ("killed", "drained", "failed"):
                session.send(shutdown=pb.Shutdown(reason=f"topology is {self.state}"))
                return
            if self.upgrade.on_register(session):  # upgrade hook
                return
            if self.state == "running" and not self.stateful:
                self._prepare_partial(session)
                return
            if self.state == "starting":
                target = LATEST if self.resume else None
                self._begin_generation("start" if not self.resume else "resume", target,
                                       count_restart=False)
            elif self.state == "recovering":
                self._maybe_prepare_all()

    def worker_lost(self, session: WorkerSession, reason: str) -> None:
        """A control stream ended or heartbeats stopped."""
        with self.lock:
            if self.sessions.get(session.worker_id) is not session or not session.alive:
                return
            session.alive = False
            # a worker that registered before the recovery under way began goes down with
            # the failure that recovery handles (on Spark a lost task fails the whole
            # barrier stage): it costs no second restart and keeps the first reason
            knock_on = (self.state == "recovering" and self.recovery_started is not None
                        and session.registered_mono < self.recovery_started)
            log.warning("worker %d lost: %s%s", session.worker_id, reason,
                        " (part of the failure being recovered)" if knock_on else "")
            self._worker_failed(session.worker_id, f"worker {session.worker_id} lost: {reason}",
                                knock_on)

    def _worker_failed(self, worker_id: int, reason: str, knock_on: bool = False) -> None:
        if self.state in ("killed", "drained", "failed"):
            return
        self.upgrade.on_worker_failed(worker_id, reason)  # upgrade hook
        if not self.stateful:
            self.errors.append({"time": time.time(), "task": -1, "component": "",
                                "message": reason, "traceback": "", "tuple": ""})
            # the lost tasks' acks never come: abort in-flight checkpoints now rather than
            # stall commits until checkpoint_timeout_ms
            for cid, pending in list(self.inflight.items()):
                del self.inflight[cid]
                self._record(pending, "failed", reason)
                self._broadcast(abort=pb.AbortCheckpoint(checkpoint_id=cid,
                                                         generation=self.generation,
                                                         reason=reason))
            return  # at-most-once: the others keep running; the respawn gets a partial prepare
        if knock_on:
            first, started = self.recovery_reason, self.recovery_started
            self._begin_recovery(reason, count_restart=False)
            self.recovery_reason, self.recovery_started = first, started
            return
        self._begin_recovery(reason)

    def _prepare_partial(self, session: WorkerSession) -> None:
        tasks = [t for t, w in self.plan.items() if w == session.worker_id]
        # nothing is restored; the id tells a respawned sink which transactions are
        # already committed, so its new ones do not reuse their ids
        last = self.last_completed["id"] if self.last_completed else 0
        session.send(prepare=pb.Prepare(
            generation=self.generation, checkpoint_id=last, task_ids=tasks,
            peers=self._peers(), task_workers=self.plan, partial=True))
        self._broadcast(peers=pb.Peers(peers=self._peers(), generation=self.generation))
        self.pending_partial_start = session.worker_id

    # -- generations and recovery --------------------------------------------------------------
    def _choose_checkpoint(self) -> int | None:
        """The newest usable completed checkpoint (BackendError if the backend cannot be
        listed: "none" would silently mean "restart from scratch")."""
        listed = self.backend.list_completed()
        self.id_floor = max([self.id_floor, *listed])
        done = [c for c in listed if c not in self.bad_checkpoints]
        return done[-1] if done else None

    def _begin_recovery(self, reason: str, target: int | None = None,
                        count_restart: bool = True) -> None:
        self._begin_generation(reason, LATEST if target is None else target, count_restart)

    def _begin_generation(self, reason: str, target: int | None, count_restart: bool) -> None:
        self.upgrade.on_new_generation(reason)  # upgrade hook
        if count_restart:
            self.restarts += 1
            if self.restarts > self.config.max_restarts:
                log.error("topology %s failed: %d restarts exceed max_restarts=%d (last: %s)",
                          self.name, self.restarts, self.config.max_restarts, reason)
                self._set_state("failed")
                self._broadcast(shutdown=pb.Shutdown(reason="topology failed"))
                return
        self.generation += 1
        try:
            self.backend.put_meta("generation", str(self.generation).encode())
        except BackendError as exc:
            log.error("cannot persist generation %d: %s", self.generation, exc)
        self.inflight.clear()
        self.backpressure.reset()
        self.final_checkpoint = None
        self.commits_needed = set()
        self.finished_spouts = set()
        self.target_checkpoint = target
        self.ready = set()
        self.recovery_started = time.monotonic()
        self.recovery_reason = reason
        log.info("generation %d: %s; restoring checkpoint %s", self.generation, reason,
                 "the latest" if target == LATEST else
                 target if target is not None else "none (fresh state)")
        self._set_state("recovering")
        self._maybe_prepare_all()

    def _maybe_prepare_all(self) -> None:
        alive = self._alive()
        if len(alive) < self.config.workers:
            return
        self.retry_prepare_at = None
        restores: dict[int, str] = {}
        if self.target_checkpoint == LATEST and self.stateful:
            try:
                self.target_checkpoint = self._choose_checkpoint()
            except BackendError as exc:
                self._retry_prepare(f"cannot list checkpoints: {exc}")
                return
        elif self.target_checkpoint == LATEST:
            self.target_checkpoint = None
        if self.target_checkpoint is not None:
            try:
                meta = self.backend.read_metadata(self.target_checkpoint)
                restores = {int(t): v["handle"] for t, v in meta["tasks"].items()}
            except (CorruptSnapshotError, SnapshotNotFoundError, KeyError, ValueError) as exc:
                log.error("checkpoint %s unusable (%s); falling back", self.target_checkpoint, exc)
                self.bad_checkpoints.add(self.target_checkpoint)
                self._begin_recovery(f"checkpoint {self.target_checkpoint} unusable",
                                     count_restart=False)
                return
            except BackendError as exc:  # unreachable: the checkpoint may be fine
                self._retry_prepare(f"cannot read checkpoint {self.target_checkpoint}: {exc}")
                return
        peers = self._peers()
        # the id the tasks resume after (sinks open transaction base + 1); the restored state
        # itself comes from the handles of target_checkpoint
        base = max(self.target_checkpoint or 0, self.id_floor) if self.stateful else 0
        self.prepared_base = base
        for s in alive:
            tasks = [t for t, w in self.plan.items() if w == s.worker_id]
            s.send(prepare=pb.Prepare(
                generation=self.generation, checkpoint_id=base,
                task_ids=tasks,
                restores=[pb.TaskRestore(task_id=t, handle=restores.get(t, "")) for t in tasks],
                peers=peers, task_workers=self.plan, partial=False))

    def _retry_prepare(self, why: str) -> None:
        log.error("recovery of generation %d waits for the state backend: %s; retrying in "
                  "%.0f s", self.generation, why, PREPARE_RETRY_S)
        self.retry_prepare_at = time.monotonic() + PREPARE_RETRY_S

    def on_ready(self, msg: Any) -> None:
        """A worker finished Prepare."""
        with self.lock:
            if self.upgrade.on_ready(msg):  # upgrade hook
                return
            if getattr(self, "pending_partial_start", None) == msg.worker_id and \
                    msg.generation == self.generation and self.state == "running":
                self.sessions[msg.worker_id].send(start=pb.Start(generation=self.generation))
                self.pending_partial_start = None
                return
            if msg.generation != self.generation or self.state != "recovering":
                return
            if not msg.ok:
                if msg.corrupt_snapshot and self.target_checkpoint is not None:
                    log.error("checkpoint %s has a corrupt snapshot (%s); falling back to the "
                              "previous complete checkpoint", self.target_checkpoint, msg.error)
                    self.bad_checkpoints.add(self.target_checkpoint)
                    self._begin_recovery(f"corrupt snapshot in checkpoint "
                                         f"{self.target_checkpoint}: {msg.error}",
                                         count_restart=False)
                else:
                    self.errors.append({"time": time.time(), "task": msg.failed_task,
                                        "component": "", "message": msg.error,
                                        "traceback": "", "tuple": ""})
                    self._begin_recovery(f"worker {msg.worker_id} failed to prepare: {msg.error}")
                return
            self.ready.add(msg.worker_id)
            if len(self.ready) >= self.config.workers:
                self._broadcast(start=pb.Start(generation=self.generation))
                took = (time.monotonic() - (self.recovery_started or time.monotonic())) * 1000
                if self.recovery_reason != "start":  # a fresh start restores nothing
                    self.recoveries.append({"generation": self.generation,
                                            "reason": self.recovery_reason,
                                            "checkpoint": self.target_checkpoint,
                                            "time": time.time(),
                                            "duration_ms": round(took, 1)})
                self.next_checkpoint_id = self.prepared_base + 1 if self.stateful \
                    else max(self.next_checkpoint_id, 1)
                self.last_trigger = time.monotonic()
                self._set_state("running")

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
            self._maybe_final_checkpoint()

    def _maybe_final_checkpoint(self) -> None:
        """Every spout finished and nothing in flight: start the final checkpoint now
        rather than at the next tick."""
        if self.state == "running" and self.final_checkpoint is None and not self.inflight \
                and self.spout_tasks and self.finished_spouts >= set(self.spout_tasks):
            self.trigger_checkpoint()

    def on_task_error(self, msg: Any) -> None:
        """A task's user code raised."""
        with self.lock:
            self.errors.append({"time": time.time(), "task": msg.task_id,
                                "component": msg.component, "message": msg.message,
                                "traceback": msg.traceback, "tuple": msg.tuple_repr,
                                "generation": msg.generation})
            if msg.generation == self.generation and self.stateful and self.state == "running" \
                    and not self._worker_of_task_lost(msg):
                self._begin_recovery(f"task {msg.task_id} ({msg.component}) raised "
                                     f"{msg.message}")

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

    # -- checkpoints ---------------------------------------------------------------------------
    def trigger_checkpoint(self, force: bool = False) -> int | None:
        """Start a checkpoint now (if running and within the concurrency limit)."""
        with self.lock:
            if self.state != "running" or self.upgrade.holds_checkpoints():  # upgrade hook
                return None
            if len(self._alive()) < self.config.workers or self.pending_partial_start is not None:
                return None  # at_most_once with a worker being respawned: it could not ack
            if len(self.inflight) >= self.config.max_concurrent_checkpoints and not force:
                return None
            cid = self.next_checkpoint_id
            self.next_checkpoint_id += 1
            self.inflight[cid] = PendingCheckpoint(cid, self.generation, time.monotonic(),
                                                   time.time())
            self.last_trigger = time.monotonic()
            self._broadcast(trigger=pb.TriggerCheckpoint(checkpoint_id=cid,
                                                         generation=self.generation))
            return cid

    def on_checkpoint_ack(self, ack: Any) -> None:
        """A task snapshotted for a checkpoint."""
        with self.lock:
            pending = self.inflight.get(ack.checkpoint_id)
            if pending is None or ack.generation != self.generation:
                return
            pending.acks[ack.task_id] = ack
            pending.alignment_ms = max(pending.alignment_ms, ack.alignment_ms)
            if len(pending.acks) >= len(self.all_tasks):
                self._complete(pending)

    def on_checkpoint_failed(self, msg: Any) -> None:
        """A task could not snapshot: abort that checkpoint, keep running."""
        with self.lock:
            pending = self.inflight.pop(msg.checkpoint_id, None)
            if pending is None or msg.generation != self.generation:
                return
            self._record(pending, "failed", f"task {msg.task_id}: {msg.reason}")
            self._broadcast(abort=pb.AbortCheckpoint(checkpoint_id=msg.checkpoint_id,
                                                     generation=self.generation,
                                                     reason=msg.reason))

    def _record(self, pending: PendingCheckpoint, status: str, error: str = "",
                size: int = 0) -> dict[str, Any]:
        duration_ms = round((time.monotonic() - pending.started) * 1000, 2)
        entry = {"id": pending.checkpoint_id, "generation": pending.generation,
                 "status": status, "started_at": pending.started_wall,
                 "duration_ms": duration_ms,
                 "alignment_ms": round(pending.alignment_ms, 2), "size_bytes": size,
                 "error": error}
        self.history.append(entry)
        if status == "completed":  # cumulative, unlike the bounded history
            self.checkpoint_durations.observe(duration_ms)
        else:
            log.warning("checkpoint %d %s: %s", pending.checkpoint_id, status, error)
        return entry

    def _stalled_tasks(self, pending: PendingCheckpoint) -> str:
        """The tasks that never acked ``pending``, by component name and task id."""
        missing = [t for t in self.all_tasks if t not in pending.acks]
        return ", ".join(f"{self.task_component.get(t, '?')}[task {t}]"
                         for t in missing) or "none"

    def _complete(self, pending: PendingCheckpoint) -> None:
        cid = pending.checkpoint_id
        self.timed_out_in_a_row = 0
        del self.inflight[cid]
        size = sum(a.size_bytes for a in pending.acks.values())
        finished = bool(self.spout_tasks) and all(
            pending.acks[t].finished for t in self.spout_tasks if t in pending.acks)
        if self.stateful:
            meta = {"generation": pending.generation,
                    "tasks": {str(t): {"handle": a.handle, "size": a.size_bytes}
                              for t, a in pending.acks.items()},
                    "spouts_finished": finished, "size_bytes": size,
                    "completed_at": time.time(),
                    "duration_ms": (time.monotonic() - pending.started) * 1000}
            try:
                self.backend.write_metadata(cid, meta)  # the commit point
            except BackendError as exc:
                self._record(pending, "failed", f"metadata write failed: {exc}")
                return
            self.id_floor = max(self.id_floor, cid)
            fault_point("master_after_metadata", cid)
        entry = self._record(pending, "completed", size=size)
        self.last_completed = entry
        self._broadcast(complete=pb.CompleteCheckpoint(checkpoint_id=cid,
                                                       generation=self.generation))
        if finished and self.final_checkpoint is None:
            self.final_checkpoint = cid
            self.commits_needed = set(self.sink_tasks)
            self._maybe_drained()
        else:
            self._maybe_final_checkpoint()  # spouts finished while this one was in flight
        if self.stateful:
            try:
                self.backend.garbage_collect(self.config.checkpoints_retained)
            except BackendError as exc:
                log.warning("checkpoint garbage collection failed: %s", exc)

    def on_sink_committed(self, msg: Any) -> None:
        """A sink made a checkpoint's output visible."""
        with self.lock:
            if msg.generation != self.generation:
                return
            if self.final_checkpoint is not None and msg.checkpoint_id >= self.final_checkpoint:
                self.commits_needed.discard(msg.task_id)
                self._maybe_drained()

    def _maybe_drained(self) -> None:
        if self.final_checkpoint is not None and not self.commits_needed \
                and self.state == "running":
            log.info("topology %s drained at checkpoint %d", self.name, self.final_checkpoint)
            self._set_state("drained")
            self._broadcast(shutdown=pb.Shutdown(reason="drained"))

    # -- periodic work -------------------------------------------------------------------------
    def tick(self) -> None:
        """Heartbeat timeouts, checkpoint triggers and timeouts."""
        now = time.monotonic()
        with self.lock:
            timeout = self.config.worker_timeout_ms / 1000.0
            for s in self._alive():
                if now - s.last_seen > timeout:
                    # non-zero: a worker that was only frozen or cut off exits when it
                    # hears this, and its launcher restarts it for the recovery (exit 0
                    # would leave the recovery waiting for it for ever)
                    s.send(shutdown=pb.Shutdown(reason="heartbeat timeout", exit_code=1))
                    self.worker_lost(s, f"no heartbeat for {timeout:.1f} s")
            if self.state == "recovering" and self.retry_prepare_at is not None \
                    and now >= self.retry_prepare_at:
                self._maybe_prepare_all()
            self.upgrade.tick(now)  # upgrade hook
            if self.state != "running":
                return
            self.backpressure.evaluate(now)
            for cid, pending in list(self.inflight.items()):
                if now - pending.started > self.config.checkpoint_timeout_ms / 1000.0:
                    del self.inflight[cid]
                    stalled = self._stalled_tasks(pending)
                    self._record(pending, "timed_out",
                                 f"{len(pending.acks)}/{len(self.all_tasks)} tasks acked; "
                                 f"stalled: {stalled}")
                    self._broadcast(abort=pb.AbortCheckpoint(checkpoint_id=cid,
                                                             generation=self.generation,
                                                             reason="timeout"))
                    self.timed_out_in_a_row += 1
                    if self.timed_out_in_a_row > self.config.tolerable_failed_checkpoints:
                        self.timed_out_in_a_row = 0
                        tolerable = self.config.tolerable_failed_checkpoints
                        self._begin_recovery(
                            f"checkpoint {cid} timed out, {tolerable + 1} timeout(s) in a row "
                            f"(tolerable_failed_checkpoints={tolerable}); stalled: {stalled}")
                        return
            all_finished = bool(self.spout_tasks) and \
                self.finished_spouts >= set(self.spout_tasks)
            due = now - self.last_trigger >= self.config.checkpoint_interval_ms / 1000.0
            if self.final_checkpoint is None and (due or (all_finished and not self.inflight)):
                self.trigger_checkpoint()

    # -- operations ----------------------------------------------------------------------------
    def kill(self, reason: str) -> None:
        """Stop the topology: every worker shuts down."""
        with self.lock:
            self._set_state("killed")
            self._broadcast(shutdown=pb.Shutdown(reason=reason or "killed"))

    def rollback(self, checkpoint_id: int | None) -> tuple[int | None, int]:
        """Roll every task back to a completed checkpoint (latest if None)."""
        with self.lock:
            if self.state not in ("running", "recovering"):
                raise JStormError(f"cannot roll back a topology that is {self.state}")
            if not self.stateful:
                raise JStormError("rollback needs checkpoints: the topology runs at_most_once")
            done = self.backend.list_completed()
            self.id_floor = max([self.id_floor, *done])
            if checkpoint_id:
                if checkpoint_id not in done:
                    raise JStormError(f"checkpoint {checkpoint_id} is not a completed checkpoint "
                                      f"(completed: {done})")
                target: int | None = checkpoint_id
            else:
                target = self._choose_checkpoint()
            self._begin_recovery(f"rollback requested to checkpoint {target}", target,
                                 count_restart=False)
            return target, self.generation

    def wait_state(self, states: tuple[str, ...], timeout: float) -> bool:
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
                "last_completed_checkpoint": self.last_completed,
                "checkpoints": list(self.history)[-50:],
                "inflight_checkpoints": sorted(self.inflight),
                "restarts": self.restarts, "recoveries": list(self.recoveries),
                "errors": list(self.errors)[-20:],
                "spouts_finished": sorted(self.finished_spouts),
                "final_checkpoint": self.final_checkpoint,
                "uptime_s": round(now - self.started_at, 1),
                "state_backend": self.backend.uri,
                "backpressure": self.backpressure.status(),
                "components": self.descriptor["components"],
                "plan": {str(t): w for t, w in self.plan.items()},
                "upgrade": self.upgrade.status(),
            }
