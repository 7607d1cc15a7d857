"""What a quiescent operation (in-place rescale, gray release) uses of the Topology Master.

``RescaleController`` and ``UpgradeController`` (and their base, ``QuiescentOperation``)
are given the TM's core as an :class:`OperationHost`: the members listed here and nothing
else (``tests/unit/test_master_seams.py`` fails on a reach past it). ``MasterCore``
implements it. The rescale and the gray release also know each other (a rescaling upgrade
is a rescale with new code, and neither starts while the other runs): the host hands each
the other as ``upgrade`` / ``rescale``, seen through :class:`UpgradeView` and
:class:`RescaleView`, the members one uses of the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.master.backend_io import BackendIO
from jstormpy.master.commit_point import CommitOutcome
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.session import WorkerSession
from jstormpy.master.topology_state import TopologyState
from jstormpy.operations.codepkg import PackageStore
from jstormpy.state_backends import StateBackend


class OperationHost(Protocol):
    """The Topology Master as a rescale or a gray release sees it. Everything is called
    under ``lock`` unless it says otherwise."""

    # -- where the topology is -----------------------------------------------------------------
    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The TM's one lock (re-entrant)."""

    @property
    def state(self) -> TopologyState:
        """Where the topology is."""

    @property
    def generation(self) -> int:
        """The current generation."""

    @property
    def config(self) -> Config:
        """The running configuration (a rescale replaces it through :meth:`adopt_layout`)."""

    @property
    def stateful(self) -> bool:
        """The topology checkpoints (not ``at_most_once``)."""

    @property
    def resume(self) -> bool:
        """This TM resumed a run (rather than starting it fresh)."""

    @property
    def fenced(self) -> str:
        """Why this TM stopped committing for good ("" while it may)."""

    @property
    def plan(self) -> Mapping[int, int]:
        """Task id -> worker id."""

    @property
    def component_tasks(self) -> Mapping[str, list[int]]:
        """Component name -> its task ids."""

    @property
    def sink_tasks(self) -> Sequence[int]:
        """The two-phase-commit sinks' task ids."""

    # -- the workers ---------------------------------------------------------------------------
    def alive_sessions(self) -> list[WorkerSession]:
        """The sessions of the live workers."""

    def session(self, worker_id: int) -> WorkerSession | None:
        """The session of worker ``worker_id`` (alive or not), if it ever registered."""

    def broadcast(self, **body: Any) -> None:
        """Send one control message to every live worker."""

    def peer_addresses(self) -> list[Any]:
        """The data-plane address of every live worker, as sent in ``Peers``."""

    def record_error(self, component: str, message: str) -> None:
        """Keep an error for ``status()["errors"]`` (not a user task's)."""

    # -- checkpoints and state -----------------------------------------------------------------
    @property
    def checkpoints(self) -> CheckpointCoordinator:
        """The checkpoint coordinator (ids, in flight, completed, layout floor)."""

    @property
    def backend(self) -> StateBackend:
        """The state backend (called on ``backend_io`` or an operation's own thread, never
        under the lock)."""

    @property
    def backend_io(self) -> BackendIO:
        """The TM's one thread for state-backend calls."""

    def start_checkpoint(self, pause: bool = False) -> tuple[int, float]:
        """Start the next checkpoint now (``pause``: the quiescent cut); its id and start."""

    def create_commit_point(self, cid: int, metadata: Mapping[str, Any]) -> CommitOutcome:
        """BackendIO thread: the one commit path."""

    def store_ids_record_now(self, why: str) -> None:
        """BackendIO thread: store the ids record at once, best effort."""

    # -- generations and layout ----------------------------------------------------------------
    def begin_recovery(self, reason: str, target: int | None = None,
                       count_restart: bool = True) -> None:
        """Start a new generation restoring ``target`` (the latest checkpoint if None)."""

    def begin_generation(self, reason: str, target: int | None, count_restart: bool) -> None:
        """Start a new generation from ``target`` (``LATEST``, an id, or None)."""

    def adopt_layout(self, config: Config, descriptor: dict[str, Any]) -> None:
        """A rescale committed: run ``config`` and the task layout of ``descriptor``."""

    def forget_surplus_workers(self) -> None:
        """Drop the sessions of worker ids the configuration no longer has."""

    # -- the other quiescent operation ---------------------------------------------------------
    @property
    def upgrade(self) -> UpgradeView:
        """The gray release (a rescaling upgrade commits through the rescale)."""

    @property
    def rescale(self) -> RescaleView:
        """The in-place rescale."""


class UpgradeView(Protocol):
    """What a rescale uses of the gray release (``UpgradeController``)."""

    @property
    def phase(self) -> StrEnum:
        """Where the gray release is (``UpgradePhase``): no rescale during one."""

    @property
    def stable(self) -> str:
        """The code version every worker runs outside an upgrade (``"v1"``: the pickle)."""

    @property
    def store(self) -> PackageStore | None:
        """The run directory's code packages."""

    def assignment_json(self, stable: str) -> bytes:
        """``code/assignment.json`` once every worker runs ``stable``."""

    def layout_rescaled(self, code: str) -> None:
        """A rescale committed (with ``code``: every worker runs that package)."""

    def rescale_aborted(self, code: str, reason: str) -> None:
        """An ``upgrade --rescale`` to ``code`` aborted."""

    def record_switch(self, record: dict[str, Any]) -> None:
        """A rescaling upgrade switched every worker: its history."""


class RescaleView(Protocol):
    """What a gray release uses of the in-place rescale (``RescaleController``)."""

    @property
    def phase(self) -> StrEnum:
        """Where the rescale is (``RescalePhase``)."""

    def is_idle(self) -> bool:
        """No rescale is in progress."""

    def request(self, changes: dict[str, int], code: str = "",
                descriptor: dict[str, Any] | None = None, workers: int = 0) -> dict[str, Any]:
        """Start a rescale (``upgrade --rescale``: with the package ``code``)."""
