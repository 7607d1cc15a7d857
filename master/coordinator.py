"""The Topology Master's checkpoint coordinator, free of I/O: events in, actions out.

:class:`CheckpointCoordinator` is Flink's ``CheckpointCoordinator`` for jstormpy: it
allocates checkpoint ids, tracks the checkpoints in flight and the acks of every task,
decides the commit point, completes, aborts and times out checkpoints, counts timeouts
toward a recovery, and knows when the topology has drained. It holds no lock, socket,
thread or clock: every event takes the time as an argument and returns the
:data:`CoordinatorAction` s to perform, in order. :class:`~jstormpy.master.core.MasterCore`
performs them (messages to workers, the metadata write on its backend thread, a
recovery) under its lock; the deterministic simulator performs them against simulated
workers and storage.

The steps, as ``docs/checkpointing.md`` lists them:

1. :meth:`start` allocates id ``n`` above every id handed out before (and above
   :attr:`id_floor`, every id a sink may have seen) and asks for ``SendTrigger(n)``.
2. :meth:`ack` records each task's ack of ``n`` for the current generation; the last one
   asks for ``WriteCommitPoint(n, metadata)`` (``at_most_once``: straight to complete).
3. :meth:`commit_point_written` is the commit point: ``n`` is complete. The performer
   reports it only once ``n`` is also stored as the completed floor, so that no sink
   commits output a restarted TM's floor does not cover. It asks for
   ``SendComplete(n)`` and ``CollectGarbage``; if every spout's ack said "finished" it
   waits for every sink's commit of ``n`` (:meth:`sink_committed`), then ``Drained``.
   A floor that could not be stored is :meth:`floor_not_stored`: ``n`` is complete on
   storage but no sink is told so (the next completed checkpoint commits its output).
4. :meth:`commit_point_failed` marks ``n`` bad (a write that timed out may still land:
   never restore from it) and aborts it; a backend timeout counts like a checkpoint
   timeout. A checkpoint a recovery restored (:meth:`recovery_resolved`) is complete
   whatever a late timeout says: it is never marked bad.
5. :meth:`task_failed` and :meth:`expire` abort; past ``tolerable_timeouts`` checkpoint
   timeouts in a row :meth:`expire` asks for ``StartRecovery``.

Every other commit point takes the same ids and the same path (docs/checkpointing.md,
"The one commit path"): a rescale's checkpoint and a savepoint import get their id from
:meth:`allocate_id`; a rescale's stored commit point is :meth:`adopt_layout`, a failed
one :meth:`mark_bad`. The ids, floors and bad checkpoints are private: read-only
properties outside, changed only by these events.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jstormpy.api.errors import CheckpointError
from jstormpy.metrics import (
    CHECKPOINT_BUCKETS_MS,
    PAUSE_MS,
    TASK_PAUSE_MS,
    CumulativeHistogram,
)

HISTORY = 200
"""How many checkpoints :attr:`CheckpointCoordinator.history` keeps."""

BAD_KEPT = 1000
"""How many of the newest bad checkpoint ids :meth:`CheckpointCoordinator.ids_record`
keeps (a run with more failed commit points than this has long since retained newer
checkpoints; the id floor is kept whole)."""
EPOCHS_KEPT = 100
"""How many of the newest epochs' restores the ids record keeps (a commit point that
lands late comes from one of the last few Topology Masters)."""

ID_RESERVATION = 100
"""How many checkpoint ids above the stored ids record a Topology Master may hand out:
a resumed TM starts above the record's reservation, so it never reuses an id whose commit
point a dead predecessor may still land late (simulator seed 5646). A new record is
stored when half of it is used (:meth:`CheckpointCoordinator.needs_ids_record`)."""


# -- actions --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SendTrigger:
    """Tell every spout task to take checkpoint ``checkpoint_id`` (``pause``: and stop
    after its barrier, the cut of a gray release or rescale)."""

    checkpoint_id: int
    generation: int
    pause: bool = False


@dataclass(frozen=True)
class WriteCommitPoint:
    """Write ``chk-n/_metadata`` atomically, then store ``n`` as the completed floor
    (``meta/completed_checkpoint``), then report :meth:`commit_point_written`; or
    :meth:`commit_point_failed` (the metadata write failed), or
    :meth:`floor_not_stored` (the metadata landed, the floor's write failed). The floor
    is stored before ``SendComplete``: a sink that committed ``n`` under a stored floor
    below ``n`` let a restarted TM with a short listing restore below it."""

    checkpoint_id: int
    generation: int
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class SendComplete:
    """Tell every task that ``checkpoint_id`` is complete (sinks commit)."""

    checkpoint_id: int
    generation: int


@dataclass(frozen=True)
class SendAbort:
    """Tell every task that ``checkpoint_id`` was given up."""

    checkpoint_id: int
    generation: int
    reason: str


@dataclass(frozen=True)
class CollectGarbage:
    """Delete all but the newest retained checkpoints; report :meth:`retention_deleted`."""


@dataclass(frozen=True)
class TriggerFinal:
    """A checkpoint finished while every spout may have finished: the performer starts the
    final checkpoint now if the topology is still running and every spout has finished."""


@dataclass(frozen=True)
class Drained:
    """Every spout finished, checkpoint ``checkpoint_id`` covers it and every sink
    committed it: the topology is drained."""

    checkpoint_id: int


@dataclass(frozen=True)
class StartRecovery:
    """Roll back to the last completed checkpoint in a new generation."""

    reason: str


CoordinatorAction = (SendTrigger | WriteCommitPoint | SendComplete | SendAbort |
                     CollectGarbage | TriggerFinal | Drained | StartRecovery)


@dataclass(frozen=True)
class TaskAck:
    """One task's ack of a checkpoint: its snapshot handle and what the TM reports."""

    task_id: int
    handle: str
    size_bytes: int
    finished: bool
    alignment_ms: float
    pause_ms: float = 0.0
    """How long the checkpoint stopped the task's thread (:data:`jstormpy.metrics.
    PAUSE_MS`)."""


@dataclass
class PendingCheckpoint:
    """A checkpoint in flight."""

    checkpoint_id: int
    generation: int
    started: float
    started_wall: float
    acks: dict[int, TaskAck] = field(default_factory=dict)
    alignment_ms: float = 0.0

    def task_pauses(self) -> dict[str, float]:
        """Task id (as a JSON key) -> its task-thread pause (ms), of the acks so far."""
        return {str(t): round(a.pause_ms, 2) for t, a in sorted(self.acks.items())}


class CheckpointCoordinator:
    """Checkpoint ids, the checkpoints in flight and completed, and the drain.

    Args:
        stateful: False under ``at_most_once``: no commit point is written.
        max_concurrent: ``Config.max_concurrent_checkpoints``.
        timeout_s: ``Config.checkpoint_timeout_ms`` in seconds.
        tolerable_timeouts: ``Config.tolerable_failed_checkpoints``.
    """

    def __init__(self, *, stateful: bool, max_concurrent: int, timeout_s: float,
                 tolerable_timeouts: int) -> None:
        self.stateful = stateful
        self.max_concurrent = max_concurrent
        self.timeout_s = timeout_s
        self.tolerable_timeouts = tolerable_timeouts
        self.generation = 0
        # the coordinator's ids, floors and bad checkpoints are private: they change only
        # through its events (allocate_id, mark_bad, adopt_layout, note_trigger, ...), so
        # every commit point -- a periodic checkpoint, a rescale, a restore -- follows one
        # path (issue 35; tests/unit/test_one_commit_path.py walks the package for writes)
        self._next_id = 1
        self.inflight: dict[int, PendingCheckpoint] = {}
        # every task acked; the commit point (metadata) is being written
        self.committing: dict[int, PendingCheckpoint] = {}
        # the highest id any sink may have seen: ids after a recovery stay above it, so a
        # fallback to an older checkpoint never reuses a committed transaction's id
        self._id_floor = 0
        # the newest checkpoint this run saw complete: a recovery never restores below it
        # because a listing came back short (issue 23, hole 1)
        self._completed_floor = 0
        self._bad: set[int] = set()  # never restore from these
        # epoch -> the lowest checkpoint that Topology Master epoch restored: a commit
        # point of an older epoch above it landed after the sinks were rolled back past it
        # (a deposed or dead TM's late write): never restored (RestorePlan, issue 27)
        self._epoch_starts: dict[int, int] = {}
        # the highest id a stored ids record reserves: no checkpoint starts above it
        self._ids_reserved = 0
        # the first checkpoint of the running layout (a rescale's): none older restores
        self._layout_floor = 0
        # checkpoints a recovery restored: sinks may have committed them again, so they
        # are complete whatever a late report of their metadata write says
        self.restored: set[int] = set()
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.durations = CumulativeHistogram(CHECKPOINT_BUCKETS_MS)
        self.last_completed: dict[str, Any] | None = None
        self.timed_out_in_a_row = 0
        self.final_checkpoint: int | None = None
        self.commits_needed: set[int] = set()
        self._last_trigger = 0.0
        # when the last checkpoint ended (completed, failed, timed out): the minimum
        # pause counts from it
        self._last_ended = float("-inf")
        self.all_tasks: list[int] = []
        self.spout_tasks: list[int] = []
        self.sink_tasks: list[int] = []
        self.task_component: dict[int, str] = {}

    # -- read-only views of the private state ----------------------------------------------
    @property
    def next_id(self) -> int:
        """The id :meth:`allocate_id` hands out next."""
        return self._next_id

    @property
    def id_floor(self) -> int:
        """The highest id any sink may have seen (or a commit point may carry)."""
        return self._id_floor

    @property
    def completed_floor(self) -> int:
        """The newest checkpoint this run saw complete."""
        return self._completed_floor

    @property
    def bad(self) -> frozenset[int]:
        """The checkpoints never to restore from."""
        return frozenset(self._bad)

    @property
    def epoch_starts(self) -> Mapping[int, int]:
        """Topology Master epoch -> the lowest checkpoint it restored."""
        return MappingProxyType(self._epoch_starts)

    @property
    def ids_reserved(self) -> int:
        """The highest id a stored ids record reserves."""
        return self._ids_reserved

    @property
    def layout_floor(self) -> int:
        """The first checkpoint of the running layout (0: never rescaled)."""
        return self._layout_floor

    @property
    def last_trigger(self) -> float:
        """When the last checkpoint was triggered (or the schedule last restarted)."""
        return self._last_trigger

    # -- layout and generations ------------------------------------------------------------
    def set_layout(self, task_component: Mapping[int, str], spout_tasks: Iterable[int],
                   sink_tasks: Iterable[int]) -> None:
        """The tasks that must ack (again after a rescale)."""
        self.task_component = dict(task_component)
        self.all_tasks = sorted(self.task_component)
        self.spout_tasks = sorted(spout_tasks)
        self.sink_tasks = sorted(sink_tasks)

    def new_generation(self, generation: int) -> None:
        """A recovery began: checkpoints in flight are void, the drain starts over."""
        self.generation = generation
        self.inflight.clear()
        self.final_checkpoint = None
        self.commits_needed = set()

    def resume_after(self, base: int, now: float) -> None:
        """The generation runs: the next checkpoint id is ``base + 1``."""
        self._next_id = base + 1
        self._last_trigger = now

    def note_trigger(self, now: float) -> None:
        """The periodic checkpoint schedule starts over at ``now`` (a TM starting, a gray
        release resuming its spouts)."""
        self._last_trigger = now

    def adopt_layout(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is the first of the running layout: its commit point
        is stored (a rescale's, or one a TM finds in ``rescale.json`` at start), so ids stay
        above it, no recovery goes below it, and no older checkpoint restores."""
        self._layout_floor = max(self._layout_floor, checkpoint_id)
        self._id_floor = max(self._id_floor, checkpoint_id)
        self._completed_floor = max(self._completed_floor, checkpoint_id)

    def adopt_completed_floor(self, checkpoint_id: int) -> None:
        """A resumed TM read ``checkpoint_id`` as the stored completed floor."""
        self._completed_floor = max(self._completed_floor, checkpoint_id)

    def ids_seen(self, checkpoint_ids: Iterable[int]) -> None:
        """Checkpoints with these ids exist (a listing): ids stay above them."""
        self._id_floor = max([self._id_floor, *checkpoint_ids])

    def mark_bad(self, checkpoint_id: int) -> None:
        """Never restore ``checkpoint_id`` (its commit point failed or may land late, its
        metadata or a snapshot is unusable), nor hand its id out again."""
        self._bad.add(checkpoint_id)
        self._id_floor = max(self._id_floor, checkpoint_id)

    def busy(self) -> int:
        """Checkpoints in flight or whose commit point is being written."""
        return len(self.inflight) + len(self.committing)

    def may_start(self, force: bool = False) -> bool:
        """Whether :meth:`start` stays within ``max_concurrent`` (or is forced) and within
        the ids a stored ids record reserves (never forced)."""
        if not self.may_allocate():
            return False
        return force or self.busy() < self.max_concurrent

    def may_allocate(self) -> bool:
        """Whether :meth:`allocate_id` has a reserved id to hand out."""
        return not self.stateful or self._next_id <= self._ids_reserved

    def final_may_start(self, spouts_finished: bool) -> bool:
        """Whether the final checkpoint of a bounded run may start now: every spout finished
        (``spouts_finished``, the performer's view), none was taken yet, an id is reserved,
        and no checkpoint in flight can itself be the final one.

        A checkpoint in flight is the final one if every spout's ack of it says its end of
        input precedes the barrier (:meth:`_finished`); a spout that has not acked it yet
        may still say so. Once every spout acked it and one said "not finished", it cannot
        be: the final checkpoint starts beside it at once (beyond ``max_concurrent``), its
        barriers behind the in-flight one's on every channel, so every task snapshots and
        acks the two in id order and their commit points are written in id order. It used
        to wait for the in-flight one to complete (issue 36: 60-100 ms of a bounded run's
        end, a periodic checkpoint's whole duration under load)."""
        if self.final_checkpoint is not None or not spouts_finished \
                or not self.may_allocate():
            return False
        for pending in (*self.inflight.values(), *self.committing.values()):
            if any(t not in pending.acks for t in self.spout_tasks) \
                    or self._finished(pending):
                return False  # it may be, or is, the final checkpoint: wait for it
        return True

    def due(self, now: float, interval_s: float, min_pause_s: float = 0.0) -> bool:
        """Whether the next periodic checkpoint is due: ``interval_s`` since the last
        trigger and ``min_pause_s`` since the last checkpoint ended
        (``Config.min_pause_between_checkpoints_ms``)."""
        return (now - self._last_trigger >= interval_s
                and now - self._last_ended >= min_pause_s)

    def needs_ids_record(self) -> bool:
        """Half of the reserved ids are used: the performer stores a new
        :meth:`ids_record` (and reports :meth:`ids_record_stored`)."""
        return self.stateful and self._next_id + ID_RESERVATION // 2 > self._ids_reserved

    def allocate_id(self) -> int:
        """The one way a checkpoint id is handed out: a periodic checkpoint's
        (:meth:`start`), a rescale's, a savepoint import's. The id is above every id handed
        out or known before and within the reservation of a stored ids record, so no
        Topology Master -- this one restarted, a standby, a dead predecessor whose commit
        point lands late -- ever uses it too.

        Raises:
            CheckpointError: No stored ids record reserves the next id (store one first:
                :meth:`ids_record`, :meth:`ids_record_stored`).
        """
        if not self.may_allocate():
            raise CheckpointError(
                f"checkpoint id {self._next_id} is not reserved by a stored checkpoint ids "
                f"record (reserved up to {self._ids_reserved}); store the ids record first")
        cid = self._next_id
        self._next_id += 1
        # its barrier stages a transaction in every sink under this id, whether or not the
        # checkpoint completes: a recovery's ids go above it, so a run never stages two
        # transactions under one id (PostgreSQL/Redis sinks record the ids a recovery
        # discarded, and refuse to pass one as committed: simulator seed 570163)
        self._id_floor = max(self._id_floor, cid)
        return cid

    # -- events ----------------------------------------------------------------------------
    def start(self, now: float, wall: float, pause: bool = False) -> tuple[int, list[
            CoordinatorAction]]:
        """Start the next checkpoint; returns its id and the trigger to send."""
        cid = self.allocate_id()
        self.inflight[cid] = PendingCheckpoint(cid, self.generation, now, wall)
        self._last_trigger = now
        return cid, [SendTrigger(cid, self.generation, pause)]

    def ack(self, generation: int, checkpoint_id: int, ack: TaskAck, now: float,
            wall: float) -> list[CoordinatorAction]:
        """A task snapshotted for ``checkpoint_id``."""
        pending = self.inflight.get(checkpoint_id)
        if pending is None or generation != self.generation:
            return []
        pending.acks[ack.task_id] = ack
        pending.alignment_ms = max(pending.alignment_ms, ack.alignment_ms)
        if len(pending.acks) < len(self.all_tasks):
            return []
        del self.inflight[checkpoint_id]
        size = sum(a.size_bytes for a in pending.acks.values())
        if not self.stateful:
            return self._completed(pending, self._finished(pending), size, now, wall)
        self.committing[checkpoint_id] = pending
        meta = {"generation": pending.generation,
                "tasks": {str(t): {"handle": a.handle, "size": a.size_bytes}
                          for t, a in pending.acks.items()},
                "spouts_finished": self._finished(pending), "size_bytes": size,
                "completed_at": wall, "duration_ms": (now - pending.started) * 1000}
        return [WriteCommitPoint(checkpoint_id, pending.generation, meta)]

    def task_failed(self, generation: int, checkpoint_id: int, task_id: int, reason: str,
                    now: float) -> list[CoordinatorAction]:
        """A task could not snapshot: abort that checkpoint, keep running."""
        if generation != self.generation:  # a late report of a void generation
            return []
        pending = self.inflight.pop(checkpoint_id, None)
        if pending is None:
            return []
        self._record(pending, "failed", now, f"task {task_id}: {reason}")
        return [SendAbort(checkpoint_id, self.generation, reason)]

    def commit_point_written(self, checkpoint_id: int, running: bool, now: float,
                             wall: float) -> list[CoordinatorAction]:
        """The metadata of ``checkpoint_id`` is on storage: it is complete. ``running``:
        the topology still runs (no recovery began meanwhile)."""
        pending = self.committing.pop(checkpoint_id, None)
        if pending is None:
            return []
        self._id_floor = max(self._id_floor, checkpoint_id)
        self._completed_floor = max(self._completed_floor, checkpoint_id)
        if pending.generation != self.generation or not running:
            return []  # complete on storage; the recovery under way lists it
        size = sum(a.size_bytes for a in pending.acks.values())
        return self._completed(pending, self._finished(pending), size, now, wall)

    def commit_point_failed(self, checkpoint_id: int, error: str, timed_out: bool,
                            now: float) -> list[CoordinatorAction]:
        """The metadata write of ``checkpoint_id`` failed (``timed_out``: the backend did
        not answer in time, so the write may still land later)."""
        pending = self.committing.pop(checkpoint_id, None)
        if pending is None:
            return []
        self._id_floor = max(self._id_floor, checkpoint_id)  # its id is never reused
        if not (timed_out and checkpoint_id in self.restored):
            # whether or not it lands: never restore from it. Unless a recovery already
            # restored it: the write landed, sinks committed it again, and falling back
            # below it would emit that output twice (issue 23, simulator seed 22619)
            self._bad.add(checkpoint_id)
        if pending.generation != self.generation:
            return []
        self._record(pending, "failed", now, f"metadata write failed: {error}")
        actions: list[CoordinatorAction] = [
            SendAbort(checkpoint_id, self.generation, f"metadata write failed: {error}")]
        if timed_out:
            actions += self._count_timeout(checkpoint_id,
                                           f"the state backend did not answer: {error}")
        return actions

    def floor_not_stored(self, checkpoint_id: int, error: str, timed_out: bool,
                         now: float) -> list[CoordinatorAction]:
        """``checkpoint_id``'s metadata landed but storing it as the completed floor failed
        (``timed_out``: the backend did not answer in time). It is complete on storage, so
        ids stay above it and a recovery never goes below it (it is not bad: a restore of
        it stores the floor first), but no sink is told to commit it: a restarted TM would
        read the older floor and could restore below that output (simulator seeds 167056,
        249419, ...). It is aborted; the next completed checkpoint commits its output."""
        pending = self.committing.pop(checkpoint_id, None)
        if pending is None:
            return []
        self._id_floor = max(self._id_floor, checkpoint_id)
        self._completed_floor = max(self._completed_floor, checkpoint_id)
        if pending.generation != self.generation:
            return []
        reason = f"completed floor not stored: {error}"
        self._record(pending, "failed", now, reason)
        actions: list[CoordinatorAction] = [SendAbort(checkpoint_id, self.generation, reason)]
        if timed_out:
            actions += self._count_timeout(checkpoint_id,
                                           f"the state backend did not answer: {error}")
        return actions

    def expire(self, now: float) -> list[CoordinatorAction]:
        """Abort checkpoints in flight longer than the timeout; past the tolerance the
        last action is a :class:`StartRecovery`."""
        actions: list[CoordinatorAction] = []
        for cid, pending in list(self.inflight.items()):
            if now - pending.started <= self.timeout_s:
                continue
            del self.inflight[cid]
            stalled = self.stalled_tasks(pending)
            self._record(pending, "timed_out", now,
                         f"{len(pending.acks)}/{len(self.all_tasks)} tasks acked; "
                         f"stalled: {stalled}")
            actions.append(SendAbort(cid, self.generation, "timeout"))
            recovery = self._count_timeout(cid, f"stalled: {stalled}")
            if recovery:
                return actions + recovery
        return actions

    def abort_all(self, reason: str, now: float) -> list[CoordinatorAction]:
        """Give up every checkpoint in flight (``at_most_once`` lost a worker: its tasks'
        acks never come)."""
        actions: list[CoordinatorAction] = []
        for cid, pending in list(self.inflight.items()):
            del self.inflight[cid]
            self._record(pending, "failed", now, reason)
            actions.append(SendAbort(cid, self.generation, reason))
        return actions

    def sink_committed(self, generation: int, checkpoint_id: int,
                       task_id: int) -> list[CoordinatorAction]:
        """A sink task made ``checkpoint_id``'s output visible."""
        if generation != self.generation or self.final_checkpoint is None \
                or checkpoint_id < self.final_checkpoint:
            return []
        self.commits_needed.discard(task_id)
        return self._maybe_drained()

    def ids_record(self) -> bytes:
        """What a restarted TM must know of this one's checkpoint ids (the backend's
        ``meta/checkpoint_ids``): the id floor, the bad checkpoints, the ids reserved
        (:data:`ID_RESERVATION` above every id handed out or known) and each epoch's lowest
        restored checkpoint (:attr:`epoch_starts`)."""
        reserved = max(self._id_floor, self._next_id - 1) + ID_RESERVATION
        epochs = sorted(self._epoch_starts)[-EPOCHS_KEPT:]
        return json.dumps({"id_floor": self._id_floor, "bad": sorted(self._bad)[-BAD_KEPT:],
                           "reserved": reserved,
                           "epochs": {str(e): self._epoch_starts[e] for e in epochs}}).encode()

    def ids_record_stored(self, data: bytes) -> None:
        """The performer stored ``data``, an :meth:`ids_record` of this coordinator: ids up
        to its reservation may be handed out."""
        self._ids_reserved = max(self._ids_reserved, int(json.loads(data)["reserved"]))

    def epoch_started(self, epoch: int, restored: int) -> int | None:
        """Topology Master epoch ``epoch`` restores ``restored`` (0: nothing): no commit
        point of an older epoch above it counts. The performer stores the :meth:`ids_record`
        saying so before any Prepare; if that fails it reports
        :meth:`epoch_start_not_stored` with the returned earlier value (None: none)."""
        before = self._epoch_starts.get(epoch)
        self._epoch_starts[epoch] = min(restored, before if before is not None else restored)
        return before

    def epoch_start_not_stored(self, epoch: int, before: int | None) -> None:
        """The ids record of :meth:`epoch_started` was not stored: forget it (the next
        attempt stores it again)."""
        if before is None:
            self._epoch_starts.pop(epoch, None)
        else:
            self._epoch_starts[epoch] = before

    def adopt_ids_record(self, data: bytes) -> None:
        """A resumed TM starts from a predecessor's :meth:`ids_record`: ids stay above
        its floor and its reservation (the predecessor may have handed out any of those
        ids, and a commit point of one may land late), and its bad checkpoints are never
        restored.

        Raises:
            ValueError: ``data`` is not such a record.
        """
        try:
            record = json.loads(data)
            id_floor, bad = int(record["id_floor"]), {int(c) for c in record["bad"]}
            epochs = {int(e): int(c) for e, c in record.get("epochs", {}).items()}
            id_floor = max(id_floor, int(record.get("reserved", 0)))
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed checkpoint ids record {data[:80]!r}: {exc}") from exc
        self._id_floor = max(self._id_floor, id_floor)
        self._bad |= bad - self.restored
        for epoch, restored in epochs.items():
            self.epoch_started(epoch, restored)

    def recovery_resolved(self, listing: Iterable[int], listing_ok: bool,
                          restored: int | None, present: Iterable[int] = ()) -> None:
        """A recovery's :class:`~jstormpy.master.restore_plan.RestorePlan` ended (any
        outcome): ``listing`` is what it listed (``listing_ok``: the listing succeeded, so
        every id in it has a commit point), ``restored`` the checkpoint the Prepares restore
        (None: none, or no Restore). Ids stay above the listing; if the recovery restores,
        the completed floor rises to the listing's checkpoints that are not bad and to the
        restored checkpoint, which is never bad from
        now on: sinks commit it again at the restore, so no later recovery may go below it.

        ``present``: every checkpoint the listing found objects of, complete or not. Ids
        stay above them too: a TM that died while writing one's commit point left that
        write with the backend, and a successor reusing the id would have its own commit
        point replaced when it lands (simulator seed 291464)."""
        ids = list(listing)
        self._id_floor = max([self._id_floor, *ids, *present])
        if listing_ok and restored is not None:
            # only a recovery that restores: one that ended otherwise (a checkpoint it read
            # was unusable) did not read the others it listed, and one may be a deposed
            # leader's late commit point that no sink committed (simulator seed 580: the
            # floor rose to one, which then made the plan refuse to restore empty state)
            # a bad checkpoint is listed once its timed-out write landed, yet it did not
            # complete: as a floor it would switch off the short-listing check below it
            # (simulator seed 36483: restored from nothing under committed output)
            self._completed_floor = max([self._completed_floor,
                                        *(c for c in ids if c not in self._bad)])
        if restored is not None:
            self._completed_floor = max(self._completed_floor, restored)
            self.restored.add(restored)
            self._bad.discard(restored)

    def retention_deleted(self, checkpoint_ids: Iterable[int]) -> None:
        """Retention deleted these checkpoints: they are no longer restorable."""
        deleted = set(checkpoint_ids)
        for entry in self.history:
            if entry["id"] in deleted and entry.get("retained"):
                entry["retained"] = False

    # -- helpers ---------------------------------------------------------------------------
    def stalled_tasks(self, pending: PendingCheckpoint) -> str:
        """The tasks that never acked ``pending``, by component name and task id."""
        missing = [t for t in self.all_tasks if t not in pending.acks]
        return ", ".join(f"{self.task_component.get(t, '?')}[task {t}]"
                         for t in missing) or "none"

    def _finished(self, pending: PendingCheckpoint) -> bool:
        """Every spout's ack says its end of stream precedes this checkpoint's barrier."""
        return bool(self.spout_tasks) and all(
            pending.acks[t].finished for t in self.spout_tasks if t in pending.acks)

    def _completed(self, pending: PendingCheckpoint, finished: bool, size: int, now: float,
                   wall: float) -> list[CoordinatorAction]:
        cid = pending.checkpoint_id
        self.timed_out_in_a_row = 0
        self.last_completed = self._record(pending, "completed", now, size=size)
        actions: list[CoordinatorAction] = [SendComplete(cid, self.generation)]
        if finished and self.final_checkpoint is None:
            self.final_checkpoint = cid
            self.commits_needed = set(self.sink_tasks)
            actions += self._maybe_drained()
        else:
            actions.append(TriggerFinal())  # spouts may have finished while it was in flight
        if self.stateful:
            actions.append(CollectGarbage())
        return actions

    def _maybe_drained(self) -> list[CoordinatorAction]:
        if self.final_checkpoint is not None and not self.commits_needed:
            return [Drained(self.final_checkpoint)]
        return []

    def _count_timeout(self, checkpoint_id: int, why: str) -> list[CoordinatorAction]:
        self.timed_out_in_a_row += 1
        if self.timed_out_in_a_row <= self.tolerable_timeouts:
            return []
        self.timed_out_in_a_row = 0
        tolerable = self.tolerable_timeouts
        return [StartRecovery(f"checkpoint {checkpoint_id} timed out, {tolerable + 1} "
                              f"timeout(s) in a row (tolerable_failed_checkpoints="
                              f"{tolerable}); {why}")]

    def _record(self, pending: PendingCheckpoint, status: str, now: float, error: str = "",
                size: int = 0) -> dict[str, Any]:
        duration_ms = round((now - pending.started) * 1000, 2)
        self._last_ended = now
        entry = {"id": pending.checkpoint_id, "generation": pending.generation,
                 "status": status, "started_at": pending.started_wall,
                 "duration_ms": duration_ms,
                 "alignment_ms": round(pending.alignment_ms, 2), "size_bytes": size,
                 PAUSE_MS: round(max((a.pause_ms for a in pending.acks.values()),
                                     default=0.0), 2),
                 TASK_PAUSE_MS: pending.task_pauses(),
                 "error": error,
                 # a completed checkpoint stays restorable until retention deletes it
                 "retained": status == "completed"}
        self.history.append(entry)
        if status == "completed":  # cumulative, unlike the bounded history
            self.durations.observe(duration_ms)
        return entry
