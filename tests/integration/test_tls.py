"""Mutual TLS and per-request authentication on gRPC to a real Topology Master.

One running topology takes every attack in turn (plaintext, a certificate from another
CA, a worker's certificate calling Kill, replayed / expired / moved tokens); each is
refused, the TM logs the reason and the peer, and the topology still drains with
exactly its output. A fake TM with the wrong certificate gets nothing decoded by a worker.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import socket
import stat
import threading
import time
import zipfile
from concurrent import futures
from pathlib import Path

import cloudpickle
import grpc
import pytest

from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import ConfigError, JStormError
from jstormpy.cli.client import MasterClient, Registration
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.proto import jstorm_pb2_grpc as pb_grpc
from jstormpy.security.tls import (
    ROLE_TM,
    ROLE_WORKER,
    client_context,
    create_topology_tls,
    grpc_channel,
    issue,
    new_ca,
)
from jstormpy.security.tokens import AUTH_HEADER, _mac, auth_metadata, body_digest
from jstormpy.testing.semantics import check_sequences

from .components import NumberSpout, PassThrough
from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(150)

N = 1200


def topology(out: Path):  # type: ignore[no-untyped-def]
    b = TopologyBuilder("tlssec")
    b.set_spout("numbers", NumberSpout(N, per_call=2, pause_s=0.004), parallelism=2)
    b.set_bolt("work", PassThrough, parallelism=2).fields_grouping("numbers", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).shuffle_grouping("work")
    return b.build()


def rpc_error(call) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value


def test_tls_material_is_private(tmp_path):
    root = create_topology_tls(tmp_path / "tls", "t")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    for role in ("tm", "worker", "cli"):
        assert stat.S_IMODE(os.stat(root / f"{role}.key").st_mode) == 0o600
    assert not list(root.glob("ca.key")), "the CA key is not kept"
    with pytest.raises(ConfigError, match="go together"):
        Config(tls_ca_cert="/x.pem")


def test_every_attack_on_the_tm_is_refused_and_the_topology_loses_nothing(tmp_path):
    out = tmp_path / "out"
    other = create_topology_tls(tmp_path / "other", "attacker")  # another CA
    with LocalCluster() as cluster:
        handle = cluster.submit(topology(out), fast_config())
        wait_until(lambda: handle.status()["state"] == "running", what="running")
        reg = Registration.load("tlssec")
        assert reg.tls_dir and Path(reg.tls_dir, "cli.pem").is_file()
        secret = reg.secret.encode()

        # 1. plaintext, and a client certificate from another CA: no TLS session at all
        for client in (MasterClient(reg.address, secret),
                       MasterClient(reg.address, secret, str(other))):
            with pytest.raises(JStormError, match="UNAVAILABLE"):
                client.kill("attacker")
            client.close()

        # 2. a worker's certificate (right CA, right secret) cannot call Kill or Status
        worker_ch = grpc_channel(reg.address, reg.tls_dir, "worker")
        stub = pb_grpc.TopologyMasterStub(worker_ch)
        for method, req in (("Kill", pb.KillRequest(reason="from a worker")),
                            ("Rollback", pb.RollbackRequest()),
                            ("Status", pb.StatusRequest())):
            err = rpc_error(lambda m=method, r=req: getattr(stub, m)(
                r, metadata=auth_metadata(secret, m, r), timeout=10))
            assert err.code() == grpc.StatusCode.PERMISSION_DENIED, err
            assert "jstorm-worker" in err.details()
        worker_ch.close()

        # 3. with the CLI's certificate: replayed, moved and expired tokens are refused
        cli_ch = grpc_channel(reg.address, reg.tls_dir, "cli")
        cli = pb_grpc.TopologyMasterStub(cli_ch)
        status_req = pb.StatusRequest()
        seen = auth_metadata(secret, "Status", status_req)
        assert cli.Status(status_req, metadata=seen, timeout=10).json  # first use: fine
        err = rpc_error(lambda: cli.Status(status_req, metadata=seen, timeout=10))
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED and "replayed" in err.details()
        fresh = auth_metadata(secret, "Status", status_req)  # a Status token used for Kill
        err = rpc_error(lambda: cli.Kill(pb.KillRequest(reason="moved"), metadata=fresh,
                                         timeout=10))
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED and "another call" in err.details()
        kill_req = pb.KillRequest(reason="tampered")  # a Kill token with another body
        token = auth_metadata(secret, "Kill", pb.KillRequest(reason="original"))
        err = rpc_error(lambda: cli.Kill(kill_req, metadata=token, timeout=10))
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED
        stamp, nonce = str(int(time.time() * 1000) - 3_600_000), "ab" * 16
        old = f"{stamp}:{nonce}:{_mac(secret, stamp, nonce, 'Status', body_digest(status_req))}"
        err = rpc_error(lambda: cli.Status(status_req, metadata=((AUTH_HEADER, old),),
                                           timeout=10))
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED and "expired" in err.details()
        cli_ch.close()

        # 4. a malicious code package given to Upgrade: refused, naming the entry
        admin = MasterClient.for_registration(reg)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("topology.py", "topology = None\n")
            zf.writestr("../../escape.py", "x")
        with pytest.raises(JStormError, match=r"'\.\./\.\./escape\.py'.*outside"):
            admin.upgrade("start", package=buf.getvalue(), entry="topology.py", workers=[0])
        admin.close()
        assert not (Path(reg.run_dir).parent / "escape.py").exists()

        # the TM logged each refusal with its reason and the peer
        log_text = (Path(reg.run_dir) / "logs" / "master.log").read_text()
        assert "refused Kill from ipv4:127.0.0.1:" in log_text
        assert "replayed token" in log_text and "expired" in log_text
        assert "refused Upgrade start from ipv4:127.0.0.1:" in log_text

        # nothing the attacker asked for happened
        status = handle.wait(timeout=90)
        assert status["state"] == "drained"
        assert status["restarts"] == 0, status["recoveries"]
        assert sorted(r["seq"] for r in read_committed(out)) == list(range(N))


class _FakeMaster(pb_grpc.TopologyMasterServicer):
    """Answers GetTopology with a pickle that leaves a mark when it is decoded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def GetTopology(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        mark = self.marker
        return pb.TopologyBlob(topology=cloudpickle.dumps(_Mark(mark)), config_json="{}",
                               name="x", descriptor_json="{}")


class _Mark:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.write_text, (self.path, "decoded"))


def _fake_tm(tls_dir: Path, cert_role: str, marker: Path) -> tuple[grpc.Server, str]:
    ca = (tls_dir / "ca.pem").read_bytes()
    cert = (tls_dir / f"{cert_role}.pem").read_bytes()
    key = (tls_dir / f"{cert_role}.key").read_bytes()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_TopologyMasterServicer_to_server(_FakeMaster(marker), server)
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=False))
    server.start()
    return server, f"127.0.0.1:{port}"


def _dir_from_ca(root: Path, ca_pem: bytes, ca_key: bytes,
                 tm_not_before: datetime.datetime | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "ca.pem").write_bytes(ca_pem)
    for role, cn in (("tm", ROLE_TM), ("worker", "jstorm-worker"), ("cli", "jstorm-cli")):
        start = tm_not_before if role == "tm" else None
        cert, key = issue(ca_pem, ca_key, cn, days=1, not_before=start)
        (root / f"{role}.pem").write_bytes(cert)
        (root / f"{role}.key").write_bytes(key)
    return root


@pytest.mark.parametrize("impostor", ["other CA", "worker certificate", "expired"])
def test_worker_decodes_nothing_from_an_impostor_tm(tmp_path, monkeypatch, impostor):
    from jstormpy.runtime.worker import Worker

    ca_pem, ca_key = new_ca("t")
    real = _dir_from_ca(tmp_path / "real", ca_pem, ca_key)
    marker = tmp_path / "decoded"
    if impostor == "other CA":
        fake_dir, role = create_topology_tls(tmp_path / "fake", "t"), "tm"
    elif impostor == "worker certificate":  # a compromised worker poses as the TM
        fake_dir, role = real, "worker"
    else:  # the right CA, the right name, but the certificate has expired
        long_ago = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
        fake_dir, role = _dir_from_ca(tmp_path / "exp", ca_pem, ca_key, long_ago), "tm"
    server, address = _fake_tm(fake_dir, role, marker)
    try:
        monkeypatch.setenv("JSTORM_TLS_DIR", str(real))
        worker = Worker(address, 0, b"secret")
        with pytest.raises(SystemExit, match="unreachable"):
            worker.fetch_topology(timeout_s=1.0)
        worker.channel.close()
        assert not marker.exists(), "the worker decoded a pickle from an impostor"
        # control: a worker trusting the impostor's certificate *does* decode it
        if impostor == "other CA":
            monkeypatch.setenv("JSTORM_TLS_DIR", str(fake_dir))
            trusting = Worker(address, 0, b"secret")
            with contextlib.suppress(Exception):  # the mark is not a Topology
                trusting.fetch_topology(timeout_s=5.0)
            trusting.channel.close()
            assert marker.read_text() == "decoded"
    finally:
        server.stop(0)


@pytest.mark.slow
def test_data_port_flood_and_slow_loris_lose_nothing(tmp_path):
    """A connection flood, slow-loris handshakes, wrong certificates and garbage bytes on the
    data ports at once: each is refused and logged naming the peer, and the topology keeps
    its throughput and loses nothing."""
    n, keys = 8000, 7
    out = tmp_path / "out"
    b = TopologyBuilder("flood")
    b.set_spout("numbers", NumberSpout(n, keys=keys, per_call=2, pause_s=0.008),
                parallelism=2)
    b.set_bolt("work", PassThrough, parallelism=2).fields_grouping("numbers", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).shuffle_grouping("work")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), fast_config())
        wait_until(lambda: handle.status()["state"] == "running", what="running")
        ports = [w["port"] for w in handle.status()["workers"]]
        stop = threading.Event()

        def emitted() -> int:
            return int(handle.metrics()["components"].get("numbers", {}).get("emitted", 0))

        wait_until(lambda: emitted() > 0, what="records flowing")
        t_a, e_a = time.monotonic(), emitted()
        wait_until(lambda: emitted() >= e_a + 1000, timeout=30, what="steady flow")
        rate_before = (emitted() - e_a) / (time.monotonic() - t_a)
        t_b, e_b = time.monotonic(), emitted()

        def slow_loris(port: int) -> None:  # one byte every 0.3 s, never a handshake
            with contextlib.suppress(OSError):
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                while not stop.wait(0.3):
                    sock.sendall(b"\x16")
                sock.close()

        foreign = client_context(create_topology_tls(tmp_path / "foreign", "x"))
        hostile_peers: list[str] = []

        def hostile(port: int) -> None:  # wrong certificates and garbage, over and over
            while not stop.wait(0.05):
                with contextlib.suppress(OSError):
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    hostile_peers.append(f"127.0.0.1:{sock.getsockname()[1]}")
                    with contextlib.suppress(OSError):
                        foreign.wrap_socket(sock, server_hostname=ROLE_WORKER).close()
                    sock.close()
                with contextlib.suppress(OSError):
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    sock.sendall(os.urandom(300))  # not even TLS
                    sock.close()

        lorises = [threading.Thread(target=slow_loris, args=(p,), daemon=True)
                   for p in ports for _ in range(3)]
        lorises += [threading.Thread(target=hostile, args=(p,), daemon=True) for p in ports]
        for t in lorises:
            t.start()
        flood = []
        for _ in range(300):  # above the per-worker caps (256 connections, 32 handshakes)
            for port in ports:
                with contextlib.suppress(OSError):
                    flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        logs = handle.run_dir / "logs"
        wait_until(lambda: "handshake not completed within" in "".join(
            p.read_text() for p in logs.glob("worker-*.log")), timeout=30,
            what="the slow-loris connections cut at the handshake deadline")
        rate_during = (emitted() - e_b) / (time.monotonic() - t_b)
        for sock in flood:
            sock.close()
        stop.set()
        status = handle.wait(timeout=120)
    assert status["state"] == "drained" and status["restarts"] == 0, status["recoveries"]
    # the paced spouts keep (at least half) their rate while the data ports are attacked
    assert rate_during >= 0.5 * rate_before, (rate_before, rate_during)
    text = "".join(p.read_text() for p in logs.glob("worker-*.log"))
    assert "refused connection from 127.0.0.1:" in text
    # wrong-certificate handshakes that got past the caps were refused, naming the peer
    # (those the caps refused at accept are logged at most once a second, rate-limited)
    refused = [peer for peer in hostile_peers if f"TLS handshake with {peer} failed" in text]
    assert refused, hostile_peers[:20]
    records = [{"key": r["key"], "i": r["seq"] // keys} for r in read_committed(out)]
    expected = {f"k{k}": len(range(k, n, keys)) for k in range(keys)}
    report = check_sequences(records, key="key", seq="i", expected=expected)
    assert not report.lost and not report.duplicated and not report.unexpected, report
