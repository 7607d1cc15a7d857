"""The Topology Master's gRPC service (contract: ``jstormpy/proto/jstorm.proto``)."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

from jstormpy.api.errors import JStormError
from jstormpy.master import ops
from jstormpy.master.core import MasterCore
from jstormpy.master.metrics import metrics_reply
from jstormpy.master.session import WorkerSession
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.proto import jstorm_pb2_grpc as pb_grpc
from jstormpy.security.tls import ROLE_CLI, ROLE_WORKER, grpc_server_credentials, peer_role
from jstormpy.security.tokens import AUTH_HEADER, ReplayCache, method_name, verify_token

log = logging.getLogger("jstormpy.master.service")


MAX_STATUS_WAIT_S = 5.0
"""Longest a Status long poll waits for a terminal state (``topology_state.TERMINAL_STATES``)."""
#: Calls that change the topology or run code: only the CLI/launcher identity may make them.
STATE_CHANGING = frozenset({"Kill", "Rollback", "Upgrade", "Rescale", "Checkpoint",
                            "SetLogLevel", "SetConfig"})
#: What each certificate role may call (mutual TLS; docs/security.md).
ALLOWED_CALLS: dict[str, frozenset[str] | None] = {
    ROLE_CLI: None,  # everything
    ROLE_WORKER: frozenset({"Control", "GetTopology"}),
}


class AuthInterceptor(grpc.ServerInterceptor):
    """Authenticates and authorizes every call before its handler runs.

    * With TLS, the peer's verified certificate names its role: a worker may only open
      its control stream and fetch the topology; state-changing calls need the CLI's
      certificate (PERMISSION_DENIED otherwise).
    * Every call carries a per-request HMAC token bound to the method and the request's
      digest; expired, forged or replayed tokens get UNAUTHENTICATED.

    Each refusal is logged with the reason and the peer's address.
    """

    def __init__(self, secret: bytes, tls: bool = False) -> None:
        self.secret = secret
        self.tls = tls
        self.replay = ReplayCache()

    def _problem(self, method: str, token: str, request: Any,
                 context: grpc.ServicerContext) -> tuple[grpc.StatusCode, str] | None:
        if self.tls:
            role = peer_role(context)
            allowed = ALLOWED_CALLS.get(role, frozenset())
            if allowed is not None and method not in allowed:
                return (grpc.StatusCode.PERMISSION_DENIED,
                        f"permission denied: certificate {role or '(none)'!r} may not call "
                        f"{method}")
        problem = (verify_token(self.secret, token, method, request, self.replay)
                   if token else "no token")
        if problem is None:
            return None
        return (grpc.StatusCode.UNAUTHENTICATED,
                f"authentication failed: {problem} (wrong JSTORM_SECRET?)")

    def _check(self, method: str, token: str, request: Any,
               context: grpc.ServicerContext) -> None:
        refusal = self._problem(method, token, request, context)
        if refusal is not None:
            log.warning("refused %s from %s: %s", method, context.peer(), refusal[1])
            context.abort(*refusal)

    def intercept_service(self, continuation: Callable[..., Any],
                          handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = method_name(handler_call_details.method)
        token = dict(handler_call_details.invocation_metadata or ()).get(AUTH_HEADER, "")
        if handler.unary_unary is not None:
            unary = handler.unary_unary

            def checked_unary(request: Any, context: grpc.ServicerContext) -> Any:
                self._check(method, token, request, context)
                return unary(request, context)

            return grpc.unary_unary_rpc_method_handler(
                checked_unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.stream_stream is not None:
            stream = handler.stream_stream

            def checked_stream(requests: Any, context: grpc.ServicerContext) -> Any:
                self._check(method, token, None, context)
                return stream(requests, context)

            return grpc.stream_stream_rpc_method_handler(
                checked_stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler  # pragma: no cover - the service has no other call shapes


class TopologyMasterService(pb_grpc.TopologyMasterServicer):
    """Adapts gRPC calls onto :class:`MasterCore`."""

    def __init__(self, core: MasterCore, topology_blob: bytes, config_json: str,
                 descriptor_json: str, on_kill: Callable[[], None]) -> None:
        self.core = core
        self.topology_blob = topology_blob
        self.config_json = config_json
        self.descriptor_json = descriptor_json
        self.on_kill = on_kill

    def Control(self, request_iterator: Iterator[Any],  # noqa: N802
                context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            first = next(request_iterator)
        except StopIteration:
            return
        if first.WhichOneof("body") != "register":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "the first message on a control stream must be Register")
        reg = first.register
        session = WorkerSession(reg.worker_id, reg.pid, reg.host, reg.data_port,
                                reg.code_version, launch_attempt=reg.launch_attempt)
        try:
            self.core.register(session, reg.generation)
        except JStormError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        ops.replay(self.core, session)  # live log levels / settings for a respawned worker
        done = threading.Event()

        def read() -> None:
            reason = "control stream closed"
            try:
                for msg in request_iterator:
                    self._on_worker_message(session, msg)
            except grpc.RpcError as exc:
                # a client's RpcError carries its status; the server's request iterator
                # raises a bare one when the worker cancelled or went away (a kill's end)
                code = getattr(exc, "code", None)
                reason = f"control stream broke ({code() if callable(code) else 'cancelled'})"
            except Exception:
                log.exception("error handling a message from worker %d", session.worker_id)
                reason = "protocol error"
            finally:
                done.set()
                self.core.worker_lost(session, reason)
                session.outq.put(None)

        threading.Thread(target=read, name=f"control-{reg.worker_id}", daemon=True).start()
        while True:
            try:
                msg = session.outq.get(timeout=1.0)
            except queue.Empty:
                if not context.is_active():
                    self.core.worker_lost(session, "control stream inactive")
                    return
                continue
            if msg is None:
                return
            yield msg
            if msg.WhichOneof("body") == "shutdown" and not session.alive:
                return

    def _on_worker_message(self, session: WorkerSession, msg: Any) -> None:
        body = msg.WhichOneof("body")
        core = self.core
        if not session.alive and body != "heartbeat":
            # fencing: a worker the TM declared lost (or replaced) is a zombie if it still
            # talks; its acks, commits and readiness belong to an incarnation that is gone
            return
        if body == "heartbeat":
            core.on_heartbeat(session, msg.heartbeat)
        elif body == "checkpoint_ack":
            session.last_seen = time.monotonic()
            core.on_checkpoint_ack(msg.checkpoint_ack)
        elif body == "checkpoint_failed":
            core.on_checkpoint_failed(msg.checkpoint_failed)
        elif body == "ready":
            core.on_ready(msg.ready)
        elif body == "task_error":
            core.on_task_error(msg.task_error)
        elif body == "sink_committed":
            core.on_sink_committed(msg.sink_committed)

    def GetTopology(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        # the code version assigned to this worker (gray release: master/upgrade.py)
        version, package, entry, digest = self.core.upgrade.package_for(request.worker_id)
        rescaled = self.core.rescale  # after a rescale: the new layout (master/rescale.py)
        return pb.TopologyBlob(topology=(rescaled.topology_blob or self.topology_blob)
                               if not package else b"",
                               config_json=rescaled.config_json or self.config_json,
                               name=self.core.name,
                               descriptor_json=rescaled.descriptor_json or self.descriptor_json,
                               code_version=version, package=package, entry=entry,
                               digest=digest,
                               run_json=json.dumps(self.core.run.to_dict())
                               if self.core.run is not None else "")

    def Upgrade(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        try:
            state = self.core.upgrade.request(
                request.action, package=request.package, entry=request.entry,
                workers=list(request.workers), component=request.component,
                count=request.count)
        except JStormError as exc:
            log.warning("refused Upgrade %s from %s: %s", request.action, context.peer(), exc)
            return pb.UpgradeReply(ok=False, error=str(exc),
                                   state_json=json.dumps(self.core.upgrade.status()))
        return pb.UpgradeReply(ok=True, state_json=json.dumps(state, default=str))

    def Rescale(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        try:
            state = self.core.rescale.request(dict(request.parallelism),
                                              workers=request.workers)
        except JStormError as exc:
            log.warning("refused Rescale %s from %s: %s", dict(request.parallelism),
                        context.peer(), exc)
            return pb.RescaleReply(ok=False, error=str(exc),
                                   state_json=json.dumps(self.core.rescale.status()))
        return pb.RescaleReply(ok=True, state_json=json.dumps(state, default=str))

    def Status(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        if request.wait_terminal_s > 0:  # a long poll: at most MAX_STATUS_WAIT_S per call
            self.core.wait_state(TERMINAL_STATES, min(request.wait_terminal_s,
                                                      MAX_STATUS_WAIT_S))
        return pb.StatusReply(json=json.dumps(self.core.status(), default=str))

    def Metrics(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        snap = metrics_reply(self.core, request.component)  # same as /api/metrics
        return pb.MetricsReply(json=json.dumps(snap, default=str))

    def Kill(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self.core.kill(request.reason or "killed from the CLI")
        threading.Thread(target=self._stop_when_workers_gone, name="kill", daemon=True).start()
        return pb.KillReply(ok=True)

    def _stop_when_workers_gone(self, limit_s: float = 0.5) -> None:
        """Stop the TM once every worker has closed its control stream (they got the
        shutdown message), or after ``limit_s`` — not after a fixed delay."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            with self.core.lock:
                if not any(s.alive for s in self.core.sessions.values()):
                    break
            time.sleep(0.005)
        self.on_kill()

    def Checkpoint(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        core = self.core
        deadline = time.monotonic() + (request.timeout_s or 30.0)
        cid = None
        while cid is None and time.monotonic() < deadline:
            cid = core.trigger_checkpoint(force=True)
            if cid is None and core.wait_state((TopologyState.RUNNING,), 0.1):
                with core.lock:  # running but held (e.g. an upgrade switch): do not spin
                    core.state_changed.wait(0.05)
        if cid is None:
            return pb.CheckpointReply(error=f"topology is {core.state}; no checkpoint taken")
        while time.monotonic() < deadline:
            with core.lock:
                for entry in reversed(core.checkpoints.history):
                    if entry["id"] == cid and entry["generation"] == core.generation:
                        ok = entry["status"] == "completed"
                        return pb.CheckpointReply(checkpoint_id=cid, completed=ok,
                                                  error=entry["error"])
                core.state_changed.wait(0.05)
        return pb.CheckpointReply(checkpoint_id=cid, completed=False,
                                  error="not completed before the timeout")

    def Rollback(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        try:
            target, gen = self.core.rollback(request.checkpoint_id or None)
        except JStormError as exc:
            return pb.RollbackReply(ok=False, error=str(exc))
        return pb.RollbackReply(ok=True, checkpoint_id=target or 0, generation=gen)

    # -- operations (master/ops.py) ------------------------------------------------------------
    def SetLogLevel(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        try:
            n = ops.set_log_level(self.core, request.component, request.level)
        except JStormError as exc:
            return pb.SetLogLevelReply(ok=False, error=str(exc))
        return pb.SetLogLevelReply(ok=True, workers=n)

    def SetConfig(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        try:
            value, scope = ops.set_config(self.core, request.key, request.value_json)
        except JStormError as exc:
            return pb.SetConfigReply(ok=False, error=str(exc))
        return pb.SetConfigReply(ok=True, applied_json=json.dumps(value), scope=scope)


def serve(core: MasterCore, service: TopologyMasterService, secret: bytes, host: str,
          port: int, tls_dir: str = "") -> grpc.Server:
    """Start the gRPC server (returns it; call ``wait_for_termination``). With ``tls_dir``
    it serves mutual TLS only (client certificates required, signed by the topology CA)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64),
                         interceptors=[AuthInterceptor(secret, tls=bool(tls_dir))],
                         options=[("grpc.max_receive_message_length", 256 << 20),
                                  ("grpc.max_send_message_length", 256 << 20),
                                  ("grpc.so_reuseport", 0)])
    pb_grpc.add_TopologyMasterServicer_to_server(service, server)
    if tls_dir:
        bound = server.add_secure_port(f"{host}:{port}", grpc_server_credentials(tls_dir))
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise JStormError(f"Topology Master cannot bind {host}:{port}")
    server.start()
    return server
