"""The worker's heartbeat thread never waits on the data plane.

Found by the chaos soak (issue 13, ``jstorm chaos`` seed 119: a worker SIGKILL, recovery
11 s instead of ~1 s, both surviving workers timed out by the TM): after every heartbeat
the heartbeat thread re-sends the credit totals to the peers, and ``Transport.send`` waits
while a peer's connection is being (re)made — up to ``connect_timeout_s`` (10 s) for a
peer that was just killed. No heartbeat went out meanwhile, so the TM declared the live
workers dead after ``worker_timeout_ms`` and restarted them too.
"""

from __future__ import annotations

import socket
import threading
import time

from jstormpy.runtime.transport import Transport
from jstormpy.runtime.worker import Worker


def _dead_port() -> int:
    """A local port nobody listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_resending_credit_totals_to_an_unreachable_peer_returns_at_once() -> None:
    worker = Worker("127.0.0.1:9", 0, b"secret")  # never connects to a TM in this test
    worker.transport = Transport(0, b"secret", lambda *a: None, connect_timeout_s=10.0)
    worker.transport.start()
    try:
        worker.transport.set_peers({1: ("127.0.0.1", _dead_port())})  # a killed peer
        worker.task_workers = {7: 1, 8: 0}     # task 7 (on worker 1) feeds task 8 (here)
        worker.credit_totals = {(7, 8): 40}
        done = threading.Event()
        started = time.monotonic()
        threading.Thread(target=lambda: (worker.resend_credit_totals(), done.set()),
                         daemon=True).start()
        assert done.wait(2.0), ("resend_credit_totals blocked on a peer that cannot be "
                                "reached: the heartbeat thread stops sending heartbeats")
        assert time.monotonic() - started < 2.0
    finally:
        worker.transport.close()
        worker.channel.close()


def test_the_credit_total_reaches_a_peer_that_comes_back() -> None:
    """Not waiting must not mean not sending: once the peer is reachable, a later resend
    (the next heartbeat) delivers the total."""
    got: list[tuple[int, int, int]] = []
    arrived = threading.Event()

    def on_credit(src: int, dst: int, total: int, _generation: int) -> None:
        got.append((src, dst, total))
        arrived.set()

    peer = Transport(1, b"secret", lambda *_: None, on_credit=on_credit)
    peer.start()
    worker = Worker("127.0.0.1:9", 0, b"secret")
    worker.transport = Transport(0, b"secret", lambda *a: None, connect_timeout_s=10.0)
    worker.transport.start()
    try:
        worker.transport.set_peers({1: ("127.0.0.1", peer.port)})
        worker.task_workers = {7: 1, 8: 0}
        worker.credit_totals = {(7, 8): 40}
        deadline = time.monotonic() + 10
        while not arrived.is_set() and time.monotonic() < deadline:
            worker.resend_credit_totals()  # what each heartbeat does
            arrived.wait(0.1)
        assert got and got[0] == (7, 8, 40)  # a CREDIT frame of channel 7 -> 8
    finally:
        worker.transport.close()
        peer.close()
        worker.channel.close()
