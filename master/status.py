"""What the Topology Master tells the user: its status, its errors, why it failed.

``MasterStatus`` keeps the errors (the tasks' and the TM's own), the failure (why the
topology failed for good, with the user error that caused it and where its logs are), and
builds ``status()``, everything ``jstorm status``, the console and ``handle.wait()`` show.
What it reads of the rest of the TM is the :class:`StatusHost` protocol, which
``MasterCore`` implements (public members only).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.master.checkpoint_health import CheckpointHealth
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.session import WorkerSession
from jstormpy.master.topology_state import TopologyState
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.run_identity import RunIdentity
from jstormpy.state_backends import StateBackend

log = logging.getLogger("jstormpy.master")
RUN_DIR_ENV = "JSTORM_RUN_DIR"  # = jstormpy.runtime.taskops.RUN_DIR_ENV (set by launchers)


class Reports(Protocol):
    """A part of the TM that reports its own status (backpressure, a gray release, a
    rescale)."""

    def status(self) -> dict[str, Any]:
        """Its section of ``status()``."""


class StatusHost(Protocol):
    """What the status uses of the rest of the Topology Master (``MasterCore``)."""

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The TM's one lock (re-entrant): every event runs under it."""

    @property
    def state_changed(self) -> threading.Condition:
        """Notified (under the lock) whenever ``state`` changes."""

    @property
    def name(self) -> str:
        """The topology's name."""

    @property
    def state(self) -> TopologyState:
        """Where the topology is."""

    @property
    def generation(self) -> int:
        """The TM's current generation."""

    @property
    def config(self) -> Config:
        """The running configuration."""

    @property
    def plan(self) -> Mapping[int, int]:
        """Task id -> worker id."""

    @property
    def descriptor(self) -> dict[str, Any]:
        """The task layout (its components)."""

    @property
    def backend(self) -> StateBackend:
        """The state backend (its ``uri``)."""

    @property
    def run(self) -> RunIdentity | None:
        """This TM's run identity, if it has one."""

    @property
    def checkpoints(self) -> CheckpointCoordinator:
        """The checkpoint coordinator: completed, in flight, the history."""

    @property
    def restarts(self) -> int:
        """Failures restarted so far."""

    @property
    def recoveries(self) -> Sequence[dict[str, Any]]:
        """The last recoveries (generation, reason, checkpoint, duration)."""

    @property
    def finished_spouts(self) -> set[int]:
        """The spout tasks that reported their input finished."""

    @property
    def backpressure(self) -> Reports:
        """The backpressure coordinator."""

    @property
    def upgrade(self) -> Reports:
        """The gray release."""

    @property
    def rescale(self) -> Reports:
        """The in-place rescale."""

    def session(self, worker_id: int) -> WorkerSession | None:
        """The session of worker ``worker_id`` (alive or not), if it ever registered."""

    def checkpoint_health(self) -> CheckpointHealth:
        """Whether checkpoints keep up with their interval."""

    def set_state(self, state: TopologyState) -> None:
        """Move the topology to ``state``."""

    def broadcast(self, **body: Any) -> None:
        """Send one control message to every live worker."""


class MasterStatus:
    """The errors, the failure and the status of one topology."""

    def __init__(self, host: StatusHost) -> None:
        self.host = host
        self.errors: deque[dict[str, Any]] = deque(maxlen=50)
        self.failure: dict[str, Any] | None = None  # why the topology failed, for the user
        self.started_at = time.time()

    # -- errors --------------------------------------------------------------------------------
    def record_task_error(self, error: dict[str, Any]) -> None:
        """Keep a task's error (``on_task_error``, a failed Prepare)."""
        self.errors.append(error)

    def record_error(self, component: str, message: str) -> None:
        """Keep an error that is no user task's (a lost worker, a recovery that waits, an
        operation's abort) for ``status()["errors"]``."""
        self.errors.append({"time": time.time(), "task": -1, "component": component,
                            "message": message, "traceback": "", "tuple": ""})

    def record_error_once(self, component: str, message: str) -> None:
        """``record_error``, unless the last error kept says the same (once per cause)."""
        if not self.errors or self.errors[-1]["message"] != message:
            self.record_error(component, message)

    def fail(self, reason: str, error: dict[str, Any] | None = None) -> None:
        """Fail the topology for good, keeping why (with the user error that caused it)
        for ``status()`` and so for the console and ``handle.wait()``."""
        host = self.host
        if error is None:  # the last user error of this or the previous generation
            error = next((e for e in reversed(self.errors) if e["task"] >= 0
                          and e.get("generation", -1) >= host.generation - 1), None)
        self.failure = {"reason": reason, "restarts": host.restarts,
                        "restart_strategy": host.config.restart().describe(
                            host.config.max_restarts),
                        "error": error, "logs": self._log_paths(error)}
        log.error("topology %s failed: %s", host.name, reason)
        host.set_state(TopologyState.FAILED)
        host.broadcast(shutdown=pb.Shutdown(reason="topology failed"))

    def _log_paths(self, error: dict[str, Any] | None) -> list[str]:
        run_dir = os.environ.get(RUN_DIR_ENV)
        if not run_dir:
            return []
        logs = Path(run_dir) / "logs"
        if error is None or error["task"] < 0:
            return [str(logs / "master.log")]
        worker = self.host.plan.get(error["task"], error.get("worker"))
        if worker is None:
            return [str(logs / "master.log")]
        return [str(logs / f"worker-{worker}.log"),
                str(logs / "tasks" / f"{error['component']}-{error['task']}.log")]

    # -- status --------------------------------------------------------------------------------
    def wait_state(self, states: tuple[TopologyState, ...], timeout: float) -> bool:
        """Block until the topology is in one of ``states``."""
        deadline = time.monotonic() + timeout
        with self.host.lock:
            while self.host.state not in states:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.host.state_changed.wait(left)
            return True

    def status(self) -> dict[str, Any]:
        """Everything `jstorm status` shows (JSON-serialisable)."""
        host = self.host
        with host.lock:
            now = time.time()
            workers = []
            for wid in range(host.config.workers):
                s = host.session(wid)
                workers.append({
                    "id": wid, "alive": bool(s and s.alive), "pid": s.pid if s else None,
                    "host": s.host if s else None, "port": s.port if s else None,
                    "code_version": s.code_version if s else None,
                    "uptime_s": round(now - s.started_at, 1) if s else None,
                    "rss_bytes": s.rss_bytes if s else None,
                    "cpu_percent": s.cpu_percent if s else None,
                    "tasks": [t for t, w in host.plan.items() if w == wid]})
            checkpoints = host.checkpoints
            return {
                "name": host.name, "state": host.state, "generation": host.generation,
                "guarantee": host.config.guarantee, "workers": workers,
                "last_completed_checkpoint": checkpoints.last_completed,
                "checkpoints": list(checkpoints.history)[-50:],
                "checkpoint_health": host.checkpoint_health().to_dict(),
                "inflight_checkpoints": sorted(checkpoints.inflight),
                "restarts": host.restarts, "recoveries": list(host.recoveries),
                "errors": list(self.errors)[-20:],
                "failure": self.failure,
                "spouts_finished": sorted(host.finished_spouts),
                "final_checkpoint": checkpoints.final_checkpoint,
                "uptime_s": round(now - self.started_at, 1),
                "state_backend": host.backend.uri,
                "backpressure": host.backpressure.status(),
                "components": host.descriptor["components"],
                "plan": {str(t): w for t, w in host.plan.items()},
                "upgrade": host.upgrade.status(),
                "rescale": host.rescale.status(),
                "run": host.run.to_dict() if host.run is not None else None,
            }
