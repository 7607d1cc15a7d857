"""Security of a running topology: the TM's gRPC API and the workers' data ports.

A wrong secret gets UNAUTHENTICATED from every TM call; garbage and hostile frames sent
to a worker's data port get the connection closed, while the topology keeps running and
its output stays exact.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import grpc
import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import JStormError
from jstormpy.cli.client import MasterClient, Registration
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.proto import jstorm_pb2_grpc as pb_grpc
from jstormpy.runtime.transport import (
    HEADER,
    MAGIC,
    VERSION,
    FrameType,
    encode_frame,
)
from jstormpy.security.tls import ROLE_WORKER, client_context

from .components import NumberSpout, PassThrough
from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(120)

N = 1500


def topology(out):
    b = TopologyBuilder("sec")
    b.set_spout("numbers", NumberSpout(N, per_call=2, pause_s=0.004), parallelism=2)
    b.set_bolt("work", PassThrough, parallelism=2).fields_grouping("numbers", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).shuffle_grouping("work")
    return b.build()


@pytest.fixture
def running(tmp_path):
    """A running exactly-once topology; yields (handle, out dir)."""
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        handle = cluster.submit(topology(out), fast_config())
        wait_until(lambda: handle.status()["state"] == "running", what="running")
        yield handle, out


def check_unaffected(handle, out):
    """Still running to the end: drained, no recovery, exact output."""
    status = handle.wait(timeout=90)
    assert status["state"] == "drained"
    assert status["restarts"] == 0, status["recoveries"]
    assert sorted(r["seq"] for r in read_committed(out)) == list(range(N))


def unauthenticated(call) -> str:
    with pytest.raises(JStormError) as err:
        call()
    cause = err.value.__cause__
    assert isinstance(cause, grpc.RpcError)
    assert cause.code() == grpc.StatusCode.UNAUTHENTICATED, cause
    assert "UNAUTHENTICATED" in str(err.value)
    return cause.details()


def test_wrong_secret_is_refused_by_every_tm_call(running):
    handle, out = running
    reg = Registration.load("sec")
    bad = MasterClient(reg.address, b"wrong", reg.tls_dir)  # right certificate
    details = unauthenticated(bad.status)
    assert "authentication failed" in details
    unauthenticated(bad.metrics)
    unauthenticated(lambda: bad.checkpoint(5))
    unauthenticated(bad.rollback)
    unauthenticated(lambda: bad.kill("attacker"))
    # no token at all, and the call that hands out the pickled topology
    stub = pb_grpc.TopologyMasterStub(bad.channel)
    for call in (lambda: stub.Status(pb.StatusRequest(), timeout=10),
                 lambda: stub.GetTopology(pb.TopologyRequest(worker_id=0), timeout=10),
                 lambda: stub.GetTopology(pb.TopologyRequest(worker_id=0), timeout=10,
                                          metadata=(("x-jstorm-auth", "garbage"),))):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # a worker control stream with the wrong secret is refused too
    register = pb.WorkerMessage(register=pb.Register(worker_id=0, pid=1, host="127.0.0.1",
                                                     data_port=1))
    with pytest.raises(grpc.RpcError) as err:
        for _ in stub.Control(iter([register]), timeout=10):
            pass
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    bad.close()
    # the right secret still works, and nothing the attacker asked for happened
    good = MasterClient.for_registration(reg)
    status = good.status()
    assert status["state"] == "running"
    assert [w["alive"] for w in status["workers"]] == [True, True]
    check_unaffected(handle, out)


def closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Read until the peer closes; returns what it sent. Fails if it stays open."""
    sock.settimeout(0.2)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:  # reset, or TLS closed under us
            return got
        if not chunk:
            return got
        got += chunk
    raise AssertionError(f"connection still open after {timeout} s (received {got[:80]!r})")


def connect(port: int) -> tuple[socket.socket, bytes]:
    """Connect to a worker's data port over TLS with a worker certificate of the topology
    (an insider: the frame checks below TLS still hold); returns the socket and its
    CHALLENGE frame."""
    tls_dir = Registration.load("sec").tls_dir
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock = client_context(tls_dir).wrap_socket(sock, server_hostname=ROLE_WORKER)
    header = b""
    while len(header) < HEADER.size:
        header += sock.recv(HEADER.size - len(header))
    magic, version, ftype, _gen, length = HEADER.unpack(header)
    assert (magic, version, ftype, length) == (MAGIC, VERSION, FrameType.CHALLENGE, 32)
    challenge = b""
    while len(challenge) < length:
        challenge += sock.recv(length - len(challenge))
    return sock, challenge


def test_garbage_and_hostile_frames_on_data_ports_are_closed(running):
    handle, out = running
    ports = [w["port"] for w in handle.status()["workers"]]
    assert all(ports)
    stats_before = handle.status()["restarts"]
    expected_logs: list[str] = []  # each refusal is logged naming the peer (its address)

    def peer(sock: socket.socket) -> str:
        return f"127.0.0.1:{sock.getsockname()[1]}"

    for port in ports:
        # 0. plaintext (no TLS, no certificate): refused by the TLS handshake
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        expected_logs.append(f"TLS handshake with {peer(raw)} failed")
        raw.sendall(os.urandom(512))
        closed_by_peer(raw)
        raw.close()
        # 1. raw garbage instead of a handshake
        sock, _ = connect(port)
        expected_logs.append(f"closing connection from {peer(sock)}: bad magic")
        sock.sendall(os.urandom(512))
        reply = closed_by_peer(sock)
        sock.close()
        assert b"bad magic" in reply  # CLOSE frame with the reason
        # 2. an oversized length in an otherwise valid header: refused before reading it
        sock, _ = connect(port)
        expected_logs.append(f"closing connection from {peer(sock)}: ")
        sock.sendall(HEADER.pack(MAGIC, VERSION, FrameType.RESPONSE, 0, 0xFFFFFFF0))
        reply = closed_by_peer(sock)
        sock.close()
        assert b"exceeds max_frame_bytes" in reply
        # 3. a DATA frame before authenticating
        sock, _ = connect(port)
        expected_logs.append(f"closing connection from {peer(sock)}: unexpected DATA frame")
        sock.sendall(encode_frame(FrameType.DATA, 1, b"\x80\x05N."))
        assert b"unexpected DATA frame" in closed_by_peer(sock)
        sock.close()
        # 4. a well-formed RESPONSE with a wrong HMAC
        sock, _ = connect(port)
        expected_logs.append(f"authentication failed for {peer(sock)}: ")
        sock.sendall(encode_frame(FrameType.RESPONSE, 0, struct.pack("!I", 0) + os.urandom(64)))
        reply = closed_by_peer(sock)
        sock.close()
        assert b"authentication failed" in reply
        # 5. a connection dropped in the middle of a header
        sock, _ = connect(port)
        sock.sendall(MAGIC + bytes([VERSION]))
        sock.close()
    # the workers are the same processes, still serving, and the output is exact
    status = handle.status()
    assert status["state"] == "running"
    assert status["restarts"] == stats_before
    assert [w["alive"] for w in status["workers"]] == [True, True]
    assert [w["port"] for w in status["workers"]] == ports

    def logs() -> str:
        return "".join(p.read_text() for p in (handle.run_dir / "logs").glob("worker-*.log"))

    wait_until(lambda: all(line in logs() for line in expected_logs), timeout=10,
               what="every refusal logged naming the peer")
    check_unaffected(handle, out)
