"""The one commit path: its steps, its driver and its outcome.

Every commit point a Topology Master writes -- a periodic checkpoint's and a rescale's --
goes through one step list (:meth:`CommitPoint.steps`): fenced before the write, stamped
with the TM's run identity and epoch, created and never replaced
(``StateBackend.create_metadata``), fenced again after the write, then stored as the
completed floor. :func:`perform` is the one driver; ``MasterCore`` (its BackendIO thread,
synchronously) and the simulator's TM (on simulated storage, asynchronously) are each a
:class:`CommitPort`. The caller learns which steps it got through from a
:class:`CommitOutcome`, and :func:`report` turns that into the coordinator's next
actions (docs/checkpointing.md, "The one commit path").

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from jstormpy.api.errors import BackendError, BackendTimeoutError, ObjectExistsError
from jstormpy.master.coordinator import CheckpointCoordinator, CoordinatorAction


class CommitStatus(StrEnum):
    """How far a commit point got."""

    CREATED = "created"
    """The commit point and the completed floor are stored: the checkpoint is complete."""
    FLOOR_NOT_STORED = "floor_not_stored"
    """The commit point is stored (the checkpoint is complete on storage) but the completed
    floor's write failed: no sink may be told to commit it before a floor covers it."""
    FAILED = "failed"
    """The commit point was not created (a write that timed out may still land)."""
    FENCED = "fenced"
    """A newer Topology Master leads (or this one's lease ran out): nothing more of this
    checkpoint happens here, and this TM stops committing for good."""


@dataclass(frozen=True)
class CommitOutcome:
    """The result of ``MasterCore.create_commit_point``."""

    status: CommitStatus
    error: BackendError | None = None

    @property
    def timed_out(self) -> bool:
        """The backend did not answer in time: the write may still land later."""
        return isinstance(self.error, BackendTimeoutError)

    @property
    def exists(self) -> bool:
        """A commit point under this id was there already (another writer's): it was
        neither replaced nor is it this TM's."""
        return isinstance(self.error, ObjectExistsError)


class FenceMoment(StrEnum):
    """When a commit path checks that this TM still leads (its lease, the stored epoch)."""

    BEFORE = "before its commit point"
    AFTER = "after its commit point"
    """After a write that landed: also checks no newer TM's epoch is stored."""
    AFTER_FAILURE = "when its commit point failed"
    """After a failed write: the lease alone (a deposed TM must not go on to write its
    ids record over the new leader's, issue 27)."""


@dataclass(frozen=True)
class CheckFence:
    """Stop (:attr:`CommitStatus.FENCED`) if a newer TM leads."""

    moment: FenceMoment


@dataclass(frozen=True)
class CreateCommitPoint:
    """Create the stamped metadata, create-only (``StateBackend.create_metadata``)."""

    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class StoreFloor:
    """Store the checkpoint as the completed floor (``meta/completed_checkpoint``)
    before any sink is told to commit it."""


CommitStep = CheckFence | CreateCommitPoint | StoreFloor


@dataclass(frozen=True)
class CommitPoint:
    """One commit point to write: checkpoint ``checkpoint_id`` with ``metadata``, by a TM
    whose run identity is ``run`` (None: unstamped) and whose completed floor stored so far
    is ``stored_floor``."""

    checkpoint_id: int
    metadata: Mapping[str, Any]
    run: Mapping[str, Any] | None = None
    stored_floor: int = 0
    _stamped: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        stamped = dict(self.metadata)
        if self.run is not None:  # which run, and which TM epoch, committed it
            stamped["run"] = dict(self.run)
        object.__setattr__(self, "_stamped", stamped)

    def steps(self) -> list[CommitStep]:
        """The steps, in their one order. A failed create skips to the fence check (with
        :attr:`FenceMoment.AFTER_FAILURE`) and ends there; a floor stored already (a
        restore of this checkpoint or a newer one) is not stored again."""
        out: list[CommitStep] = [CheckFence(FenceMoment.BEFORE),
                                 CreateCommitPoint(self._stamped),
                                 CheckFence(FenceMoment.AFTER)]
        if self.checkpoint_id > self.stored_floor:
            out.append(StoreFloor())
        return out


class CommitPort(Protocol):
    """How a runtime performs a commit path's steps. Each answers through ``then``, at
    once (production's BackendIO thread) or later (the simulator's storage events); a port
    whose TM died meanwhile never answers, and the path ends there."""

    def check_fence(self, checkpoint_id: int, moment: FenceMoment,
                    then: Callable[[bool], None]) -> None:
        """``then(True)`` if this TM is fenced (it stops committing for good)."""

    def create_commit_point(self, checkpoint_id: int, metadata: Mapping[str, Any],
                            then: Callable[[BackendError | None], None]) -> None:
        """Create the commit point; ``then(error)``."""

    def store_floor(self, checkpoint_id: int,
                    then: Callable[[BackendError | None], None]) -> None:
        """Store the completed floor; ``then(error)``."""


def perform(commit: CommitPoint, port: CommitPort,
            done: Callable[[CommitOutcome], None]) -> None:
    """The one driver: ``commit``'s steps through ``port``, then ``done(outcome)``."""
    steps = commit.steps()
    cid = commit.checkpoint_id

    def step(i: int, error: BackendError | None) -> None:
        if i == len(steps):
            done(CommitOutcome(CommitStatus.CREATED))
            return
        match steps[i]:
            case CheckFence(moment):
                if error is not None:
                    moment = FenceMoment.AFTER_FAILURE

                def fenced(yes: bool) -> None:
                    if yes:
                        done(CommitOutcome(CommitStatus.FENCED, error))
                    elif error is not None:
                        done(CommitOutcome(CommitStatus.FAILED, error))
                    else:
                        step(i + 1, None)
                port.check_fence(cid, moment, fenced)
            case CreateCommitPoint(metadata):
                port.create_commit_point(cid, metadata, lambda e: step(i + 1, e))
            case StoreFloor():
                def stored(e: BackendError | None) -> None:
                    if e is not None:
                        done(CommitOutcome(CommitStatus.FLOOR_NOT_STORED, e))
                    else:
                        step(i + 1, None)
                port.store_floor(cid, stored)
    step(0, None)


def report(coordinator: CheckpointCoordinator, checkpoint_id: int, outcome: CommitOutcome,
           running: bool, now: float, wall_now: float) -> list[CoordinatorAction]:
    """The coordinator's answer to a periodic checkpoint's commit outcome (not FENCED):
    complete it (the sinks commit), hold it until a floor covers it, or mark it failed."""
    match outcome.status:
        case CommitStatus.CREATED:
            return coordinator.commit_point_written(checkpoint_id, running, now, wall_now)
        case CommitStatus.FLOOR_NOT_STORED:  # no sink commits what a floor misses
            return coordinator.floor_not_stored(checkpoint_id, str(outcome.error),
                                                outcome.timed_out, now)
        case _:
            return coordinator.commit_point_failed(checkpoint_id, str(outcome.error),
                                                   outcome.timed_out, now)
