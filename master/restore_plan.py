"""What a recovery restores, decided free of I/O: events in, actions out.

A recovery of generation ``g`` (``MasterCore.begin_generation``) must decide which
completed checkpoint every task restores before any ``Prepare`` names ``g``. The decision
has three storage steps and several ways to go wrong, each of which once lost or
duplicated output (docs/checkpointing.md, holes table):

1. **Persist the generation** first. A TM restarted after a failed write would hand the
   same generation out again, and live workers would accept the old timeline's frames
   (hole 7). A failed write is a :class:`RetryLater`: no worker is prepared.
2. **List the completed checkpoints** (``target`` is :data:`LATEST`), and every
   checkpoint with objects in storage: new ids stay above those too, since a dead TM's
   commit point of one may still land and would replace a reused id's (simulator seed
   291464). A listing that fails is an error, never "no checkpoints" (hole 1). A listing
   that succeeds but lacks the newest checkpoint this run saw complete
   (``completed_floor``) is *short*: the store is failing or unmounted. Restoring less
   would replay output the sinks committed, so that is a :class:`RetryLater` too, until
   the listing shows it; only that checkpoint turning out unusable (``bad``) or an
   explicit ``jstorm rollback --to N`` goes lower. When every checkpoint is unusable
   although one completed in this run, the recovery is a :class:`Refuse`: the topology
   fails rather than replay committed output from nothing.
3. **Read the target's metadata** for its task snapshot handles. A corrupt or missing
   metadata file makes the target :class:`Unusable`: the caller marks it bad and recovers
   again, one checkpoint lower. A store that does not answer is a :class:`RetryLater`.
4. **Refuse an older epoch's late commit point.** Every commit point names the Topology
   Master epoch that wrote it (``"run"`` in ``_metadata``), and the ids record keeps the
   lowest checkpoint each epoch restored (``epoch_starts``). A checkpoint of epoch ``e``
   above what a later epoch restored was not listed when that epoch rolled its sinks back
   (a deposed or dead TM's write that landed late, issue 27): it is :class:`Unusable`.
   An epoch's first restore (or a lower one) is stored before any ``Prepare``
   (:class:`PersistEpochStart`); a failed write is a :class:`RetryLater`.
5. **Persist the target as the completed floor** when the stored floor is lower (a TM
   that died between a commit point and its floor, or a checkpoint only a listing showed):
   the Prepares make the sinks commit the target again, so a TM restarted after them must
   not restore below it on the say-so of a short listing (simulator seed 36835). A failed
   write is a :class:`RetryLater`.

:class:`RestorePlan` holds one recovery's decision. The Topology Master
(``MasterCore._resolve_restore``) performs its actions on its backend thread; the
deterministic simulator (``jstormpy.testing.simulation``) performs them against simulated
storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LATEST = -1
"""``target`` meaning "the newest completed checkpoint that is not bad"."""


# -- actions ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PersistGeneration:
    """Store the generation counter (``meta/generation``); report
    :meth:`RestorePlan.generation_persisted` or :meth:`RestorePlan.generation_not_persisted`."""

    generation: int


@dataclass(frozen=True)
class ListCompleted:
    """List the completed checkpoints; report :meth:`RestorePlan.listed` or
    :meth:`RestorePlan.listing_failed`."""


@dataclass(frozen=True)
class ReadMetadata:
    """Read checkpoint ``checkpoint_id``'s metadata; report :meth:`RestorePlan.metadata_read`,
    :meth:`RestorePlan.metadata_unusable` or :meth:`RestorePlan.metadata_failed`."""

    checkpoint_id: int


@dataclass(frozen=True)
class PersistEpochStart:
    """Store the ids record with Topology Master epoch ``epoch`` restoring
    ``checkpoint_id`` (0: nothing); report :meth:`RestorePlan.epoch_start_persisted` or
    :meth:`RestorePlan.epoch_start_not_persisted`."""

    epoch: int
    checkpoint_id: int


@dataclass(frozen=True)
class PersistFloor:
    """Store ``checkpoint_id`` as the completed floor (``meta/completed_checkpoint``);
    report :meth:`RestorePlan.floor_persisted` or :meth:`RestorePlan.floor_not_persisted`."""

    checkpoint_id: int


@dataclass(frozen=True)
class RetryLater:
    """No worker may be prepared now; try the recovery's restore again later."""

    reason: str


@dataclass(frozen=True)
class Refuse:
    """No usable checkpoint is left, yet one completed in this run (its output is
    committed): restoring empty state would replay that output into the sinks. The
    topology fails, naming why (Flink fails the job rather than start from nothing)."""

    reason: str


@dataclass(frozen=True)
class Unusable:
    """Checkpoint ``checkpoint_id`` cannot be restored: mark it bad, recover again."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class Restore:
    """Prepare every task: restore ``target`` (None: fresh state) from ``handles``."""

    target: int | None
    handles: Mapping[int, str] = field(default_factory=dict)


RestoreAction = (PersistGeneration | ListCompleted | ReadMetadata | PersistEpochStart
                 | PersistFloor | RetryLater | Unusable | Refuse | Restore)
"""The storage steps (first five) and the outcomes (last four)."""


def prepare_ids(target: int | None, id_floor: int, stateful: bool) -> tuple[int, int]:
    """``(restored, base)`` for the Prepares: sinks recover to ``restored`` (the checkpoint
    the tasks restore: a transaction staged above it is covered by none, hole 2), and new
    checkpoint ids start at ``base + 1``, above every id a sink may have seen."""
    if not stateful:
        return 0, 0
    restored = target or 0
    return restored, max(restored, id_floor)


class RestorePlan:
    """One recovery's restore decision.

    Args:
        generation: The recovery's generation.
        target: :data:`LATEST`, a checkpoint id (``jstorm rollback --to``), or None
            (fresh state).
        stateful: False under ``at_most_once`` (nothing is restored).
        persisted_generation: The highest generation known to be stored.
        completed_floor: The newest checkpoint this run saw complete.
        persisted_floor: The completed floor known to be stored.
        bad: Checkpoints never to restore from.
        layout_floor: The first checkpoint of the running layout (written by a rescale);
            older checkpoints hold another layout's tasks and never restore into this one.
        uri: The state backend, for messages.
        name: The topology, for messages.
        epoch: The Topology Master's epoch (``RunIdentity.epoch``; 0: a run without run
            identity, no epoch checks).
        epoch_starts: The lowest checkpoint each epoch restored, as the ids record keeps
            them (``CheckpointCoordinator.epoch_starts``).
    """

    def __init__(self, generation: int, target: int | None, *, stateful: bool,
                 persisted_generation: int, completed_floor: int, bad: Iterable[int] = (),
                 uri: str = "the state backend", name: str = "NAME",
                 layout_floor: int = 0, persisted_floor: int = 0, epoch: int = 0,
                 epoch_starts: Mapping[int, int] | None = None) -> None:
        self.generation = generation
        self.target = target
        self.stateful = stateful
        self.persisted_generation = persisted_generation
        self.completed_floor = completed_floor
        self.bad = set(bad)
        self.layout_floor = layout_floor
        self.persisted_floor = persisted_floor
        self.epoch = epoch
        self.epoch_starts = dict(epoch_starts or {})
        self.restore: Restore | None = None
        """The decision, once the target's metadata was read (before :class:`PersistFloor`)."""
        self.uri = uri
        self.name = name
        self.listing: list[int] = []
        """What the listing returned (empty if none was made or it failed)."""
        self.listing_ok = False
        """The listing succeeded: every checkpoint it names completed."""
        self.present: list[int] = []
        """Every checkpoint the listing found objects of, complete or not: one a dead TM
        was committing may still get its ``_metadata``, so new ids stay above them."""

    # -- events ----------------------------------------------------------------------------
    def begin(self) -> list[RestoreAction]:
        """Start: the generation is stored before anything else."""
        if self.generation > self.persisted_generation:
            return [PersistGeneration(self.generation)]
        return self._choose()

    def generation_persisted(self) -> list[RestoreAction]:
        self.persisted_generation = max(self.persisted_generation, self.generation)
        return self._choose()

    def generation_not_persisted(self, error: str) -> list[RestoreAction]:
        return [RetryLater(f"cannot persist generation {self.generation} ({error}); no "
                           "worker is prepared with a generation a restarted TM could hand "
                           "out again")]

    def listed(self, checkpoint_ids: Iterable[int],
               present: Iterable[int] = ()) -> list[RestoreAction]:
        """``checkpoint_ids``: the completed checkpoints; ``present``: every checkpoint with
        objects in storage (``StateBackend.list_checkpoint_ids``)."""
        self.listing = sorted(checkpoint_ids)
        self.present = sorted(present)
        self.listing_ok = True
        done = [c for c in self.listing if c not in self.bad and c >= self.layout_floor]
        target = done[-1] if done else None
        older = [c for c in self.listing if c < self.layout_floor]
        if target is None and older:
            return [RetryLater(
                f"no usable checkpoint of the running layout (rescaled checkpoint "
                f"{self.layout_floor} and later are unusable); checkpoint(s) {older} hold "
                "the layout before the rescale and cannot restore into this one. They are "
                "kept: restore them with the previous parallelism, or start fresh")]
        short = self._short_listing(target)
        if short:
            return [RetryLater(short)]
        if target is None and self.completed_floor:
            unusable = sorted(c for c in self.listing if c in self.bad) or [self.completed_floor]
            return [Refuse(
                f"no usable checkpoint is left in {self.uri}: checkpoint(s) {unusable} are "
                "unusable (a corrupt or missing snapshot, shared file or metadata; the errors "
                f"of jstorm status name each), and checkpoint {self.completed_floor} completed "
                "in this run, so the sinks committed its output. Restoring empty state would "
                "replay that output into them: the topology fails instead. Restore a "
                "savepoint, or start a fresh run into new outputs")]
        return self._read(target)

    def listing_failed(self, error: str) -> list[RestoreAction]:
        return [RetryLater(f"cannot list checkpoints: {error}")]

    def metadata_read(self, checkpoint_id: int,
                      metadata: Mapping[str, Any]) -> list[RestoreAction]:
        try:
            handles = {int(t): v["handle"] for t, v in metadata["tasks"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return self.metadata_unusable(checkpoint_id, f"malformed metadata: {exc!r}")
        late = self._late_commit_point(checkpoint_id, metadata)
        if late:
            return [Unusable(checkpoint_id, late)]
        return self._decided(Restore(checkpoint_id, handles))

    def epoch_start_persisted(self) -> list[RestoreAction]:
        assert self.restore is not None
        self.epoch_starts[self.epoch] = self.restore.target or 0
        return self._decided(self.restore)

    def epoch_start_not_persisted(self, error: str) -> list[RestoreAction]:
        assert self.restore is not None
        return [RetryLater(f"cannot store that epoch {self.epoch} restores checkpoint "
                           f"{self.restore.target or 0} ({error}); no worker is prepared "
                           "before a late commit point of an older epoch can be told apart")]

    def floor_persisted(self) -> list[RestoreAction]:
        assert self.restore is not None and self.restore.target is not None
        self.persisted_floor = max(self.persisted_floor, self.restore.target)
        return [self.restore]

    def floor_not_persisted(self, error: str) -> list[RestoreAction]:
        assert self.restore is not None
        return [RetryLater(f"cannot store checkpoint {self.restore.target} as the completed "
                           f"floor ({error}); no worker is prepared to commit it again "
                           "before a restarted TM would know not to restore below it")]

    def metadata_unusable(self, checkpoint_id: int, error: str) -> list[RestoreAction]:
        return [Unusable(checkpoint_id, error)]

    def metadata_failed(self, checkpoint_id: int, error: str) -> list[RestoreAction]:
        return [RetryLater(f"cannot read checkpoint {checkpoint_id}: {error}")]

    # -- helpers ---------------------------------------------------------------------------
    def _choose(self) -> list[RestoreAction]:
        if not self.stateful:
            return [Restore(None)]
        if self.target is None:
            return self._decided(Restore(None))
        if self.target == LATEST:
            return [ListCompleted()]
        return self._read(self.target)

    def _read(self, target: int | None) -> list[RestoreAction]:
        return self._decided(Restore(None)) if target is None else [ReadMetadata(target)]

    def _decided(self, restore: Restore) -> list[RestoreAction]:
        """The decision is made: store what must be stored before any Prepare (the epoch's
        restore, then the floor), then restore."""
        self.restore = restore
        target = restore.target or 0
        start = self.epoch_starts.get(self.epoch)
        if self.epoch and (start is None or target < start):
            return [PersistEpochStart(self.epoch, target)]
        if restore.target is not None and restore.target > self.persisted_floor:
            return [PersistFloor(restore.target)]
        return [restore]

    def _late_commit_point(self, checkpoint_id: int, metadata: Mapping[str, Any]) -> str:
        """Why ``checkpoint_id`` is an older epoch's commit point that landed after a
        later epoch restored below it ('' if it is not)."""
        run = metadata.get("run")
        if not self.epoch or not isinstance(run, Mapping) or "epoch" not in run:
            return ""  # written before run identities: no epoch to compare
        try:
            written = int(run["epoch"])
        except (TypeError, ValueError):
            return ""
        later = [(c, e) for e, c in self.epoch_starts.items() if e > written]
        if not later:
            return ""
        start, epoch = min(later)
        if checkpoint_id <= start:
            return ""
        return (f"its commit point was written by Topology Master epoch {written}, and epoch "
                f"{epoch} restored checkpoint {start} without it (the sinks rolled back past "
                "it): a deposed or dead Topology Master's write that landed late")

    def _short_listing(self, target: int | None) -> str:
        """Why restoring ``target`` from this listing would go below a checkpoint this run
        saw complete ('' if it does not)."""
        floor = self.completed_floor
        if not floor or floor in self.bad or (target or 0) >= floor:
            return ""
        ids = self.listing
        shown = ("none" if not ids else str(ids) if len(ids) <= 5
                 else f"[{ids[0]}, ..., {ids[-1]}] ({len(ids)})")
        return (f"state backend {self.uri} lists completed checkpoints {shown}, but "
                f"checkpoint {floor} completed in this run: the listing is missing it "
                "(storage error, unmounted or replaced directory?). Not restoring "
                f"{'checkpoint ' + str(target) if target else 'empty state'}, which would "
                f"replay output the sinks committed; retrying until the backend lists "
                f"checkpoint {floor} (to go back deliberately: jstorm rollback {self.name} "
                "--to ID)")
