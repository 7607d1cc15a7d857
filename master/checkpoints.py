"""The Topology Master's checkpoint side: the coordinator and everything that performs it.

``MasterCheckpoints`` owns the TM's :class:`~jstormpy.master.coordinator.CheckpointCoordinator`
(I/O-free: ids, acks, completion, aborts, the drain) and performs what it decides: the
triggers, completions and aborts on the workers' control streams, the one commit path
(``commit_point.perform``), the completed floor, the ids record's stores outside a recovery
(``ids_record_steps.IdsRecordStores``), retention (``retention_steps.perform``), and the
periodic part of the TM's tick (reserve ids, time-outs, the checkpoints' pace, the next
trigger). Each step list is a pure module's, shared with the simulator's TM; the four port
classes at the end of this module are how this TM performs them.

What it needs of the rest of the TM (membership, generations, recovery, leadership) is the
:class:`CheckpointHost` protocol, which ``MasterCore`` implements: public members only.
Protocol: DESIGN §4 and ``docs/checkpointing.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.api.errors import BackendError
from jstormpy.faults import fault_point
from jstormpy.master import coordinator_driver
from jstormpy.master.backend_io import BackendIO
from jstormpy.master.checkpoint_health import CheckpointHealth, CheckpointPace, assess
from jstormpy.master.commit_point import (
    CommitOutcome,
    CommitPoint,
    CommitStatus,
    FenceMoment,
)
from jstormpy.master.commit_point import perform as perform_commit
from jstormpy.master.commit_point import report as report_commit
from jstormpy.master.coordinator import (
    CheckpointCoordinator,
    CollectGarbage,
    CoordinatorAction,
    Drained,
    SendAbort,
    SendComplete,
    SendTrigger,
    StartRecovery,
    TaskAck,
    TriggerFinal,
    WriteCommitPoint,
)
from jstormpy.master.ids_record_steps import IdsRecordStores
from jstormpy.master.retention_steps import perform as perform_retention
from jstormpy.master.topology_state import TopologyState
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.run_identity import RunIdentity
from jstormpy.state_backends import StateBackend
from jstormpy.state_backends.base import CHECKPOINT_IDS_META, COMPLETED_META

log = logging.getLogger("jstormpy.master")


class CheckpointHost(Protocol):
    """What the checkpoint side uses of the rest of the Topology Master (``MasterCore``):
    its lock, where the topology is, and the few acts that belong to membership,
    recovery and leadership."""

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The TM's one lock (re-entrant): every event runs under it."""

    @property
    def state(self) -> TopologyState:
        """Where the topology is."""

    @property
    def config(self) -> Config:
        """The running configuration (live settings and a rescale replace it)."""

    @property
    def run(self) -> RunIdentity | None:
        """This TM's run identity and epoch, stamped on every commit point."""

    def broadcast(self, **body: Any) -> None:
        """Send one control message to every live worker."""

    def set_state(self, state: TopologyState) -> None:
        """Move the topology to ``state``."""

    def begin_recovery(self, reason: str) -> None:
        """Start a new generation restoring the latest checkpoint."""

    def maybe_prepare_all(self) -> None:
        """A recovery waiting for a commit point's outcome may go on."""

    def check_fenced(self, checkpoint_id: int, moment: str) -> bool:
        """BackendIO thread: True if this TM may no longer commit (``--ha``: its lease
        expired, or a newer TM took the run over)."""

    def may_checkpoint(self) -> bool:
        """A checkpoint may start: running, no rescale or gray release holds them, and
        every worker can ack."""

    def spouts_finished(self) -> bool:
        """Every spout task has finished its input."""


class MasterCheckpoints:
    """The checkpoint side of one topology's Topology Master.

    Args:
        host: The rest of the TM (``MasterCore``), through :class:`CheckpointHost`.
        name: The topology's name (for the log).
        config: The configuration at start (the coordinator's limits).
        backend: The state backend the checkpoints live in.
        backend_io: The TM's one thread for state-backend calls.
    """

    def __init__(self, host: CheckpointHost, name: str, config: Config,
                 backend: StateBackend, backend_io: BackendIO) -> None:
        self.host = host
        self.name = name
        self.backend = backend
        self.backend_io = backend_io
        self.stateful = config.guarantee != "at_most_once"
        # checkpoint ids, checkpoints in flight and completed, the drain (I/O-free; this
        # class performs its actions: master/coordinator.py)
        self.coordinator = CheckpointCoordinator(
            stateful=self.stateful, max_concurrent=config.max_concurrent_checkpoints,
            timeout_s=config.checkpoint_timeout_ms / 1000.0,
            tolerable_timeouts=config.tolerable_failed_checkpoints)
        # the ids record's stores outside a recovery: the tick's reservation, after a bad
        # checkpoint (master/ids_record_steps.py)
        self.ids_stores = IdsRecordStores(self.coordinator, _IdsRecordPort(self))
        # the checkpoints' pace last logged, and the timeouts in a row then
        self.logged_pace: tuple[CheckpointPace, int] = (CheckpointPace.NONE_YET, 0)
        self.coordinator.note_trigger(time.monotonic())
        self.persisted_floor = 0  # meta/completed_checkpoint as last stored

    def load_stored(self, resume: bool) -> None:
        """At start: a resume adopts the stored completed floor and ids record; a fresh
        run deletes them and every checkpoint an earlier run left behind."""
        backend = self.backend
        floor = backend.get_meta(COMPLETED_META) if resume else None
        if floor:
            self.coordinator.adopt_completed_floor(int(floor.decode()))
        self.persisted_floor = self.coordinator.completed_floor
        ids = backend.get_meta(CHECKPOINT_IDS_META) if resume else None
        if ids:
            self.coordinator.adopt_ids_record(ids)
        if not resume:
            # an earlier run's floor would hold a resume of this run below it for ever
            backend.delete_objects(f"meta/{COMPLETED_META}")
            backend.delete_objects(f"meta/{CHECKPOINT_IDS_META}")
            stale = backend.list_completed()
            if stale:
                log.warning("fresh run: discarding %d checkpoint(s) left in %s by an earlier "
                            "run (use resume to continue from them)", len(stale), backend.uri)
                backend.delete_objects("chk-")
                backend.delete_objects("inc/")  # incremental segments of those checkpoints

    # -- the coordinator decides, this class performs -----------------------------------------
    def perform(self, actions: list[CoordinatorAction]) -> bool:
        """Carry out the coordinator's actions, in order, under the lock
        (``coordinator_driver.perform``); True if one of them began a recovery."""
        return coordinator_driver.perform(actions, _CoordinatorPort(self))

    def trigger(self, force: bool = False) -> int | None:
        """Start a checkpoint now (if the host allows one and within the concurrency
        limit); its id, or None."""
        with self.host.lock:
            if not self.host.may_checkpoint() or not self.coordinator.may_start(force):
                return None
            return self.start()[0]

    def start(self, pause: bool = False) -> tuple[int, float]:
        """Start the next checkpoint and send its trigger (``pause``: the spouts stop after
        the barrier, the gray-release/rescale cut). Returns its id and the monotonic time
        it started. Called under the lock."""
        now = time.monotonic()
        cid, actions = self.coordinator.start(now, time.time(), pause)
        self.perform(actions)
        return cid, now

    def maybe_final_checkpoint(self) -> None:
        """Every spout finished: start the final checkpoint now rather than at the next
        tick, beside a periodic one in flight that cannot be the final one
        (``CheckpointCoordinator.final_may_start``). Called under the lock."""
        if self.host.state == TopologyState.RUNNING \
                and self.coordinator.final_may_start(self.host.spouts_finished()):
            self.trigger(force=True)

    def on_ack(self, ack: Any) -> None:
        """A task snapshotted for a checkpoint."""
        with self.host.lock:
            self.perform(self.coordinator.ack(
                ack.generation, ack.checkpoint_id,
                TaskAck(ack.task_id, ack.handle, ack.size_bytes, ack.finished,
                        ack.alignment_ms, ack.pause_ms), time.monotonic(), time.time()))
            # a spout's ack may show that the checkpoint in flight is not the final one
            self.maybe_final_checkpoint()

    def on_failed(self, msg: Any) -> None:
        """A task could not snapshot: abort that checkpoint, keep running."""
        with self.host.lock:
            self.perform(self.coordinator.task_failed(
                msg.generation, msg.checkpoint_id, msg.task_id, msg.reason, time.monotonic()))

    def on_sink_committed(self, msg: Any) -> None:
        """A sink made a checkpoint's output visible. Called under the lock."""
        self.perform(self.coordinator.sink_committed(msg.generation, msg.checkpoint_id,
                                                     msg.task_id))

    def abort_all(self, reason: str) -> None:
        """Abort every checkpoint in flight (at-most-once: a worker's acks never come).
        Called under the lock."""
        self.perform(self.coordinator.abort_all(reason, time.monotonic()))

    # -- periodic work -------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """The running topology's part of the TM's tick, under the lock: reserve ids
        ahead, time checkpoints out, log their pace, trigger the next one when due (or
        the final one)."""
        self.ids_stores.tick(running=True)  # reserve ids ahead
        if self.perform(self.coordinator.expire(now)):
            return  # a recovery began
        self.log_pace()
        config = self.host.config
        due = self.coordinator.due(now, config.checkpoint_interval_ms / 1000.0,
                                   config.min_pause_between_checkpoints_ms / 1000.0)
        if self.coordinator.final_checkpoint is None and due:
            self.trigger()
        self.maybe_final_checkpoint()

    def health(self) -> CheckpointHealth:
        """Whether checkpoints keep up with their interval (master/checkpoint_health.py).
        Called under the lock."""
        c = self.host.config
        return assess(self.coordinator.history, self.coordinator.timed_out_in_a_row,
                      interval_ms=c.checkpoint_interval_ms,
                      min_pause_ms=c.min_pause_between_checkpoints_ms,
                      timeout_ms=c.checkpoint_timeout_ms,
                      tolerable_timeouts=c.tolerable_failed_checkpoints)

    def log_pace(self) -> None:
        """Log when the checkpoints' pace changes (and each further timeout in a row):
        one line that says what to change, not one per checkpoint."""
        health = self.health()
        seen = (health.pace, health.timed_out_in_a_row)
        if seen == self.logged_pace:
            return
        before = self.logged_pace[0]
        self.logged_pace = seen
        if health.advice:
            log.warning("checkpoints: %s", health.advice)
        elif before in (CheckpointPace.BACK_TO_BACK, CheckpointPace.TIMING_OUT):
            log.info("checkpoints keep up again: %.0f ms against an interval of %d ms",
                     health.recent_duration_ms or 0.0, health.interval_ms)

    # -- the one commit path -------------------------------------------------------------------
    def create_commit_point(self, cid: int, metadata: Mapping[str, Any]) -> CommitOutcome:
        """BackendIO thread: the one commit path, for every commit point this TM writes (a
        periodic checkpoint's, a rescale's; docs/checkpointing.md, "The one commit path").

        1. fenced first (``--ha``: the lease must hold);
        2. stamped with this TM's run identity and epoch (``"run"``), so a restore can tell
           a deposed or dead TM's late write apart (``RestorePlan``);
        3. created, never replaced (``StateBackend.create_metadata``): a late write never
           replaces another TM's commit point under the same id, nor is replaced by one;
        4. fenced again: a standby that took over before the write lists this checkpoint
           (its epoch is stored first), so only a TM that sees its own epoch still stored
           goes on. After a failed write the lease alone: a deposed TM must not write its
           ids record over the new leader's (issue 27);
        5. stored as the completed floor, before any sink is told to commit it.

        The id must come from ``CheckpointCoordinator.allocate_id`` (its reservation).
        The steps are ``commit_point.CommitPoint.steps()``, performed by
        ``commit_point.perform`` (the simulator's TM performs the same)."""
        outcome: list[CommitOutcome] = []
        run = self.host.run
        commit = CommitPoint(cid, metadata, run.to_dict() if run is not None else None,
                             self.persisted_floor)
        perform_commit(commit, _CommitPort(self), outcome.append)
        return outcome[0]

    def write_commit_point(self, action: WriteCommitPoint) -> None:
        """BackendIO thread: a periodic checkpoint's commit point through
        :meth:`create_commit_point`, then its outcome to the coordinator."""
        host, cid = self.host, action.checkpoint_id
        outcome = self.create_commit_point(cid, action.metadata)
        if outcome.status == CommitStatus.FENCED:
            return
        with host.lock:
            if outcome.status == CommitStatus.CREATED:
                fault_point("master_after_metadata", cid)
            self.perform(report_commit(self.coordinator, cid, outcome,
                                       host.state == TopologyState.RUNNING,
                                       time.monotonic(), time.time()))
            if host.state == TopologyState.RECOVERING:
                host.maybe_prepare_all()  # it waits for the outcome of every commit point
        if outcome.status == CommitStatus.FAILED:
            self.store_ids_record_now(f"bad checkpoint {cid}")

    def store_ids_record_now(self, why: str) -> None:
        """BackendIO thread: store this TM's ids record at once, best effort (``why``, for
        the log: e.g. a checkpoint just marked bad), so that a TM that dies before the next
        recovery's record leaves it (that record is the one a recovery cannot go
        without). ``ids_record_steps.IdsRecordStores.store``, which the simulator's TM
        performs too."""
        self.ids_stores.store(why)

    def persist_completed_floor(self, cid: int) -> BackendError | None:
        """BackendIO thread, right after ``cid``'s metadata landed and before any sink is
        told to commit it: store it as the newest completed id beside the generation, so a
        resumed TM also refuses a listing that lacks it (COMPLETED_META). Returns the
        write's error: then ``cid`` is not announced complete (``floor_not_stored``)."""
        if cid <= self.persisted_floor:
            return None  # stored already (a restore of it, or a newer one)
        try:
            self.backend.put_meta(COMPLETED_META, str(cid).encode())
        except BackendError as exc:
            log.warning("cannot persist the completed checkpoint id %d: %s; no sink is "
                        "told to commit it", cid, exc)
            return exc
        self.floor_stored(cid)
        return None

    def floor_stored(self, cid: int) -> None:
        """``cid`` is stored as the completed floor (here, or by a recovery)."""
        self.persisted_floor = max(self.persisted_floor, cid)

    def garbage_collect(self) -> None:
        """BackendIO thread: retention (``retention_steps.perform``, which the simulator's
        TM runs too); status stops offering what it deleted."""
        perform_retention(self.coordinator, self.host.config.checkpoints_retained,
                          _RetentionPort(self))


class _IdsRecordPort:
    """How the TM stores its ids record
    (:class:`~jstormpy.master.ids_record_steps.IdsRecordPort`): on its BackendIO thread; a
    failure is logged."""

    def __init__(self, checkpoints: MasterCheckpoints) -> None:
        self.checkpoints = checkpoints

    def locked(self) -> AbstractContextManager[Any]:
        return self.checkpoints.host.lock

    def on_storage(self, step: Callable[[], None]) -> None:
        self.checkpoints.backend_io.submit(step)

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        try:
            self.checkpoints.backend.put_meta(CHECKPOINT_IDS_META, ids)
        except BackendError as exc:
            then(exc)
            return
        then(None)

    def not_stored(self, why: str, error: BaseException) -> None:
        log.warning("cannot store the checkpoint ids record (%s): %s", why, error)


class _RetentionPort:
    """How the TM performs retention
    (:class:`~jstormpy.master.retention_steps.RetentionPort`): on its BackendIO thread; a
    failure is logged (the next completed checkpoint collects again)."""

    def __init__(self, checkpoints: MasterCheckpoints) -> None:
        self.checkpoints = checkpoints

    def locked(self) -> AbstractContextManager[Any]:
        return self.checkpoints.host.lock

    def garbage_collect(self, keep: int, bad: Collection[int], upto: int,
                        then: Callable[[Sequence[int] | None, BaseException | None],
                                       None]) -> None:
        try:
            deleted = self.checkpoints.backend.garbage_collect(keep, bad, upto)
        except BackendError as exc:
            log.warning("checkpoint garbage collection failed: %s", exc)
            then(None, exc)
            return
        then(deleted, None)


class _CommitPort:
    """How the TM performs the commit path's steps
    (:class:`~jstormpy.master.commit_point.CommitPort`): on its BackendIO thread,
    answering each at once."""

    def __init__(self, checkpoints: MasterCheckpoints) -> None:
        self.checkpoints = checkpoints

    def check_fence(self, checkpoint_id: int, moment: FenceMoment,
                    then: Callable[[bool], None]) -> None:
        then(self.checkpoints.host.check_fenced(checkpoint_id, moment.value))

    def create_commit_point(self, checkpoint_id: int, metadata: Mapping[str, Any],
                            then: Callable[[BackendError | None], None]) -> None:
        try:
            self.checkpoints.backend.create_metadata(checkpoint_id, dict(metadata))
        except BackendError as exc:  # create-only: one that exists is not replaced
            then(exc)
            return
        then(None)

    def store_floor(self, checkpoint_id: int,
                    then: Callable[[BackendError | None], None]) -> None:
        # in the same job: FIFO keeps the floor's writes in id order
        then(self.checkpoints.persist_completed_floor(checkpoint_id))


class _CoordinatorPort:
    """How the TM performs the coordinator's actions
    (:class:`~jstormpy.master.coordinator_driver.CoordinatorPort`): commands on the
    workers' control streams, backend writes on its backend-I/O thread."""

    def __init__(self, checkpoints: MasterCheckpoints) -> None:
        self.checkpoints = checkpoints
        self.host = checkpoints.host

    def stopped(self) -> bool:
        return False  # a TM that stops ends its process: nothing performs after it

    def send_trigger(self, action: SendTrigger) -> None:
        self.host.broadcast(trigger=pb.TriggerCheckpoint(
            checkpoint_id=action.checkpoint_id, generation=action.generation,
            pause=action.pause))

    def write_commit_point(self, action: WriteCommitPoint) -> None:
        checkpoints = self.checkpoints
        checkpoints.backend_io.submit(lambda: checkpoints.write_commit_point(action))

    def send_complete(self, action: SendComplete) -> None:
        self.host.broadcast(complete=pb.CompleteCheckpoint(
            checkpoint_id=action.checkpoint_id, generation=action.generation))

    def send_abort(self, action: SendAbort) -> None:
        log.warning("checkpoint %d aborted: %s", action.checkpoint_id, action.reason)
        self.host.broadcast(abort=pb.AbortCheckpoint(
            checkpoint_id=action.checkpoint_id, generation=action.generation,
            reason=action.reason))

    def collect_garbage(self, action: CollectGarbage) -> None:
        checkpoints = self.checkpoints
        if checkpoints.stateful:
            checkpoints.backend_io.submit(checkpoints.garbage_collect)

    def trigger_final(self, action: TriggerFinal) -> None:
        self.checkpoints.maybe_final_checkpoint()

    def drained(self, action: Drained) -> None:
        if not self.checkpoints.stateful:
            self._declare_drained(action)
            return
        # the final checkpoint's retention went to the backend thread when it completed:
        # the run is drained after it (FIFO), so a finished run leaves no shared file that
        # its retained checkpoints do not reference (a run's last compaction's leftovers)
        self.checkpoints.backend_io.submit(lambda: self._drained_after_retention(action))

    def _drained_after_retention(self, action: Drained) -> None:
        """Backend thread: every state-backend job queued before the drain is done."""
        with self.host.lock:
            self._declare_drained(action)

    def _declare_drained(self, action: Drained) -> None:
        host = self.host
        if host.state == TopologyState.RUNNING:
            log.info("topology %s drained at checkpoint %d", self.checkpoints.name,
                     action.checkpoint_id)
            host.set_state(TopologyState.DRAINED)
            host.broadcast(shutdown=pb.Shutdown(reason="drained"))

    def start_recovery(self, action: StartRecovery) -> None:
        self.host.begin_recovery(action.reason)
