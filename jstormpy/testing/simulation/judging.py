"""How a seed's ending is judged, and which step of the protocol each fault kind tests.

A run ends drained, or in a failed or refused ending. Each fault kind declares which
failed or refused endings are the right answer to it (:data:`LEGITIMATE`): a fresh run
into used ``FileSink`` output is refused, a lost shared file may leave no usable
checkpoint. Any other failed or refused ending is a violation, reported like a duplicate
(a planted bug that makes the Topology Master fail must not pass as "a named error
state").

Each fault kind also names the steps it is there to test (:data:`TARGETS`); a run counts
the steps it reached (:meth:`World.reach <jstormpy.testing.simulation.world.World.reach>`)
and ``jstorm simulate`` reports per fault kind how many of its seeds reached them (a
fault drawn into seeds that never reach its step tests nothing).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jstormpy.testing.simulation.faults import Fault, FaultPlan


class Step(enum.Enum):
    """A step of the protocol a fault kind is there to test (the run reached it)."""

    STRUCK = "the fault struck"
    RESTORE = "a recovery restored a checkpoint"
    TM_RESUMED = "a restarted TM resumed the run from meta/"
    WRITE_ON_FULL_DISK = "a write failed on the full disk"
    SINK_STEP_REFUSED = "a sink step met the external system down"
    SECOND_RUN_CHECKED = "the second run's output was checked or refused"
    RESCALE_COMPLETED = "a rescale completed"
    RESCALE_REFUSED = "a rescale was refused or abandoned"
    GRAY_RELEASE_COMPLETED = "a gray release completed"
    GRAY_RELEASE_ABORTED = "a gray release was aborted"
    RETENTION_IN_FLIGHT = "retention ran with a checkpoint in flight"
    SHARED_CHAIN_RESTORED = "a restore read a shared-file chain"
    LATE_COMMIT_POINT = "a deposed leader's commit point landed late"
    FELL_BACK = "a restore found a checkpoint damaged and fell back"
    LOCAL_COPIES_TAKEN = "a restore took local copies"
    MULTILANG_REEMIT_DROPPED = "a multilang spout's re-emit was dropped"
    MULTILANG_ADOPTED = "a kept multilang subprocess was adopted"
    FINAL_BESIDE_IN_FLIGHT = "the final checkpoint started beside one in flight"


@dataclass(frozen=True)
class Legitimate:
    """A failed (``failed: ...``) or refused (``refused: ...``) ending a fault makes right."""

    ending: str
    """``"failed"`` (the Topology Master failed the topology) or ``"refused"`` (a sink or a
    lifecycle check refused)."""
    pattern: str
    """A regular expression the ending's reason matches."""
    why: str

    def matches(self, outcome: str) -> bool:
        prefix = f"{self.ending}: "
        return outcome.startswith(prefix) and re.search(
            self.pattern, outcome[len(prefix):]) is not None


NO_USABLE_CHECKPOINT = Legitimate(
    "failed", r"^no usable checkpoint is left",
    "every retained checkpoint needs a file the fault deleted, and one completed: restoring "
    "empty state would replay committed output (docs/checkpointing.md)")

LEGITIMATE: dict[Fault, tuple[Legitimate, ...]] = {
    Fault.FRESH_RUN_INTO_USED: (Legitimate(
        "refused", r"^FileSink directory '[^']*' already holds \d+ committed part files? "
                   r"of an earlier run",
        "a fresh run into a FileSink directory an earlier run committed to"),),
    Fault.SAVEPOINT_INTO_USED: (
        Legitimate("refused", r"^FileSink directory '[^']*' holds \d+ part files? "
                              r"committed after the savepoint's checkpoint",
                   "a savepoint restore into FileSink output used after the savepoint"),
        Legitimate("refused", r"^SimStagedSink task \d+: the (savepoint of checkpoint \d+|"
                              r"restored checkpoint) lists transaction \d+ as pending, but "
                              r"(the run it was taken from \(\w+\)|a recovery of this run) "
                              r"discarded it",
                   "a PostgreSQL/Redis transaction the first run discarded in a fallback")),
    Fault.SHARED_FILE_LOSS: (NO_USABLE_CHECKPOINT,),
}
"""Per fault kind, the failed or refused endings it makes the right answer. Every kind not
named here: none (its runs must drain)."""

TARGETS: dict[Fault, tuple[Step, ...]] = {
    Fault.WORKER_CRASH: (Step.RESTORE, Step.FINAL_BESIDE_IN_FLIGHT),
    Fault.TM_CRASH: (Step.TM_RESUMED,),
    Fault.DISK_FULL: (Step.WRITE_ON_FULL_DISK,),
    Fault.SINK_UNAVAILABLE: (Step.SINK_STEP_REFUSED,),
    Fault.FRESH_RUN_INTO_USED: (Step.SECOND_RUN_CHECKED,),
    Fault.SAVEPOINT_INTO_USED: (Step.SECOND_RUN_CHECKED,),
    Fault.RESCALE: (Step.RESCALE_COMPLETED, Step.RESCALE_REFUSED),
    Fault.GRAY_RELEASE: (Step.GRAY_RELEASE_COMPLETED, Step.GRAY_RELEASE_ABORTED),
    Fault.SHARED_FILES: (Step.RETENTION_IN_FLIGHT, Step.SHARED_CHAIN_RESTORED),
    Fault.LEADER_DEPOSED: (Step.LATE_COMMIT_POINT,),
    Fault.SHARED_FILE_LOSS: (Step.FELL_BACK,),
    Fault.LOCAL_RECOVERY: (Step.STRUCK, Step.LOCAL_COPIES_TAKEN),
    Fault.STATE_TTL: (Step.RESTORE,),
    Fault.ROCKSDB_TTL: (Step.RESTORE,),
    Fault.MULTILANG_SPOUT: (Step.MULTILANG_ADOPTED, Step.MULTILANG_REEMIT_DROPPED),
}
"""Per fault kind, the steps it is there to test. Every kind not named here: the fault
struck (a storage call failed or was slow, a message was lost, delayed or duplicated)."""


def targets(fault: Fault) -> tuple[Step, ...]:
    return TARGETS.get(fault, (Step.STRUCK,))


def judge(outcome: str, plan: FaultPlan) -> str | None:
    """The violation a failed or refused ``outcome`` is (None: drained, or an ending one
    of the seed's faults declares legitimate)."""
    if not outcome.startswith(("failed: ", "refused: ")):
        return None
    if any(e.matches(outcome) for f in sorted(plan.enabled, key=lambda f: f.value)
           for e in LEGITIMATE.get(f, ())):
        return None
    return (f"the run ended {outcome[:240]!r}; none of its faults ({plan.describe()}) "
            "makes that ending legitimate (judging.LEGITIMATE)")


def steps_reached(plan: FaultPlan, reached: Mapping[Step, int]) -> dict[Fault, frozenset[Step]]:
    """Per fault of ``plan``, which of its target steps the run reached."""
    out: dict[Fault, frozenset[Step]] = {}
    for f in plan.enabled:
        got: set[Step] = {s for s in targets(f) if s is not Step.STRUCK and reached.get(s)}
        if Step.STRUCK in targets(f) and plan.hits.get(f):
            got.add(Step.STRUCK)
        out[f] = frozenset(got)
    return out


@dataclass
class ReachTally:
    """Per fault kind: seeds that drew it, and of those, how many reached each target."""

    drawn: dict[Fault, int] = field(default_factory=dict)
    reached: dict[Fault, dict[Step, int]] = field(default_factory=dict)

    def add(self, per_fault: Mapping[Fault, Iterable[Step]]) -> None:
        for f, steps in per_fault.items():
            self.drawn[f] = self.drawn.get(f, 0) + 1
            mine = self.reached.setdefault(f, {})
            for s in steps:
                mine[s] = mine.get(s, 0) + 1

    def lines(self) -> list[str]:
        """One line per fault kind drawn: ``kind: N seeds; step M, ...``."""
        out = []
        for f in sorted(self.drawn, key=lambda f: f.value):
            got = self.reached.get(f, {})
            parts = [f"{s.value} {got.get(s, 0)}" for s in targets(f)]
            out.append(f"{f.value}: {self.drawn[f]} seeds; " + ", ".join(parts))
        return out
