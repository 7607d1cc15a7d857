"""A quiescent operation of the Topology Master: change the running topology at a cut
where nothing is in flight.

In-place rescale (master/rescale.py) and gray release (master/upgrade.py) are the two.
Both go the same way up to the cut, then act differently:

1. **hold** — no periodic checkpoint is triggered; wait until none is in flight;
   steps 1-2 and the cut's outcome are ``quiescent_cut.QuiescentCut``'s, which the
   simulator's rescale and gray release run too;
2. **quiesce** — checkpoint ``n`` with ``pause``: every spout emits barrier ``n`` and stops
   emitting, so when ``n`` completes every task has processed everything before its
   barrier and nothing follows it;
3. **act** — the operation's own steps (:meth:`QuiescentOperation._quiesced`): a rescale
   writes and commits a checkpoint for the new layout, a gray release restarts a batch of
   workers on new code;
4. **resume or roll back** — spouts resume (:meth:`QuiescentOperation._resume_spouts`), or
   the operation aborts (the quiescent checkpoint failed, a step took longer than
   ``Config.upgrade_step_timeout_ms``, a worker was lost) and the ordinary recovery
   restores the last completed checkpoint.

This class holds the steps both share and the hooks ``MasterCore`` calls on either; both
see the core only as an ``operation_host.OperationHost``. Each operation names its phases
with its own ``StrEnum`` (status reports their values). Everything runs under
``core.lock``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jstormpy.master.quiescent_cut import CutFailed, Quiesced, QuiescentCut
from jstormpy.master.topology_state import TopologyState
from jstormpy.operations.codepkg import UPGRADE_EXIT_CODE
from jstormpy.proto import jstorm_pb2 as pb

if TYPE_CHECKING:
    from jstormpy.master.operation_host import OperationHost
    from jstormpy.master.session import WorkerSession

P = TypeVar("P", bound=StrEnum)


class QuiescentOperation(ABC, Generic[P]):
    """The steps up to the quiescent cut, and the hooks the core calls.

    Args:
        core: The Topology Master's core, as an operation sees it (``OperationHost``).
        name: ``"rescale"`` or ``"upgrade"``: names the operation in errors and time-outs.
        idle, holding, quiescing: The operation's phases for the shared steps.
    """

    def __init__(self, core: OperationHost, name: str, *, idle: P, holding: P,
                 quiescing: P) -> None:
        self.core = core
        self.name = name
        self.phase: P = idle
        self._idle = idle
        self._holding = holding
        self._quiescing = quiescing
        self.checkpoint_id: int | None = None  # the quiescent checkpoint n
        self.cut = QuiescentCut(self.WAIT_FOR_COMMITS)  # the way to it (quiescent_cut.py)
        self.t_start = self.t_step = 0.0       # the operation's and the current step's start
        self.marks: dict[str, float] = {}      # monotonic time of each step (status, history)

    # -- hooks called by MasterCore (under core.lock) ------------------------------------
    @abstractmethod
    def holds_checkpoints(self) -> bool:
        """Periodic checkpoints wait while this is True."""

    @abstractmethod
    def on_register(self, session: WorkerSession, reported_generation: int) -> bool:
        """A worker registered. True = handled here (the core does nothing more)."""

    @abstractmethod
    def on_new_generation(self, reason: str) -> None:
        """The core starts a recovery (or a new layout's generation)."""

    @abstractmethod
    def tick(self, now: float) -> None:
        """Drive the operation (called by ``MasterCore.tick``)."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """What ``jstorm status`` shows of the operation."""

    def is_idle(self) -> bool:
        """No operation of this kind is in progress (its phase is the idle one)."""
        return self.phase == self._idle

    # -- the shared steps ------------------------------------------------------------------
    WAIT_FOR_COMMITS = True
    """Hold until no commit point is being written either (``QuiescentCut``)."""

    def _hold(self, now: float) -> None:
        """Step 1: no periodic checkpoint from now on; :meth:`_drive_to_cut` quiesces."""
        self.checkpoint_id = None
        self.cut = QuiescentCut(self.WAIT_FOR_COMMITS)
        self.t_start = self.t_step = now
        self.marks = {"start": now}
        self.phase = self._holding

    def _drive_to_cut(self) -> bool:
        """Steps 1-2 of ``tick``: quiesce when the cut allows it
        (``QuiescentCut.may_quiesce``), then watch the quiescent checkpoint. True if the
        operation is in one of them."""
        core = self.core
        if self.phase == self._holding:
            if self.cut.may_quiesce(running=core.state == TopologyState.RUNNING,
                                    in_flight=len(core.checkpoints.inflight),
                                    committing=len(core.checkpoints.committing),
                                    may_start=core.checkpoints.may_start()):
                self._quiesce()
            return True
        if self.phase == self._quiescing:
            self._watch_checkpoint()
            return True
        return False

    def _quiesce(self) -> None:
        cid, now = self.core.start_checkpoint(pause=True)
        self.checkpoint_id = cid
        self.cut.started(cid, self.core.generation)
        self.t_step = now
        self.marks["pause"] = now
        self.phase = self._quiescing

    def _watch_checkpoint(self) -> None:
        core = self.core
        for entry in reversed(core.checkpoints.history):
            if entry["id"] == self.checkpoint_id and entry["generation"] == core.generation:
                match self.cut.ended(entry["id"], entry["generation"], entry["status"],
                                     entry["error"]):
                    case Quiesced():
                        now = time.monotonic()
                        self.marks["quiesced"] = self.t_step = now
                        self._quiesced()
                    case CutFailed(reason):
                        self._quiescence_failed(reason)
                return

    @abstractmethod
    def _quiesced(self) -> None:
        """Step 3: the quiescent checkpoint completed; nothing is in flight."""

    @abstractmethod
    def _quiescence_failed(self, reason: str) -> None:
        """The quiescent checkpoint failed or timed out."""

    def _step_timeout(self, now: float) -> str:
        """Why the current step is over its time (``upgrade_step_timeout_ms``), or ''."""
        limit_ms = self.core.config.upgrade_step_timeout_ms
        if now - self.t_step > limit_ms / 1000.0:
            return (f"{self.name} step {self.phase.value!r} took longer than "
                    f"upgrade_step_timeout_ms={limit_ms}")
        return ""

    def _restart(self, session: WorkerSession, reason: str) -> None:
        """Restart one worker (exit 75: the launcher restarts it, not a failure)."""
        session.alive = False  # its stream closing is expected: not a failure
        session.send(shutdown=pb.Shutdown(reason=reason, exit_code=UPGRADE_EXIT_CODE))

    def _resume_spouts(self) -> None:
        """Step 4: every spout emits again."""
        core = self.core
        core.broadcast(resume=pb.ResumeSpouts(generation=core.generation))

    def _record_error(self, message: str) -> None:
        """An abort, in ``status()["errors"]``."""
        self.core.record_error(self.name, message)
