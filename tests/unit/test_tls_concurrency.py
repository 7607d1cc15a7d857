"""One TLS data connection, two threads: a reader and a writer on the same socket.

OpenSSL forbids two threads inside one ``SSL`` object at once. These tests watch every
``SSL_read``/``SSL_write`` of real TLS connections (real sockets, the topology's
certificates) while both directions carry traffic, and check no two calls on one
connection ever overlap, every byte/frame arrives once and in order, and the transport
never had to reconnect (a corrupted TLS stream would show up as a broken connection and
a retransmission).
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from test_transport import wait_until

from jstormpy.runtime.tls_socket import DataPlaneTls, SerializedSSLSocket
from jstormpy.runtime.transport import Transport
from jstormpy.security.tls import create_topology_tls

pytestmark = pytest.mark.timeout(120)


class OverlapDetector:
    """Stands in for an SSLSocket's OpenSSL object and records overlapping calls."""

    def __init__(self, real: Any, stats: dict[str, int], lock: threading.Lock) -> None:
        self._real = real
        self._stats = stats
        self._lock = lock
        self._inside = 0

    def _enter(self) -> None:
        with self._lock:
            self._inside += 1
            self._stats["calls"] += 1
            self._stats["max_inside"] = max(self._stats["max_inside"], self._inside)

    def _leave(self) -> None:
        with self._lock:
            self._inside -= 1

    def read(self, *args: Any) -> Any:
        self._enter()
        try:
            return self._real.read(*args)
        finally:
            self._leave()

    def write(self, *args: Any) -> Any:
        self._enter()
        try:
            return self._real.write(*args)
        finally:
            self._leave()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def overlap(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every data connection made while the test runs gets an OverlapDetector."""
    stats = {"calls": 0, "max_inside": 0, "sockets": 0}
    lock = threading.Lock()
    serialize = SerializedSSLSocket.serialize

    def watched(self: SerializedSSLSocket) -> None:
        serialize(self)
        self._sslobj = OverlapDetector(self._sslobj, stats, lock)  # type: ignore[assignment]
        with lock:
            stats["sockets"] += 1

    monkeypatch.setattr(SerializedSSLSocket, "serialize", watched)
    return stats


def tls_pair(tls_dir: Path) -> tuple[ssl.SSLSocket, ssl.SSLSocket]:
    """A connected (client, server) pair of data-plane TLS sockets on 127.0.0.1."""
    tls = DataPlaneTls(tls_dir)
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[ssl.SSLSocket] = []

    def accept() -> None:
        raw, _ = listener.accept()
        raw.settimeout(10)
        accepted.append(tls.wrap_accepted(raw))

    th = threading.Thread(target=accept)
    th.start()
    raw = socket.create_connection(listener.getsockname(), timeout=10)
    client = tls.wrap_connected(raw)
    th.join(10)
    listener.close()
    assert accepted, "TLS handshake did not complete"
    client.settimeout(None)
    accepted[0].settimeout(None)
    return client, accepted[0]


def test_reader_and_writer_threads_never_overlap_inside_openssl(tmp_path: Path,
                                                                 overlap) -> None:
    """Both ends read and write at once, with writes big enough to fill the socket
    buffers (so OpenSSL has to wait and retry); every byte arrives intact."""
    client, server = tls_pair(create_topology_tls(tmp_path / "tls", "t"))
    total = 24 << 20
    results: dict[str, str] = {}
    errors: list[BaseException] = []

    def writer(sock: ssl.SSLSocket, name: str) -> None:
        digest = hashlib.sha256()
        sent = 0
        rnd = os.urandom(1 << 20)
        try:
            while sent < total:
                n = min(total - sent, 1 + (sent * 7919) % (1 << 20))  # odd sizes, some big
                chunk = rnd[:n]
                sock.sendall(chunk)
                digest.update(chunk)
                sent += n
            results[f"{name}-sent"] = digest.hexdigest()
        except BaseException as exc:  # surfaced by the main thread
            errors.append(exc)

    def reader(sock: ssl.SSLSocket, name: str) -> None:
        digest = hashlib.sha256()
        got = 0
        buf = bytearray(1 << 16)
        try:
            while got < total:
                n = sock.recv_into(buf)
                assert n, f"{name}: EOF after {got} bytes"
                digest.update(memoryview(buf)[:n])
                got += n
            results[f"{name}-received"] = digest.hexdigest()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(client, "c2s")),
               threading.Thread(target=reader, args=(server, "c2s")),
               threading.Thread(target=writer, args=(server, "s2c")),
               threading.Thread(target=reader, args=(client, "s2c"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(90)
    client.close()
    server.close()
    assert not errors, errors
    assert results["c2s-sent"] == results["c2s-received"]
    assert results["s2c-sent"] == results["s2c-received"]
    assert overlap["sockets"] == 2
    assert overlap["calls"] > 100  # both threads really were in OpenSSL many times
    assert overlap["max_inside"] == 1, "two threads were inside one SSL object at once"


def test_timeouts_keep_their_meaning_on_a_serialized_socket(tmp_path: Path) -> None:
    client, server = tls_pair(create_topology_tls(tmp_path / "tls", "t"))
    try:
        server.settimeout(0.2)
        assert server.gettimeout() == 0.2
        with pytest.raises(TimeoutError):
            server.recv(10)  # nothing sent: the logical timeout applies
        client.sendall(b"hello")
        assert server.recv(10) == b"hello"
        client.shutdown(socket.SHUT_RDWR)  # a reader sees EOF, not plaintext or a hang
        server.settimeout(5)
        assert server.recv(10) == b""
    finally:
        client.close()
        server.close()


def test_transport_over_tls_under_concurrent_send_and_ack(tmp_path: Path, overlap) -> None:
    """Two workers flood each other over TLS: each connection carries DATA one way while
    the receiver's ACK thread writes on it. Nothing is lost, duplicated or reordered,
    no connection broke, and OpenSSL was never entered twice at once."""
    tls = str(create_topology_tls(tmp_path / "tls", "t"))
    got: dict[int, list[Any]] = {1: [], 2: []}

    def sink(wid: int) -> Any:
        def deliver(task: int, item: Any) -> None:
            got[wid].append(item)
        return deliver

    a = Transport(1, b"s", sink(1), tls_dir=tls, connect_timeout_s=10.0,
                  send_buffer_bytes=1 << 20)
    b = Transport(2, b"s", sink(2), tls_dir=tls, connect_timeout_s=10.0,
                  send_buffer_bytes=1 << 20)
    try:
        a.start()
        b.start()
        a.set_peers({2: ("127.0.0.1", b.port)})
        b.set_peers({1: ("127.0.0.1", a.port)})
        n = 6000
        blob = os.urandom(64 << 10)

        def flood(src: Transport, dst: int) -> None:
            for i in range(n):
                payload = blob[: (i * 131) % len(blob)] if i % 50 == 0 else b""
                assert src.send(dst, 0, (i, payload))

        senders = [threading.Thread(target=flood, args=(a, 2)),
                   threading.Thread(target=flood, args=(b, 1))]
        for th in senders:
            th.start()
        for th in senders:
            th.join(90)
        wait_until(lambda: len(got[1]) == n and len(got[2]) == n, timeout=60,
                   what="every frame delivered")
        for wid in (1, 2):
            assert [i for i, _ in got[wid]] == list(range(n))
            assert all(p == blob[: (i * 131) % len(blob)] for i, p in got[wid] if i % 50 == 0)
        for t in (a, b):
            stats = t.stats
            for key in ("reconnects", "frames_retransmitted", "channels_lost",
                        "auth_failures", "malformed_frames", "frames_dropped"):
                assert stats.get(key, 0) == 0, (t.worker_id, key, stats)
        assert overlap["sockets"] >= 4  # both ends of both channels were watched
        assert overlap["max_inside"] == 1, "two threads were inside one SSL object at once"
    finally:
        a.close()
        b.close()
