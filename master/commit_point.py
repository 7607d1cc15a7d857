"""The outcome of the one commit path (``MasterCore.create_commit_point``).

Every commit point a Topology Master writes -- a periodic checkpoint's and a rescale's --
goes through one method: fenced before the write, stamped with the TM's run identity and
epoch, created and never replaced (``StateBackend.create_metadata``), fenced again after
the write, then stored as the completed floor. Its caller learns which of these steps it
got through from a :class:`CommitOutcome` (docs/checkpointing.md, "The one commit path").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jstormpy.api.errors import BackendError, BackendTimeoutError, ObjectExistsError


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
