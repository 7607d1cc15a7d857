"""The way to a quiescent cut, decided free of I/O: one rescale's or gray release's.

A rescale (master/rescale.py) and a gray release (master/upgrade.py) change the running
topology at a cut where nothing is in flight (master/quiescent.py). The way there has
one order, for production and the simulator alike (:class:`QuiescentCut`):

1. **hold** -- no periodic checkpoint is triggered from the moment the operation starts;
   wait until the topology runs, no checkpoint is in flight (a gray release also waits
   for every commit point being written: :attr:`QuiescentCut.wait_for_commits`) and a
   checkpoint may start (within the reserved ids): :meth:`QuiescentCut.may_quiesce`;
2. **quiesce** -- checkpoint ``n`` with ``pause``: every spout emits barrier ``n`` and
   stops; :meth:`QuiescentCut.started` records ``n`` and its generation;
3. **the cut, or none** -- ``n`` ending in its generation (:meth:`QuiescentCut.ended`):
   completed is the cut (:class:`Quiesced`: the operation's own steps follow), anything
   else (failed, aborted, timed out) is no cut (:class:`CutFailed`: the operation aborts
   and the spouts resume, or a recovery is on its way). An end of another checkpoint or
   generation is no answer.

``QuiescentOperation`` (``MasterCore``'s rescale and upgrade controllers) and the
simulator's rescale and gray release each hold one; the operation's steps after the cut
are ``rescale_steps.py`` and ``upgrade_steps.py``.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CutPhase(StrEnum):
    """Where an operation is on its way to the cut."""

    HOLDING = "holding"
    QUIESCING = "quiescing"
    QUIESCED = "quiesced"
    FAILED = "failed"


@dataclass(frozen=True)
class Quiesced:
    """Quiescent checkpoint ``checkpoint_id`` completed: nothing is in flight."""

    checkpoint_id: int


@dataclass(frozen=True)
class CutFailed:
    """The quiescent checkpoint did not complete (``reason``)."""

    reason: str


CutOutcome = Quiesced | CutFailed


class QuiescentCut:
    """One operation's way to its cut (see the module's docstring).

    Args:
        wait_for_commits: Hold until no commit point is being written either (a gray
            release: its batch restarts from the cut's handles at once), not only until no
            checkpoint is in flight (a rescale: its steps wait for the sinks' commits).
    """

    def __init__(self, wait_for_commits: bool) -> None:
        self.wait_for_commits = wait_for_commits
        self.phase = CutPhase.HOLDING
        self.checkpoint_id: int | None = None
        """The quiescent checkpoint ``n``, once started."""
        self.generation: int | None = None

    def may_quiesce(self, *, running: bool, in_flight: int, committing: int,
                    may_start: bool) -> bool:
        """Whether to start the quiescent checkpoint now (while holding): the topology
        runs, nothing is in flight (``in_flight`` checkpoints collecting acks,
        ``committing`` ones whose commit point is being written) and a checkpoint may
        start."""
        if self.phase != CutPhase.HOLDING or not running or in_flight or not may_start:
            return False
        return not (self.wait_for_commits and committing)

    def started(self, checkpoint_id: int, generation: int) -> None:
        """The quiescent checkpoint ``checkpoint_id`` (with ``pause``) started in
        ``generation``."""
        self.checkpoint_id, self.generation = checkpoint_id, generation
        self.phase = CutPhase.QUIESCING

    def ended(self, checkpoint_id: int, generation: int, status: str,
              error: str = "") -> CutOutcome | None:
        """Checkpoint ``checkpoint_id`` of ``generation`` ended with ``status``
        (``"completed"`` or how it failed, ``error`` why). None if it is not this cut's
        quiescent checkpoint (or the cut is decided already)."""
        if self.phase != CutPhase.QUIESCING or checkpoint_id != self.checkpoint_id \
                or generation != self.generation:
            return None
        if status == "completed":
            self.phase = CutPhase.QUIESCED
            return Quiesced(checkpoint_id)
        self.phase = CutPhase.FAILED
        return CutFailed(f"quiescent checkpoint {checkpoint_id} {status}: {error}")
