"""A worker started beside its Topology Master sends its first call once the TM listens.

A gRPC channel whose first connection is refused waits out a reconnect back-off (about
200 ms here) before trying again; the worker therefore waits for the TM's port with plain
connects first (``Worker.wait_for_tm_port``). What a user notices is the start-up time
(``bench/startup_bench.py``); these tests pin the two outcomes of the wait."""

from __future__ import annotations

import socket
import time

from jstormpy.runtime.worker import Worker


def test_returns_as_soon_as_the_tm_port_accepts() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        worker = Worker(f"127.0.0.1:{port}", 0, b"secret")
        t0 = time.monotonic()
        worker.wait_for_tm_port(time.monotonic() + 30)
        assert time.monotonic() - t0 < 5  # it returned on the connect, not at the deadline


def test_gives_up_at_the_deadline_when_nothing_listens() -> None:
    with socket.socket() as probe:  # a port nothing listens on (bound, never listening)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        worker = Worker(f"127.0.0.1:{port}", 0, b"secret")
        t0 = time.monotonic()
        worker.wait_for_tm_port(time.monotonic() + 0.3)
        waited = time.monotonic() - t0
    assert 0.3 <= waited < 10  # the RPC after it then reports the TM unreachable


def test_a_stopping_worker_stops_waiting() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        worker = Worker(f"127.0.0.1:{probe.getsockname()[1]}", 0, b"secret")
        worker.shutdown.set()
        t0 = time.monotonic()
        worker.wait_for_tm_port(time.monotonic() + 30)
        assert time.monotonic() - t0 < 5
