"""Data-plane hardening against real sockets: mutual TLS between workers, a total
handshake deadline (slow loris), caps on connections and concurrent handshakes (flood),
and a RESPONSE length checked before reading. Each refusal is logged naming the peer and
an authenticated peer keeps being served."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

import pytest
from test_transport import Sink, raw_connect, read_frame, wait_until

from jstormpy.runtime.transport import HEADER, MAGIC, VERSION, FrameType, Transport
from jstormpy.security.tls import create_topology_tls

SECRET = b"topology-secret"
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def made():
    transports: list[Transport] = []
    yield transports
    for t in transports:
        t.close()


def start(made: list[Transport], wid: int, deliver=None, **kw) -> Transport:  # type: ignore[no-untyped-def]
    kw.setdefault("connect_timeout_s", 2.0)
    if deliver is None:  # not `deliver or ...`: an empty Sink is falsy
        deliver = lambda *_: None  # noqa: E731
    t = Transport(wid, kw.pop("secret", SECRET), deliver, **kw)
    t.start()
    made.append(t)
    return t


def delivers(sender: Transport, sink: Sink, wid: int, n: int) -> None:
    """``n`` more frames from ``sender`` reach ``sink`` in order."""
    before = len(sink)
    for i in range(n):
        assert sender.send(wid, 0, ("x", i))
    wait_until(lambda: len(sink) == before + n)
    assert [item[1] for _, item in sink.items[before:]] == list(range(n))


def test_tls_data_plane_and_foreign_certificates(tmp_path: Path, made, caplog) -> None:
    tls = str(create_topology_tls(tmp_path / "tls", "t"))
    foreign = str(create_topology_tls(tmp_path / "foreign", "other"))
    sink = Sink()
    server = start(made, 2, sink, tls_dir=tls)
    sender = start(made, 1, tls_dir=tls)
    sender.set_peers({2: ("127.0.0.1", server.port)})
    delivers(sender, sink, 2, 200)
    # the right secret but a certificate of another CA, or no TLS at all: refused
    with caplog.at_level(logging.WARNING):
        for kw in ({"tls_dir": foreign}, {}):
            intruder = start(made, 9, **kw, connect_timeout_s=0.5)
            intruder.set_peers({2: ("127.0.0.1", server.port)})
            assert intruder.send(2, 0, ("evil", 0)) is False
        wait_until(lambda: server.stats["auth_failures"] >= 2)
    assert "TLS handshake with 127.0.0.1:" in caplog.text
    assert all(item[0] == "x" for _, item in sink.items)
    delivers(sender, sink, 2, 50)  # the real peer is still served


def test_slow_loris_is_cut_at_the_total_handshake_deadline(made, caplog) -> None:
    sink = Sink()
    server = start(made, 2, sink, handshake_timeout_s=1.0)
    sender = start(made, 1)
    sender.set_peers({2: ("127.0.0.1", server.port)})
    delivers(sender, sink, 2, 10)
    sock, _ = raw_connect(server.port)
    peer = "127.0.0.1:%d" % sock.getsockname()[1]
    response = HEADER.pack(MAGIC, VERSION, FrameType.RESPONSE, 0, 68) + bytes(68)
    started = time.monotonic()
    closed_after = None
    with caplog.at_level(logging.WARNING):
        for i in range(len(response)):  # one byte every 0.2 s: each read is "in time"
            try:
                sock.sendall(response[i:i + 1])
                sock.settimeout(0.2)
                if sock.recv(1) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_after = time.monotonic() - started
                break
        delivers(sender, sink, 2, 10)  # served meanwhile and after
    sock.close()
    assert closed_after is not None and closed_after < 3.0, closed_after
    assert f"closing connection from {peer}: handshake not completed within 1.0s" \
        in caplog.text


def test_connection_flood_is_capped_and_the_established_peer_is_served(made, caplog) -> None:
    sink = Sink()
    server = start(made, 2, sink, max_connections=6, max_handshakes=3)
    sender = start(made, 1)
    sender.set_peers({2: ("127.0.0.1", server.port)})
    delivers(sender, sink, 2, 10)
    threads_before = threading.active_count()
    flood: list[socket.socket] = []
    with caplog.at_level(logging.WARNING):
        for _ in range(40):
            flood.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        challenged = 0
        for sock in flood:
            frame = read_frame(sock)  # a CHALLENGE, or EOF when refused at accept
            challenged += frame is not None
        delivers(sender, sink, 2, 100)  # the authenticated peer is not starved
    assert challenged == 3, "only max_handshakes unauthenticated connections are served"
    assert threading.active_count() - threads_before <= 3
    assert "refused connection from 127.0.0.1:" in caplog.text
    assert "handshakes in progress (max 3)" in caplog.text
    for sock in flood:
        sock.close()
    # once the flood is gone new peers are admitted again
    wait_until(lambda: server._guard is not None and server._guard.handshakes == 0)
    sock, _ = raw_connect(server.port)
    sock.close()


def test_total_connection_cap(made, caplog) -> None:
    server = start(made, 2, max_connections=2, max_handshakes=10)
    kept = [raw_connect(server.port)[0] for _ in range(2)]
    with caplog.at_level(logging.WARNING):
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        assert read_frame(extra) is None
    assert "2 connections open (max 2)" in caplog.text
    for sock in [*kept, extra]:
        sock.close()


def test_response_length_is_checked_before_reading(made) -> None:
    server = start(made, 2)  # max_frame_bytes is 64 MiB: the RESPONSE bound is far lower
    sock, _ = raw_connect(server.port)
    started = time.monotonic()
    sock.sendall(HEADER.pack(MAGIC, VERSION, FrameType.RESPONSE, 0, 1000))  # and no payload at all
    frame = read_frame(sock)
    assert frame is not None and b"exceeds max_frame_bytes=68" in frame[2]
    assert time.monotonic() - started < 1.0
    sock.close()
    wait_until(lambda: server.stats["malformed_frames"] == 1)
