"""A recovery's restore, performed: its one driver and its port.

:class:`~jstormpy.master.restore_plan.RestorePlan` decides what a recovery of generation
``g`` restores; this module performs that decision, in one order, for every runtime:

1. **storage steps** -- each action of the plan through the port, its answer back to the
   plan: the generation, then the ids record (before any worker is prepared: the sinks
   roll back past every bad checkpoint, so no later TM may restore one that lands late);
   the listing; the target's metadata (a damaged or missing one is unusable, a store that
   does not answer may hold a fine one); the epoch's restore in the ids record (taken
   back in the coordinator if it is not stored); the completed floor;
2. **settle** -- under the lock, and only while the recovery is still the one under way:
   an unusable checkpoint is marked bad before the coordinator learns the listing (its
   floor rises to it), then the coordinator learns what was listed and restored, then the
   outcome: wait and try again, fail the topology, recover again one checkpoint lower, or
   send the Prepares with the ids they resume after (:func:`prepare_ids`) -- or, when a
   worker is still to register, **hold**: nothing is sent and the coordinator learns
   nothing; the last registration performs the plan again, with its stores already
   made, and settles that one.

:func:`perform` is the one driver. ``MasterCore`` (its BackendIO thread, synchronously;
master/core.py) and the simulator's TM (simulated storage, asynchronously;
jstormpy/testing/simulation) are each a :class:`RecoveryPort`: storage calls, the lock,
whether the recovery is still current, and what each outcome does to their processes.

Around that driver, the recovery's two other decisions, shared the same way:
:func:`may_resolve` (when the restore may begin: no restore of this generation under
way, no commit point's outcome pending, the restart strategy's back-off over, and every
worker registered once one resolution was held: the stores run while the workers start)
and :func:`worker_ready` (a worker's answer to its Prepare: a corrupt snapshot marks the
target bad and recovers again without counting a restart, another failure is a failure,
and once every worker is ready the coordinator resumes above the prepared ids before any
Start goes out).

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from jstormpy.api.errors import CorruptSnapshotError, SnapshotNotFoundError
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.restore_plan import (
    ListCompleted,
    PersistEpochStart,
    PersistFloor,
    PersistGeneration,
    ReadMetadata,
    Refuse,
    Restore,
    RestoreAction,
    RestorePlan,
    RetryLater,
    Unusable,
    prepare_ids,
)

UNUSABLE_METADATA = (CorruptSnapshotError, SnapshotNotFoundError, KeyError, ValueError)
"""A metadata read that failed with one of these found a damaged or missing commit point:
the checkpoint is unusable. Any other error is a store that did not answer."""


@dataclass(frozen=True)
class Listing:
    """What a listing of the state backend found."""

    completed: Sequence[int]
    """``StateBackend.list_completed``."""
    present: Sequence[int]
    """``StateBackend.list_checkpoint_ids``: every checkpoint with objects in storage."""


@dataclass(frozen=True)
class Prepare:
    """Send every worker its Prepare: restore ``target`` (None: fresh state) from
    ``handles``; sinks recover to ``restored``, new checkpoint ids start above ``base``.
    ``listing``: what the recovery listed (empty if it made none), for the fallback's
    warning."""

    target: int | None
    handles: Mapping[int, str]
    restored: int
    base: int
    listing: Sequence[int]


class RecoveryPort(Protocol):
    """How a runtime performs a recovery's restore. Every storage call answers through
    ``then``, at once (production's BackendIO thread) or later (the simulator's storage
    events); a port whose TM died meanwhile never answers, and the recovery ends there."""

    def locked(self) -> AbstractContextManager[Any]:
        """The TM's lock: the coordinator is read and changed under it."""

    def current(self) -> bool:
        """The recovery is still the one under way (no newer generation began, the TM
        lives and is recovering). Called under :meth:`locked`."""

    def put_generation(self, generation: int,
                       then: Callable[[BaseException | None], None]) -> None:
        """Store the generation counter (``meta/generation``); ``then(error)``."""

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        """Store the coordinator's ids record (``meta/checkpoint_ids``); ``then(error)``."""

    def put_floor(self, checkpoint_id: int,
                  then: Callable[[BaseException | None], None]) -> None:
        """Store the completed floor (``meta/completed_checkpoint``); ``then(error)``."""

    def list_checkpoints(self,
                         then: Callable[[Listing | None, BaseException | None], None]) -> None:
        """List the completed checkpoints and those with objects; ``then(listing, error)``."""

    def read_metadata(self, checkpoint_id: int,
                      then: Callable[[Mapping[str, Any] | None, BaseException | None],
                                     None]) -> None:
        """Read a commit point; ``then(metadata, error)``."""

    def generation_stored(self, generation: int) -> None:
        """``generation`` and the ids record are stored (under :meth:`locked`)."""

    def may_prepare(self) -> bool:
        """Every worker of the plan is registered to the generation under way: its
        Prepares may go out now (under :meth:`locked`)."""

    def floor_stored(self, checkpoint_id: int) -> None:
        """``checkpoint_id`` is stored as the completed floor."""

    # -- the outcome, under locked() and while current() ------------------------------------
    def retry_later(self, reason: str) -> None:
        """No worker may be prepared now: try the restore again later."""

    def refuse(self, reason: str) -> None:
        """Fail the topology for good."""

    def recover_again(self, checkpoint_id: int, why: str) -> None:
        """Checkpoint ``checkpoint_id`` was unusable (``why``; it is marked bad): begin a
        new generation restoring the newest checkpoint below it."""

    def prepare(self, prepare: Prepare) -> None:
        """Send the Prepares."""

    def hold(self) -> None:
        """The restore is decided and everything it stores is stored, but a worker is
        still to register (:meth:`may_prepare` said no): send nothing. The registration
        that completes the set resolves the restore again (:func:`may_resolve`), then with
        nothing left to store, so that the decision the Prepares carry is made after it."""


def perform(plan: RestorePlan, coordinator: CheckpointCoordinator,
            port: RecoveryPort) -> None:
    """The one driver: ``plan``'s storage steps through ``port`` from its beginning, then
    its outcome (see the module's docstring)."""
    _step(plan, plan.begin(), coordinator, port)


def _step(plan: RestorePlan, actions: list[RestoreAction],
          coordinator: CheckpointCoordinator, port: RecoveryPort) -> None:
    with port.locked():
        if not port.current():
            return

    def go(more: list[RestoreAction]) -> None:
        _step(plan, more, coordinator, port)

    action = actions[0]
    match action:
        case PersistGeneration(generation):
            with port.locked():
                ids = coordinator.ids_record()

            def ids_stored(error: BaseException | None) -> None:
                if error is not None:
                    go(plan.generation_not_persisted(str(error)))
                    return
                with port.locked():
                    coordinator.ids_record_stored(ids)
                    port.generation_stored(generation)
                go(plan.generation_persisted())

            def generation_stored(error: BaseException | None) -> None:
                if error is not None:
                    go(plan.generation_not_persisted(str(error)))
                else:
                    port.put_ids_record(ids, ids_stored)
            port.put_generation(generation, generation_stored)
        case ListCompleted():
            def listed(listing: Listing | None, error: BaseException | None) -> None:
                if error is not None or listing is None:
                    go(plan.listing_failed(str(error)))
                else:
                    go(plan.listed(listing.completed, listing.present))
            port.list_checkpoints(listed)
        case ReadMetadata(cid):
            def read(metadata: Mapping[str, Any] | None, error: BaseException | None) -> None:
                if isinstance(error, UNUSABLE_METADATA):
                    go(plan.metadata_unusable(cid, str(error)))
                elif error is not None or metadata is None:
                    go(plan.metadata_failed(cid, str(error)))
                else:
                    go(plan.metadata_read(cid, metadata))
            port.read_metadata(cid, read)
        case PersistEpochStart(epoch, cid):
            with port.locked():
                before = coordinator.epoch_started(epoch, cid)
                ids = coordinator.ids_record()

            def start_stored(error: BaseException | None) -> None:
                if error is not None:
                    with port.locked():  # not stored: the next attempt stores it again
                        coordinator.epoch_start_not_stored(epoch, before)
                    go(plan.epoch_start_not_persisted(str(error)))
                    return
                with port.locked():
                    coordinator.ids_record_stored(ids)
                go(plan.epoch_start_persisted())
            port.put_ids_record(ids, start_stored)
        case PersistFloor(cid):
            def floor_stored(error: BaseException | None) -> None:
                if error is not None:
                    go(plan.floor_not_persisted(str(error)))
                    return
                port.floor_stored(cid)
                go(plan.floor_persisted())
            port.put_floor(cid, floor_stored)
        case _:
            _settle(plan, action, coordinator, port)


def _settle(plan: RestorePlan, outcome: RestoreAction, coordinator: CheckpointCoordinator,
            port: RecoveryPort) -> None:
    with port.locked():
        if not port.current():
            return
        if isinstance(outcome, Restore) and not port.may_prepare():
            port.hold()  # the coordinator learns nothing: the last registration resolves
            return
        if isinstance(outcome, Unusable):  # bad before the floor rises to the listing
            coordinator.mark_bad(outcome.checkpoint_id)
        coordinator.recovery_resolved(
            plan.listing, plan.listing_ok,
            outcome.target if isinstance(outcome, Restore) else None, plan.present)
        match outcome:
            case RetryLater(reason):
                port.retry_later(reason)
            case Refuse(reason):
                port.refuse(reason)
            case Unusable(cid, why):
                port.recover_again(cid, why)
            case Restore(target, handles):
                restored, base = prepare_ids(target, coordinator.id_floor, plan.stateful)
                port.prepare(Prepare(target, dict(handles), restored, base,
                                     list(plan.listing)))


# -- when the restore begins, and a worker's answer to its Prepare ---------------------------
class Gate(StrEnum):
    """Whether a recovery's restore may begin now (:func:`may_resolve`)."""

    WORKERS = "was resolved ahead of the registrations and waits for every worker to register"
    RESOLVING = "its restore is under way already"
    COMMITTING = "waits for the outcome of a commit point being written"
    """A commit point still being written may land after the listing: its outcome first,
    so the restore decision and the bad checkpoints it stores are final (issue 23,
    simulator seed 911). The write's own deadline bounds the wait."""
    BACKING_OFF = "waits out the restart strategy's back-off"
    GO = "go"


def may_resolve(*, registered: int, workers: int, resolving: bool, committing: bool,
                backed_off: bool = True, held: bool = False) -> Gate:
    """Whether the restore of the generation under way may begin, in the order the
    conditions are checked (``backed_off``: the restart strategy's back-off is over;
    ``held``: a resolution of this generation ended in :meth:`RecoveryPort.hold`).

    The restore begins before every worker registered: its stores (the generation, the
    ids record, the epoch's restore, the floor) then overlap the workers' start, and its
    outcome is held (:meth:`RecoveryPort.hold`) until the last registration resolves it
    again, with nothing left to store. Nothing is sent on a decision made before the
    last registration."""
    if held and registered < workers:
        return Gate.WORKERS
    if resolving:
        return Gate.RESOLVING
    if committing:
        return Gate.COMMITTING
    if not backed_off:
        return Gate.BACKING_OFF
    return Gate.GO


@dataclass(frozen=True)
class FallBack:
    """A task found a snapshot of ``checkpoint_id`` corrupt: it is marked bad; recover
    again (the newest checkpoint below it), not counted as a restart."""

    checkpoint_id: int


@dataclass(frozen=True)
class PrepareFailed:
    """A worker could not prepare: a failure of the new generation (recover again,
    counted against the restart strategy, unless the error cannot be helped by one)."""


@dataclass(frozen=True)
class Waiting:
    """More workers are to answer."""


@dataclass(frozen=True)
class StartAll:
    """Every worker is prepared: the coordinator runs the generation from checkpoint id
    ``base + 1``; send every worker its Start."""

    base: int


ReadyOutcome = FallBack | PrepareFailed | Waiting | StartAll


def worker_ready(coordinator: CheckpointCoordinator, ready: set[int], worker_id: int, *,
                 ok: bool, corrupt: bool, target: int | None, workers: int, base: int,
                 now: float) -> ReadyOutcome:
    """Worker ``worker_id`` answered the Prepare of the generation under way (``ok``; a
    failure names a ``corrupt`` snapshot or not); ``ready``: the workers that answered ok
    so far (updated), ``target``: the checkpoint the Prepares restore, ``base``: the id the
    tasks resume after."""
    if not ok:
        if corrupt and target is not None:
            coordinator.mark_bad(target)
            return FallBack(target)
        return PrepareFailed()
    ready.add(worker_id)
    if len(ready) < workers:
        return Waiting()
    coordinator.resume_after(base, now)
    return StartAll(base)
