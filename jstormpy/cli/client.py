"""A client of a Topology Master (used by TopologyHandle and the CLI)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from jstormpy.api.errors import JStormError
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.proto import jstorm_pb2_grpc as pb_grpc
from jstormpy.security.tls import grpc_channel
from jstormpy.security.tokens import auth_metadata


def jstorm_home() -> Path:
    """Where runs, checkpoints and the topology registry live (``$JSTORM_HOME``)."""
    return Path(os.environ.get("JSTORM_HOME", Path.home() / ".jstorm"))


@dataclass(frozen=True)
class Registration:
    """A running topology as recorded in ``$JSTORM_HOME/topologies/NAME.json``."""

    name: str
    address: str
    secret: str
    run_dir: str
    launcher_pid: int
    tls_dir: str = ""
    """The run's TLS directory (the CLI presents ``cli.pem`` from it); "" = TLS off."""

    @classmethod
    def load(cls, name: str, home: Path | None = None) -> Registration:
        """The registration of ``name`` under ``home`` (default ``$JSTORM_HOME``);
        JStormError if there is none."""
        path = (home or jstorm_home()) / "topologies" / f"{name}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise JStormError(f"no running topology named {name!r} (see `jstorm list`)") from None
        return cls(**data)

    def save(self, home: Path | None = None) -> None:
        """Write the registration under ``home`` (default ``$JSTORM_HOME``), readable by
        this user only: it holds the secret."""
        folder = (home or jstorm_home()) / "topologies"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(self.__dict__, fh)

    def remove(self, home: Path | None = None) -> None:
        """Forget the registration (under ``home``, default ``$JSTORM_HOME``)."""
        ((home or jstorm_home()) / "topologies" / f"{self.name}.json").unlink(missing_ok=True)

    @staticmethod
    def all(home: Path | None = None) -> list[Registration]:
        """Every registered topology (under ``home``, default ``$JSTORM_HOME``)."""
        folder = (home or jstorm_home()) / "topologies"
        out = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                out.append(Registration(**json.loads(path.read_text())))
            except (ValueError, TypeError):
                continue
        return out


class MasterClient:
    """Calls a Topology Master's gRPC API with the topology's secret."""

    def __init__(self, address: str, secret: bytes, tls_dir: str = "") -> None:
        self.address = address
        self.secret = secret
        # mutual TLS as the CLI identity (the only one allowed state-changing calls)
        self.channel = grpc_channel(address, tls_dir or None, "cli")
        self.stub = pb_grpc.TopologyMasterStub(self.channel)

    @classmethod
    def for_registration(cls, reg: Registration) -> MasterClient:
        """A client of a registered topology (its secret and TLS directory)."""
        return cls(reg.address, reg.secret.encode(), reg.tls_dir)

    def _call(self, method: str, request: Any, timeout: float = 10.0) -> Any:
        try:
            return getattr(self.stub, method)(
                request, metadata=auth_metadata(self.secret, method, request), timeout=timeout)
        except grpc.RpcError as exc:
            raise JStormError(f"Topology Master at {self.address}: {method} failed: "
                              f"{exc.code().name}: {exc.details()}") from exc

    def status(self, timeout: float = 10.0, wait_terminal_s: float = 0.0) -> dict[str, Any]:
        """The topology's status (see MasterCore.status). With ``wait_terminal_s`` the TM
        answers once the topology is drained, failed or killed, or after that long."""
        request = pb.StatusRequest(wait_terminal_s=wait_terminal_s)
        result: dict[str, Any] = json.loads(self._call("Status", request, timeout).json)
        return result

    def metrics(self, component: str = "") -> dict[str, Any]:
        """Metrics at every level."""
        reply = self._call("Metrics", pb.MetricsRequest(component=component))
        result: dict[str, Any] = json.loads(reply.json)
        return result

    def kill(self, reason: str = "") -> None:
        """Stop the topology."""
        self._call("Kill", pb.KillRequest(reason=reason))

    def checkpoint(self, timeout_s: float = 30.0) -> int:
        """Force a checkpoint and wait for it; returns its id."""
        reply = self._call("Checkpoint", pb.CheckpointRequest(timeout_s=timeout_s),
                           timeout=timeout_s + 5)
        if not reply.completed:
            raise JStormError(f"checkpoint {reply.checkpoint_id or ''} did not complete: "
                              f"{reply.error}")
        return int(reply.checkpoint_id)

    def checkpoint_committed(self, timeout_s: float = 30.0) -> int:
        """Force a checkpoint and wait until every sink task committed it (its output is
        visible); returns its id. ``savepoint --stop`` stops only then, so no staged
        transaction is left behind under a task id a restore may give to another task."""
        cid = self.checkpoint(timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            floor = self.status(timeout=5.0).get("rescale", {}).get("sinks_committed")
            if floor is None or floor >= cid:
                return cid
            if time.monotonic() > deadline:
                raise JStormError(f"the sinks did not commit checkpoint {cid} within "
                                  f"{timeout_s:.0f} s")
            time.sleep(0.02)  # polling interval of a condition

    def rollback(self, checkpoint_id: int | None = None) -> tuple[int, int]:
        """Roll back to a completed checkpoint; returns (checkpoint id, new generation)."""
        reply = self._call("Rollback", pb.RollbackRequest(checkpoint_id=checkpoint_id or 0))
        if not reply.ok:
            raise JStormError(f"rollback refused: {reply.error}")
        return int(reply.checkpoint_id), int(reply.generation)

    def upgrade(self, action: str, package: bytes = b"", entry: str = "",
                workers: list[int] | tuple[int, ...] = (), component: str = "",
                count: int = 0) -> dict[str, Any]:
        """Ask for an upgrade action (start/continue/complete/rollback/status); returns the
        upgrade state. JStormError (with the reason) if refused."""
        reply = self._call("Upgrade", pb.UpgradeRequest(
            action=action, package=package, entry=entry, workers=list(workers),
            component=component, count=count), timeout=180.0)
        if not reply.ok:
            raise JStormError(f"upgrade {action} refused: {reply.error}")
        result: dict[str, Any] = json.loads(reply.state_json)
        return result

    def wait_upgrade(self, timeout_s: float = 180.0,
                     on_progress: Any = None) -> dict[str, Any]:
        """Wait until no switch is running; returns the upgrade state. ``on_progress(state)``
        is called at every phase change."""
        deadline = time.monotonic() + timeout_s
        seen = None
        while True:
            try:
                state: dict[str, Any] = self.status(timeout=5.0)["upgrade"]
            except JStormError:
                state = {"phase": "unreachable"}
            key = (state.get("phase"), tuple(state.get("batch") or ()))
            if key != seen and on_progress is not None:
                on_progress(state)
            seen = key
            if state.get("phase") not in ("holding", "quiescing", "stopping", "restoring",
                                          "unreachable"):
                return state
            if time.monotonic() > deadline:
                raise JStormError(f"upgrade still {state.get('phase')} after {timeout_s} s")
            time.sleep(0.05)

    def rescale(self, parallelism: dict[str, int], workers: int = 0) -> dict[str, Any]:
        """Ask for a rescale (component -> new parallelism; ``workers``: a new number of
        worker processes, 0 = unchanged); returns the rescale state, whose ``requested``
        numbers this request. JStormError (with the reason) if refused."""
        reply = self._call("Rescale", pb.RescaleRequest(parallelism=parallelism,
                                                        workers=workers), timeout=60.0)
        if not reply.ok:
            raise JStormError(f"rescale refused: {reply.error}")
        result: dict[str, Any] = json.loads(reply.state_json)
        return result

    def wait_rescale(self, request: int, parallelism: dict[str, int],
                     timeout_s: float = 180.0, workers: int = 0) -> dict[str, Any]:
        """Wait until rescale ``request`` is over and the topology runs; returns its record
        (pause and step timings). JStormError if it was aborted; a Topology Master restarted
        meanwhile either adopted it (the components run at ``parallelism``) or not."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                status = self.status(timeout=5.0)
            except JStormError:
                status = {}
            state = status.get("rescale") or {}
            settled = status.get("state") in (TopologyState.RUNNING, TopologyState.DRAINED) \
                and state.get("phase") == "idle"
            if settled and (state.get("done", 0) >= request
                            or state.get("requested", 0) < request):
                now = {c["name"]: c["parallelism"] for c in status["components"]}
                ours = [r for r in state.get("history", []) if r.get("request") == request]
                count = len(status.get("workers", []))
                if all(now.get(n) == p for n, p in parallelism.items()) \
                        and (not workers or count == workers):
                    return ours[-1] if ours and state.get("requested", 0) >= request \
                        else {"request": request, "changes": parallelism, "error": ""}
                why = ours[-1]["error"] if ours and state.get("requested", 0) >= request \
                    else "the Topology Master restarted before the rescale committed"
                raise JStormError(f"rescale to {parallelism} did not happen: {why}")
            if status.get("state") in TERMINAL_STATES:
                raise JStormError(f"the topology is {status['state']} (rescale {request})")
            if time.monotonic() > deadline:
                raise JStormError(f"rescale still {state.get('phase')} after {timeout_s} s")
            time.sleep(0.05)

    def set_log_level(self, component: str, level: str) -> int:
        """Set a component's task log level ("" = every component); returns workers told."""
        reply = self._call("SetLogLevel", pb.SetLogLevelRequest(component=component,
                                                                level=level))
        if not reply.ok:
            raise JStormError(f"log level refused: {reply.error}")
        return int(reply.workers)

    def set_config(self, key: str, value: str) -> tuple[Any, str]:
        """Change a live-safe setting; returns (value applied, scope "master"|"workers")."""
        reply = self._call("SetConfig", pb.SetConfigRequest(key=key, value_json=value))
        if not reply.ok:
            raise JStormError(f"config change refused: {reply.error}")
        return json.loads(reply.applied_json), reply.scope

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()
