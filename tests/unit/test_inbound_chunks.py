"""The receiving side (``inbound.py``) under frames
written back to back, cut at any byte, larger than a read, with a barrier, a credit grant,
a retransmitted and a stale frame among them, arrive whole and in order, each once, and
the ACK covers the last. Real sockets: a raw authenticated client writes the bytes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jstormpy.runtime.codec import encode_item
from jstormpy.runtime.frames import CREDIT_GRANT, SEQ
from jstormpy.runtime.transport import HEADER, MAGIC, VERSION, FrameType, Transport
from tests.unit.test_transport import SECRET, raw_authenticate, read_frame, wait_until

pytestmark = pytest.mark.timeout(60)
INCARNATION = 77
READ_CHUNK = 64 * 1024  # more than one read of a connection (its buffered reader: 8 KiB)


def data(seq: int, task: int, item: Any, gen: int = 0) -> bytes:
    payload = SEQ.pack(INCARNATION, seq) + encode_item(task, item)
    return HEADER.pack(MAGIC, VERSION, FrameType.DATA, gen, len(payload)) + payload


def credit(seq: int, src: int, dst: int, total: int) -> bytes:
    payload = SEQ.pack(INCARNATION, seq) + CREDIT_GRANT.pack(src, dst, total)
    return HEADER.pack(MAGIC, VERSION, FrameType.CREDIT, 0, len(payload)) + payload


class Events:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: list[tuple[Any, ...]] = []

    def deliver(self, task: int, item: Any) -> None:
        with self.lock:
            self.got.append(("data", task, item))

    def on_credit(self, src: int, dst: int, total: int, generation: int) -> None:
        with self.lock:
            self.got.append(("credit", src, dst, total))

    def __len__(self) -> int:
        with self.lock:
            return len(self.got)


@pytest.fixture
def receiver() -> Iterator[tuple[Transport, Events]]:
    events = Events()
    t = Transport(2, SECRET, events.deliver, on_credit=events.on_credit)
    t.start()
    yield t, events
    t.close()


def acked_up_to(sock: socket.socket, seq: int) -> None:
    """Read ACKs until one covers ``seq`` (fails on the socket's 5 s timeout)."""
    while True:
        frame = read_frame(sock)
        assert frame is not None, "connection closed before the ACK"
        if frame[0] == FrameType.ACK and SEQ.unpack(frame[2]) == (INCARNATION, seq):
            return


def batch(i: int) -> tuple[Any, ...]:
    return (3, 0, "default", [(f"w{i}-{k}",) for k in range(40)])


def test_frames_of_one_write_arrive_in_order_with_a_barrier_and_a_grant_among_them(
        receiver: tuple[Transport, Events]) -> None:
    t, events = receiver
    frames = [data(i + 1, 5, batch(i)) for i in range(30)]
    frames.append(data(31, 5, (3, 1, "default", 9)))  # a barrier of checkpoint 9
    frames.append(credit(32, 5, 3, 64))
    frames.append(data(32, 5, batch(99)))  # a retransmission of seq 32: dropped
    frames.append(data(33, 5, batch(100), gen=4))  # another generation: dropped
    frames += [data(33 + i, 5, batch(31 + i)) for i in range(10)]
    sock = raw_authenticate(t.port)
    try:
        sock.sendall(b"".join(frames))
        wait_until(lambda: len(events) == 42, what="42 items and grants")
        expected: list[tuple[Any, ...]] = [("data", 5, batch(i)) for i in range(30)]
        expected += [("data", 5, (3, 1, "default", 9)), ("credit", 5, 3, 64)]
        expected += [("data", 5, batch(31 + i)) for i in range(10)]
        assert events.got == expected
        acked_up_to(sock, 42)
    finally:
        sock.close()
    stats = t.stats
    assert (stats["frames_received"], stats["duplicate_frames_dropped"],
            stats["stale_frames_dropped"]) == (42, 1, 1)
    assert stats["bytes_received"] == sum(map(len, frames)) - len(frames[32]) - len(frames[33])


def test_frames_cut_at_any_byte_and_larger_than_a_read_arrive_whole(
        receiver: tuple[Transport, Events]) -> None:
    t, events = receiver
    big = (3, 0, "default", [("x" * 100, k) for k in range(2 * READ_CHUNK // 100)])
    items = [batch(0), batch(1), big, batch(2), batch(3)]
    stream = b"".join(data(i + 1, 6, item) for i, item in enumerate(items))
    first = len(data(1, 6, batch(0)))
    sock = raw_authenticate(t.port)
    try:
        cuts = [first + 5, first + HEADER.size + 7, len(stream) - 3, len(stream)]
        sent = 0
        for cut in cuts:  # inside a header, inside a payload, inside the last payload
            sock.sendall(stream[sent:cut])
            sent = cut
            if cut == cuts[0]:  # the reader has the first frame and 5 bytes of the next
                wait_until(lambda: len(events) == 1, what="the first frame")
        wait_until(lambda: len(events) == len(items), what="every frame")
        assert events.got == [("data", 6, item) for item in items]
        acked_up_to(sock, len(items))
    finally:
        sock.close()


@pytest.mark.parametrize("cut", [HEADER.size - 4, HEADER.size + 10])
def test_connection_ending_inside_a_frame_keeps_the_frames_before_it(
        receiver: tuple[Transport, Events], cut: int) -> None:
    t, events = receiver
    sock = raw_authenticate(t.port)
    sock.sendall(data(1, 5, batch(0)) + data(2, 5, batch(1)) + data(3, 5, batch(2))[:cut])
    sock.shutdown(socket.SHUT_WR)
    wait_until(lambda: t.stats["malformed_frames"] == 1, what="the truncated frame refused")
    sock.close()
    assert events.got == [("data", 5, batch(0)), ("data", 5, batch(1))]


def test_a_peer_close_after_frames_delivers_them_first(
        receiver: tuple[Transport, Events]) -> None:
    t, events = receiver
    sock = raw_authenticate(t.port)
    close = HEADER.pack(MAGIC, VERSION, FrameType.CLOSE, 0, 3) + b"bye"
    sock.sendall(data(1, 5, batch(0)) + data(2, 5, batch(1)) + close)
    wait_until(lambda: len(events) == 2, what="both frames")
    wait_until(lambda: read_frame(sock) is None, what="the server to close")
    sock.close()
    assert events.got == [("data", 5, batch(0)), ("data", 5, batch(1))]
    assert t.stats["malformed_frames"] == 0


