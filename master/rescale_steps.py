"""A rescale's steps after its quiescent cut, their one driver, and its port.

A rescale (master/rescale.py, docs/rescaling.md) first holds periodic checkpoints and takes
a quiescent checkpoint ``n`` (master/quiescent.py, shared with the gray release). From
there on its steps are one list (:meth:`RescaleSteps.steps`), in their one order:

1. **sinks** -- wait until every sink task committed ``n`` (its staged output belongs to
   its old task id);
2. **allocate** -- the rescaled checkpoint's id ``m``, from the ids record's reservation
   like any checkpoint's;
3. **redistribute** -- write checkpoint ``m`` for the new layout from ``n``: keyed state by
   key group (``keygroups.redistribute``), anything else through the components' hooks; a
   refusal (state not partitioned by key group, no hook) ends the rescale;
4. **stage** -- the new layout pending (a Topology Master restarted from here adopts it
   only if ``m`` completed and is not bad: :func:`pending_rescale_committed`);
5. **commit** -- ``m``'s commit point through the one commit path
   (master/commit_point.py). A failed one is marked bad and stored in the ids record at
   once (it may land late), then the staged layout is dropped; a fenced TM drops it and
   leaves the run alone;
6. **adopt** -- the new layout is the topology's: the layout floor at ``m`` (ids above it,
   no recovery restores an older checkpoint into the new layout), every worker restarts,
   and a new generation restores ``m``.

Before the commit point every failure aborts and the old layout runs on (``resume``: the
paused spouts go on; without it a recovery is on its way). :func:`perform` is the one
driver; ``RescaleController`` (master/rescale.py: its threads, its run directory, the
TM's BackendIO thread) and the simulator's rescale (jstormpy/testing/simulation: simulated
storage and control streams) are each a :class:`RescalePort`.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from jstormpy.api.errors import CheckpointError
from jstormpy.master.commit_point import CommitOutcome, CommitStatus


class RescaleStep(StrEnum):
    """The steps after the quiescent cut, in their one order."""

    SINKS = "sinks"
    ALLOCATE = "allocate"
    REDISTRIBUTE = "redistribute"
    STAGE = "stage"
    COMMIT = "commit"
    ADOPT = "adopt"


@dataclass(frozen=True)
class RescaleSteps:
    """One rescale from the quiescent checkpoint ``quiescent`` (``n``)."""

    quiescent: int

    def steps(self) -> list[RescaleStep]:
        return list(RescaleStep)


class RescalePort(Protocol):
    """How a runtime performs a rescale's steps. The asynchronous ones answer through
    ``then``; a port whose rescale was cut off meanwhile (a recovery, a dead TM) never
    answers, and the rescale ends there."""

    def await_sinks(self, quiescent: int, then: Callable[[], None]) -> None:
        """``then()`` once every sink task committed ``quiescent``."""

    def allocate_id(self) -> int:
        """The rescaled checkpoint's id. Raises CheckpointError: no reservation."""

    def write_rescaled(self, quiescent: int, target: int,
                       then: Callable[[str], None]) -> None:
        """Write checkpoint ``target`` for the new layout from ``quiescent``;
        ``then(refusal)`` ("" if written)."""

    def stage(self, target: int, then: Callable[[str], None]) -> None:
        """Stage the new layout as pending; ``then(error)`` ("" if staged)."""

    def commit(self, target: int, then: Callable[[CommitOutcome], None]) -> None:
        """``target``'s commit point through the one commit path; ``then(outcome)``."""

    def mark_bad(self, target: int, outcome: CommitOutcome, then: Callable[[], None]) -> None:
        """A failed commit point: mark ``target`` bad, store the ids record, delete its
        objects unless another writer's commit point holds the id; then ``then()``."""

    def adopt_layout(self, target: int) -> None:
        """The new layout is the topology's from ``target`` (the layout floor); every
        worker restarts on it and a new generation restores ``target``."""

    def abort(self, reason: str, resume: bool, staged: bool) -> None:
        """The rescale ends and the old layout runs on; ``staged``: drop the staged
        layout first; ``resume``: the paused spouts go on."""


def perform(rescale: RescaleSteps, port: RescalePort) -> None:
    """The one driver: ``rescale``'s steps through ``port``."""
    n = rescale.quiescent

    def allocate() -> None:
        try:
            m = port.allocate_id()
        except CheckpointError as exc:
            port.abort(str(exc), resume=True, staged=False)
            return
        port.write_rescaled(n, m, lambda refusal: written(m, refusal))

    def written(m: int, refusal: str) -> None:
        if refusal:
            port.abort(refusal, resume=True, staged=False)
            return
        port.stage(m, lambda error: staged(m, error))

    def staged(m: int, error: str) -> None:
        if error:
            port.abort(error, resume=True, staged=False)
            return
        port.commit(m, lambda outcome: committed(m, outcome))

    def committed(m: int, outcome: CommitOutcome) -> None:
        match outcome.status:
            case CommitStatus.FENCED:  # a newer TM leads: the old layout is its to run
                port.abort(f"this Topology Master was fenced; the rescaled checkpoint {m} "
                           "is not committed", resume=False, staged=True)
            case CommitStatus.FAILED:  # whether or not it lands: never restored
                port.mark_bad(m, outcome, lambda: port.abort(
                    f"cannot commit the rescaled checkpoint {m}: {outcome.error}",
                    resume=True, staged=True))
            case _:  # complete on storage (a floor not stored is stored by m's restore)
                port.adopt_layout(m)

    port.await_sinks(n, allocate)


def pending_rescale_committed(checkpoint_id: int, completed: Collection[int],
                              bad: Collection[int]) -> bool:
    """Whether a Topology Master that finds a rescale staged at start adopts it: its
    checkpoint completed and is not bad (a commit point that timed out is stored as bad at
    once, and may land after the TM died with its staged layout still there)."""
    return checkpoint_id in completed and checkpoint_id not in bad
