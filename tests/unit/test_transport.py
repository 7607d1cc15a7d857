"""Tests of the worker-to-worker transport: real sockets on 127.0.0.1, no mocks."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jstormpy.api.errors import FrameError
from jstormpy.runtime.transport import (
    HEADER,
    MAGIC,
    VERSION,
    FrameType,
    Transport,
    encode_frame,
    mac_client,
    mac_server,
)

SECRET = b"topology-secret"
pytestmark = pytest.mark.timeout(60)


def wait_until(pred: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``pred`` until it is true; fail the test if it is not within ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        threading.Event().wait(delay)
        delay = min(delay * 2, 0.05)


class Sink:
    """A deliver() callback that records items and can be made to block."""

    def __init__(self) -> None:
        self.items: list[tuple[int, Any]] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        self.blocked = threading.Event()

    def __call__(self, task: int, item: Any) -> None:
        if not self.gate.is_set():
            self.blocked.set()
            self.gate.wait()
        with self.lock:
            self.items.append((task, item))

    def __len__(self) -> int:
        with self.lock:
            return len(self.items)


@pytest.fixture
def make() -> Iterator[Callable[..., Transport]]:
    """Factory of started transports, all closed at teardown."""
    made: list[Transport] = []

    def factory(worker_id: int, deliver: Callable[[int, Any], None] | None = None,
                **kw: Any) -> Transport:
        kw.setdefault("connect_timeout_s", 5.0)
        if deliver is None:  # not `deliver or ...`: an empty Sink is falsy
            deliver = lambda *_: None  # noqa: E731
        t = Transport(worker_id, kw.pop("secret", SECRET), deliver, **kw)
        t.start()
        made.append(t)
        return t

    yield factory
    for t in made:
        t.close()


def pair(make: Callable[..., Transport], **recv_kw: Any) -> tuple[Transport, Transport, Sink]:
    """A sender (worker 1) whose peer 2 is a receiver delivering into a Sink."""
    sink = Sink()
    receiver = make(2, sink, **recv_kw)
    sender = make(1, send_buffer_bytes=recv_kw.get("send_buffer_bytes", 8 << 20))
    sender.set_peers({2: ("127.0.0.1", receiver.port)})
    return sender, receiver, sink


# -- raw-socket helpers ------------------------------------------------------------------------
def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return buf
        buf += chunk
    return buf


def read_frame(sock: socket.socket) -> tuple[int, int, bytes] | None:
    """One frame, or None at EOF/reset."""
    try:
        header = recv_exact(sock, HEADER.size)
        if len(header) < HEADER.size:
            return None
        magic, version, ftype, gen, length = HEADER.unpack(header)
        assert (magic, version) == (MAGIC, VERSION)
        return ftype, gen, recv_exact(sock, length)
    except ConnectionResetError:
        return None


def raw_connect(port: int) -> tuple[socket.socket, bytes]:
    """Connect; return the socket and the server's challenge nonce."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    frame = read_frame(sock)
    assert frame is not None and frame[0] == FrameType.CHALLENGE and len(frame[2]) == 32
    return sock, frame[2]


def raw_authenticate(port: int, secret: bytes = SECRET, worker_id: int = 9) -> socket.socket:
    sock, n_s = raw_connect(port)
    n_c = os.urandom(32)
    sock.sendall(encode_frame(FrameType.RESPONSE, 0, worker_id.to_bytes(4, "big") + n_c
                              + mac_client(secret, n_s, worker_id)))
    frame = read_frame(sock)
    assert frame is not None and frame[0] == FrameType.ACCEPT
    assert frame[2] == mac_server(secret, n_c)
    return sock


def assert_closed_by_server(sock: socket.socket) -> str | None:
    """Read until EOF (5 s max); return the CLOSE reason if one came. Fails on timeout."""
    reason = None
    try:
        while True:
            frame = read_frame(sock)  # socket timeout 5 s -> TimeoutError fails the test
            if frame is None:
                break
            if frame[0] == FrameType.CLOSE:
                reason = frame[2].decode()
    finally:
        sock.close()
    return reason


def assert_still_serves(make: Callable[..., Transport], server: Transport, sink: Sink,
                        worker_id: int = 50) -> None:
    before = len(sink)
    client = make(worker_id)
    client.set_peers({server.worker_id: ("127.0.0.1", server.port)})
    for i in range(10):
        assert client.send(server.worker_id, 3, ("after", i))
    wait_until(lambda: len(sink) == before + 10, what="legit peer's frames")
    assert sink.items[before:] == [(3, ("after", i)) for i in range(10)]


# -- tests -------------------------------------------------------------------------------------
def test_ten_thousand_items_in_order(make: Callable[..., Transport]) -> None:
    sender, receiver, sink = pair(make)
    expected = [(i % 7, (i, "word", "default", [i, str(i), i * 0.5])) for i in range(10_000)]
    for task, item in expected:
        assert sender.send(2, task, item)
    wait_until(lambda: len(sink) == len(expected), what="10,000 items")
    assert sink.items == expected
    wait_until(lambda: sender.stats["frames_sent"] == 10_000, what="sender stats")
    assert receiver.stats["frames_received"] == 10_000
    assert receiver.stats["bytes_received"] == sender.stats["bytes_sent"]


def test_both_directions(make: Callable[..., Transport]) -> None:
    sa, sb = Sink(), Sink()
    a, b = make(1, sa), make(2, sb)
    peers = {1: ("127.0.0.1", a.port), 2: ("127.0.0.1", b.port)}
    a.set_peers(peers)
    b.set_peers(peers)
    for i in range(100):
        assert a.send(2, 0, i)
        assert b.send(1, 1, -i)
    wait_until(lambda: len(sa) == 100 and len(sb) == 100)
    assert sb.items == [(0, i) for i in range(100)]
    assert sa.items == [(1, -i) for i in range(100)]


def test_garbage_client_is_closed(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink)
    sock, _ = raw_connect(server.port)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    reason = assert_closed_by_server(sock)
    assert reason is None or "magic" in reason
    wait_until(lambda: server.stats["malformed_frames"] == 1)
    assert_still_serves(make, server, sink)


def test_oversized_header_before_auth_is_closed(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink, max_frame_bytes=1024)
    sock, _ = raw_connect(server.port)
    sock.sendall(HEADER.pack(MAGIC, VERSION, FrameType.RESPONSE, 0, 1 << 20))
    reason = assert_closed_by_server(sock)
    assert reason is None or "max_frame_bytes" in reason
    wait_until(lambda: server.stats["malformed_frames"] == 1)
    assert_still_serves(make, server, sink)


def test_oversized_data_frame_is_refused_without_reading_payload(
        make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink, max_frame_bytes=4096)
    sock = raw_authenticate(server.port)
    # Claim 2 GiB and send no payload: if the server tried to read (or allocate) it, it would
    # wait forever for bytes that never come instead of closing at once.
    started = time.monotonic()
    sock.sendall(HEADER.pack(MAGIC, VERSION, FrameType.DATA, 0, 2 << 30))
    reason = assert_closed_by_server(sock)
    assert time.monotonic() - started < 4
    assert reason is None or "exceeds max_frame_bytes=4096" in reason
    wait_until(lambda: server.stats["malformed_frames"] == 1)
    assert sink.items == []
    assert_still_serves(make, server, sink)


def test_wrong_secret_is_refused(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink)
    sock, n_s = raw_connect(server.port)
    sock.sendall(encode_frame(FrameType.RESPONSE, 0, (9).to_bytes(4, "big") + os.urandom(32)
                              + mac_client(b"other-topology", n_s, 9)))
    reason = assert_closed_by_server(sock)
    assert reason in (None, "authentication failed")
    wait_until(lambda: server.stats["auth_failures"] == 1)
    assert_still_serves(make, server, sink)


def test_transport_with_wrong_secret_gets_false(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink)
    intruder = make(9, secret=b"other-topology", connect_timeout_s=0.5)
    intruder.set_peers({2: ("127.0.0.1", server.port)})
    assert intruder.send(2, 0, "hi") is False
    assert intruder.stats["auth_failures"] >= 1
    assert intruder.stats["frames_dropped"] == 1
    wait_until(lambda: server.stats["auth_failures"] >= 1)
    assert sink.items == []
    assert_still_serves(make, server, sink)


def test_data_before_authentication_is_refused(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink)
    sock, _ = raw_connect(server.port)
    sock.sendall(encode_frame(FrameType.DATA, 0, pickle.dumps((1, "sneaky"), protocol=5)))
    reason = assert_closed_by_server(sock)
    assert reason is None or "DATA" in reason
    wait_until(lambda: server.stats["malformed_frames"] == 1)
    assert sink.items == []
    assert_still_serves(make, server, sink)


def test_silent_client_times_out(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink, handshake_timeout_s=0.3)
    sock, _ = raw_connect(server.port)
    reason = assert_closed_by_server(sock)
    assert reason in (None, "handshake timeout")
    assert_still_serves(make, server, sink)


def test_unpicklable_payload_after_auth_is_malformed(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink)
    sock = raw_authenticate(server.port)
    sock.sendall(encode_frame(FrameType.DATA, 0, b"\x80\x05not a pickle at all"))
    reason = assert_closed_by_server(sock)
    assert reason is None or "undecodable" in reason
    wait_until(lambda: server.stats["malformed_frames"] == 1)
    assert_still_serves(make, server, sink)


def test_stale_generation_frames_are_dropped(make: Callable[..., Transport]) -> None:
    sender, receiver, sink = pair(make)
    receiver.set_generation(1)
    for i in range(10):
        assert sender.send(2, 0, ("old", i))
    wait_until(lambda: receiver.stats["stale_frames_dropped"] == 10, what="stale drops")
    sender.set_generation(1)
    for i in range(5):
        assert sender.send(2, 0, ("new", i))
    wait_until(lambda: len(sink) == 5)
    assert sink.items == [(0, ("new", i)) for i in range(5)]
    assert receiver.stats["stale_frames_dropped"] == 10
    assert receiver.stats["frames_received"] == 5


def _fill(sender: Transport, sink: Sink, limit: int) -> tuple[threading.Thread, list[Any]]:
    """Start a producer that sends far more than the buffer and kernel hold."""
    blob = b"x" * (32 << 10)
    result: list[Any] = []

    def produce() -> None:
        n = 0
        for i in range(1500):  # ~48 MiB: more than any socket buffers on loopback
            if not sender.send(2, 1, (i, blob)):
                result.append(("failed at", i))
                return
            n += 1
        result.append(n)

    sink.gate.clear()
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    wait_until(sink.blocked.is_set, what="receiver to block in deliver()")
    wait_until(lambda: sender.pending_bytes(2) >= limit, what="send buffer to fill")
    return producer, result


def test_backpressure_blocks_send_and_loses_nothing(make: Callable[..., Transport]) -> None:
    limit = 256 << 10
    sender, _, sink = pair(make, send_buffer_bytes=limit)
    producer, result = _fill(sender, sink, limit)
    # The buffer is full and the producer has not finished: it is blocked in send().
    assert producer.is_alive() and not result
    queued = sender.pending_bytes(2)
    assert limit <= queued < limit + (64 << 10)
    sink.gate.set()
    producer.join(30)
    assert result == [1500]
    wait_until(lambda: len(sink) == 1500, timeout=30, what="all frames after release")
    assert [item[0] for _, item in sink.items] == list(range(1500))
    assert sender.stats["frames_dropped"] == 0


def test_frames_sent_one_at_a_time_to_an_idle_connection_all_arrive(
        make: Callable[..., Transport]) -> None:
    """Between two sends the connection's sender thread has nothing to do and waits; a
    send wakes it only then (a busy one finds the frame itself). A lost wake-up would
    leave a frame queued for good; the ACK of each must come back too."""
    sender, _, sink = pair(make)
    for i in range(300):
        assert sender.send(2, 0, i)
        wait_until(lambda i=i: len(sink) > i, timeout=5.0, what=f"frame {i} to arrive")
        wait_until(lambda: sender.pending_bytes(2) == 0, timeout=5.0, what=f"frame {i}'s ACK")
    assert [item for _, item in sink.items] == list(range(300))
    assert sender.stats["frames_dropped"] == 0


def test_set_generation_unblocks_blocked_send(make: Callable[..., Transport]) -> None:
    limit = 256 << 10
    sender, _, sink = pair(make, send_buffer_bytes=limit)
    producer, result = _fill(sender, sink, limit)
    assert producer.is_alive()
    started = time.monotonic()
    sender.set_generation(1)
    producer.join(2)
    assert not producer.is_alive(), "send() still blocked after set_generation"
    assert time.monotonic() - started < 1.0
    assert result and result[0][0] == "failed at"
    assert sender.pending_bytes(2) == 0  # old-generation frames discarded
    assert sender.stats["frames_dropped"] >= 2
    sink.gate.set()


def test_peer_restart_on_new_port(make: Callable[..., Transport]) -> None:
    sender, receiver, sink = pair(make)
    assert sender.send(2, 0, "before")
    wait_until(lambda: len(sink) == 1)
    receiver.close()
    sink2 = Sink()
    receiver2 = make(2, sink2)
    assert receiver2.port != receiver.port
    sender.set_peers({2: ("127.0.0.1", receiver2.port)})
    for i in range(20):
        assert sender.send(2, 0, ("after", i))
    wait_until(lambda: len(sink2) == 20)
    assert sink2.items == [(0, ("after", i)) for i in range(20)]


def test_unknown_and_unreachable_peers_return_false(make: Callable[..., Transport]) -> None:
    sender = make(1, connect_timeout_s=0.3)
    assert sender.send(7, 0, "x") is False
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    dead_port = probe.getsockname()[1]
    probe.close()
    sender.set_peers({7: ("127.0.0.1", dead_port)})
    started = time.monotonic()
    assert sender.send(7, 0, "x") is False
    assert 0.25 < time.monotonic() - started < 3
    assert sender.stats["frames_dropped"] == 2


def test_peer_started_late_is_reached(make: Callable[..., Transport]) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    sender = make(1)
    sender.set_peers({2: ("127.0.0.1", port)})
    sink = Sink()
    result: list[bool] = []
    th = threading.Thread(target=lambda: result.append(sender.send(2, 0, "hello")))
    th.start()
    make(2, sink, port=port)
    th.join(10)
    assert result == [True]
    wait_until(lambda: len(sink) == 1)


def test_oversized_item_raises(make: Callable[..., Transport]) -> None:
    sender = make(3, max_frame_bytes=1024)
    with pytest.raises(FrameError, match="max_frame_bytes"):
        sender.send(2, 0, b"y" * 2048)


def test_reset_and_close_make_send_return_false(make: Callable[..., Transport]) -> None:
    sender, _, sink = pair(make)
    assert sender.send(2, 0, 1)
    wait_until(lambda: len(sink) == 1)
    sender.reset()
    assert sender.send(2, 0, 2)  # reconnects
    wait_until(lambda: len(sink) == 2)
    sender.close()
    assert sender.send(2, 0, 3) is False
    assert [item for _, item in sink.items] == [1, 2]


def test_close_from_inside_deliver_does_not_deadlock(make: Callable[..., Transport]) -> None:
    closed = threading.Event()
    holder: list[Transport] = []

    def deliver(_task: int, _item: Any) -> None:
        holder[0].close(timeout_s=1.0)
        closed.set()

    receiver = make(2, deliver)
    holder.append(receiver)
    sender = make(1)
    sender.set_peers({2: ("127.0.0.1", receiver.port)})
    assert sender.send(2, 0, "bye")
    assert closed.wait(10)
    assert receiver.send(1, 0, "x") is False


def test_concurrent_senders_keep_per_thread_order(make: Callable[..., Transport]) -> None:
    sender, _, sink = pair(make, send_buffer_bytes=64 << 10)

    def produce(tag: int) -> None:
        for i in range(2000):
            assert sender.send(2, tag, i)

    threads = [threading.Thread(target=produce, args=(tag,)) for tag in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    wait_until(lambda: len(sink) == 8000, what="8000 items from 4 threads")
    for tag in range(4):
        assert [i for t, i in sink.items if t == tag] == list(range(2000))


def test_dead_peer_makes_send_return_false_not_hang(make: Callable[..., Transport]) -> None:
    sink = Sink()
    receiver = make(2, sink)
    sender = make(1, connect_timeout_s=0.5)
    sender.set_peers({2: ("127.0.0.1", receiver.port)})
    assert sender.send(2, 0, "first")
    wait_until(lambda: len(sink) == 1)
    receiver.close()
    results: list[bool] = []

    def keep_sending() -> bool:
        results.append(sender.send(2, 0, "x" * 1000))
        return results[-1] is False

    wait_until(keep_sending, timeout=20, what="send() to a dead peer to return False")
    assert sender.stats["frames_dropped"] >= 1


def test_credit_frames_reach_on_credit_in_order_with_the_data(
        make: Callable[..., Transport]) -> None:
    """A CREDIT frame is its own frame type: it reaches ``on_credit`` (never ``deliver``),
    in the channel's order with the DATA frames around it, and only in its generation."""
    events: list[tuple[Any, ...]] = []
    lock = threading.Lock()

    def deliver(task: int, item: Any) -> None:
        with lock:
            events.append(("data", task, item))

    def on_credit(src: int, dst: int, total: int, generation: int) -> None:
        with lock:
            events.append(("credit", src, dst, total, generation))

    receiver = make(2, deliver, on_credit=on_credit)
    sender = make(1)
    sender.set_peers({2: ("127.0.0.1", receiver.port)})
    assert sender.send(2, 5, ("a",))
    assert sender.send_credit(2, 7, 3, 40)
    assert sender.send(2, 5, ("b",))
    assert sender.send_credit(2, 7, 3, 2**40)  # totals are uint64 on the wire
    wait_until(lambda: len(events) == 4, what="two items and two grants")
    assert events == [("data", 5, ("a",)), ("credit", 7, 3, 40, 0), ("data", 5, ("b",)),
                      ("credit", 7, 3, 2**40, 0)]
    receiver.set_generation(1)
    assert sender.send_credit(2, 7, 3, 41)  # generation 0: dropped by the receiver
    wait_until(lambda: receiver.stats["stale_frames_dropped"] == 1, what="stale grant")
    assert len(events) == 4


def test_credit_frame_of_wrong_size_is_malformed(make: Callable[..., Transport]) -> None:
    sink = Sink()
    server = make(2, sink, on_credit=lambda *_: None)
    sock = raw_authenticate(server.port)
    sock.sendall(encode_frame(FrameType.CREDIT, 0, struct.pack("!QQ", 1, 1) + b"\0\0\0"))
    reason = assert_closed_by_server(sock)
    assert reason is None or "CREDIT frame of 19 bytes" in reason
    wait_until(lambda: server.stats["malformed_frames"] == 1)
    assert_still_serves(make, server, sink)


def test_connect_opens_the_connection_before_any_frame(make: Callable[..., Transport]) -> None:
    """A worker opens its data-plane connections when it prepares its tasks: the first
    frame of a run then does not wait for TCP, TLS and the handshake."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    try:
        sender = make(1)
        sender.set_peers({2: ("127.0.0.1", listener.getsockname()[1])})
        sender.connect([2, 7])  # 7 is no peer: nothing to open
        conn, _ = listener.accept()  # no frame was sent: the connection came ahead of one
        conn.close()
        assert sender.stats["frames_sent"] == 0
    finally:
        listener.close()


def test_connected_peer_gets_the_first_frame(make: Callable[..., Transport]) -> None:
    sender, receiver, sink = pair(make)
    sender.connect([2])
    assert sender.send(2, 0, "first")
    wait_until(lambda: len(sink) == 1, what="the first frame")
    assert sink.items == [(0, "first")]
