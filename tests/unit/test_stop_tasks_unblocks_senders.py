"""Stopping the tasks never waits for a peer that cannot be reached.

Found by the chaos soak (issue 13, seed 117, ``tm_kill_during_upgrade``: recovery 11 s).
When the control stream to the TM breaks (the TM was killed), the worker stops its tasks
before it reconnects. A task blocked in ``Transport.send`` on a channel that is
reconnecting — here to the worker the gray release had just restarted — only gave up after
``connect_timeout_s`` (10 s), so the worker re-registered with the new TM 10 s late and
the recovery waited for it.
"""

from __future__ import annotations

import socket
import threading
import time

from jstormpy.runtime.transport import Transport
from jstormpy.runtime.worker import Worker


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _blocked_send(transport: Transport) -> tuple[threading.Event, list[bool]]:
    done, result = threading.Event(), []

    def run() -> None:
        result.append(transport.send(1, 5, ("data", 1), transport.generation))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, result


def test_stop_tasks_releases_a_send_waiting_for_an_unreachable_peer() -> None:
    worker = Worker("127.0.0.1:9", 0, b"secret")  # never connects to a TM in this test
    worker.transport = Transport(0, b"secret", lambda *a: None, connect_timeout_s=10.0)
    worker.transport.start()
    try:
        worker.transport.set_peers({1: ("127.0.0.1", _dead_port())})
        done, result = _blocked_send(worker.transport)
        assert not done.wait(0.5), "the send should wait while the channel connects"
        started = time.monotonic()
        worker.stop_tasks()  # what the worker does when the TM's control stream breaks
        assert done.wait(2.0), "a send waiting for an unreachable peer held up stop_tasks"
        assert result == [False] and time.monotonic() - started < 2.0
    finally:
        worker.transport.close()
        worker.channel.close()


def test_sends_work_again_in_the_next_generation() -> None:
    got = threading.Event()
    peer = Transport(1, b"secret", lambda *a: got.set())
    peer.start()
    t = Transport(0, b"secret", lambda *a: None, connect_timeout_s=10.0)
    t.start()
    try:
        t.set_peers({1: ("127.0.0.1", _dead_port())})
        done, result = _blocked_send(t)
        assert not done.wait(0.3)
        t.interrupt_sends()
        assert done.wait(2.0) and result == [False]
        assert t.send(1, 5, ("data", 2), wait=False) is False  # still stopped
        t.set_generation(t.generation + 1)  # Prepare of the next generation
        t.set_peers({1: ("127.0.0.1", peer.port)})
        peer.set_generation(t.generation)
        assert t.send(1, 5, ("data", 3), t.generation)
        assert got.wait(10), "the frame of the new generation never arrived"
    finally:
        t.close()
        peer.close()
