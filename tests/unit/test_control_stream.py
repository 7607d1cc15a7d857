"""The Topology Master's end of a worker's control stream (``master/service.py``): a stream
that gRPC ends from the worker's side is a lost worker with its reason, never a traceback
in the TM's log (CI met one in ``master.log`` after a Ctrl-C: gRPC's server raises a bare
``RpcError``, without a status, when the worker cancelled)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest

from jstormpy.master.service import TopologyMasterService
from jstormpy.proto import jstorm_pb2 as pb
from tests.unit.test_launch_attempts import core_for


class Context:
    """What the service asks of gRPC's servicer context on this path."""

    def is_active(self) -> bool:
        return True

    def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


class Broken(grpc.RpcError):
    """A client-side error, with its status."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(("error", "reason"), [
    (grpc.RpcError(), "control stream broke (cancelled)"),
    (Broken(), "control stream broke (StatusCode.UNAVAILABLE)"),
])
def test_a_stream_ended_by_grpc_is_a_lost_worker_without_a_traceback(
        tmp_path: Path, monkeypatch: Any, caplog: Any, error: Exception, reason: str) -> None:
    core = core_for(tmp_path)
    service = TopologyMasterService(core, b"", "{}", "{}", lambda: None)
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))

    def requests() -> Any:
        yield pb.WorkerMessage(register=pb.Register(worker_id=0, pid=1, host="127.0.0.1",
                                                    code_version="v1"))
        raise error

    with caplog.at_level(logging.INFO, logger="jstormpy.master"):
        for _ in service.Control(requests(), Context()):  # ends once the stream is lost
            pass
    assert raised == []
    assert f"worker 0 lost: {reason}" in caplog.text
    assert "Traceback" not in caplog.text
    assert not any(s.alive for s in core.sessions.values())
