"""The task side of a snapshot, free of I/O: which generation it belongs to, and whether its
outcome may still be reported.

A task's snapshot is captured at the barrier on the task thread and uploaded later, off it
(``jstormpy/runtime/snapshots.py`` does the capture and serialisation, the task's
snapshot thread the upload). Between the two, a recovery may stop the task and the worker
may move on to a new generation. Two rules keep that from mixing timelines (issue 23,
hole 6):

* the snapshot belongs to its **barrier's generation**: the upload is written under that
  generation's key and the ack or failure names it, whenever the upload ends. The TM
  ignores reports of a void generation;
* a **stopped** task reports nothing: its checkpoint is void (the rollback replaced it),
  and a late failure report must not abort a checkpoint of the new generation.

:class:`TaskSnapshots` holds those rules for one task incarnation: :meth:`barrier` hands
out a :class:`SnapshotTicket`; :meth:`uploaded` / :meth:`failed` return the report to
send, or nothing. The executor performs the reports through its host; the deterministic
simulator through its simulated control channel.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SnapshotTicket:
    """One snapshot in flight: the barrier it was captured at and that barrier's
    generation (the key it is written under)."""

    checkpoint_id: int
    task_id: int
    generation: int


@dataclass(frozen=True)
class AckSnapshot:
    """Tell the TM the task's part of ``ticket``'s checkpoint is stored at ``handle``."""

    ticket: SnapshotTicket
    handle: str
    size_bytes: int


@dataclass(frozen=True)
class DeclineSnapshot:
    """Tell the TM the task could not snapshot for ``ticket``'s checkpoint."""

    ticket: SnapshotTicket
    reason: str


SnapshotReport = AckSnapshot | DeclineSnapshot


class TaskSnapshots:
    """The snapshots of one task incarnation between barrier and report."""

    def __init__(self, task_id: int) -> None:
        self.task_id = task_id
        self.stopped = False
        self.in_flight: set[SnapshotTicket] = set()

    def barrier(self, checkpoint_id: int, generation: int) -> SnapshotTicket:
        """The task captured its state at barrier ``checkpoint_id`` of ``generation``."""
        ticket = SnapshotTicket(checkpoint_id, self.task_id, generation)
        self.in_flight.add(ticket)
        return ticket

    def uploaded(self, ticket: SnapshotTicket, handle: str,
                 size_bytes: int) -> list[SnapshotReport]:
        """The upload of ``ticket`` is stored: ack it, unless the task was stopped."""
        self.in_flight.discard(ticket)
        if self.stopped:
            return []
        return [AckSnapshot(ticket, handle, size_bytes)]

    def failed(self, ticket: SnapshotTicket, reason: str) -> list[SnapshotReport]:
        """The capture or upload of ``ticket`` failed: decline it, unless the task was
        stopped (a late failure must not abort the next generation's checkpoint)."""
        self.in_flight.discard(ticket)
        if self.stopped:
            return []
        return [DeclineSnapshot(ticket, reason)]

    def stop(self) -> None:
        """The task was stopped (rollback or shutdown): nothing in flight is reported."""
        self.stopped = True
