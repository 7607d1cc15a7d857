"""Network faults on real sockets between two live transports: nothing is lost silently."""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jstormpy.runtime.codec import encode_item
from jstormpy.runtime.transport import FrameType, Transport, encode_frame, mac_client
from jstormpy.testing.servers.fault_proxy import FaultProxy
from tests.unit.test_transport import SECRET, Sink, raw_connect, read_frame, wait_until

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def net() -> Iterator[Callable[..., Any]]:
    """Factory: (sender, receiver, sink, proxy, losses) with the proxy between them."""
    made: list[Any] = []

    def factory(**sender_kw: Any) -> tuple[Transport, Transport, Sink, FaultProxy, list[Any]]:
        sink = Sink()
        losses: list[tuple[int, str]] = []
        receiver = Transport(2, SECRET, sink, on_loss=lambda w, why: losses.append((w, why)))
        receiver.start()
        proxy = FaultProxy(("127.0.0.1", receiver.port))
        proxy.start()
        sender_kw.setdefault("connect_timeout_s", 5.0)
        sender = Transport(1, SECRET, lambda *_: None,
                           on_loss=lambda w, why: losses.append((w, why)), **sender_kw)
        sender.start()
        sender.set_peers({2: ("127.0.0.1", proxy.port)})
        made.extend([sender, receiver, proxy])
        return sender, receiver, sink, proxy, losses

    yield factory
    for m in made:
        m.close()


def test_resets_mid_stream_lose_and_duplicate_nothing(net: Callable[..., Any]) -> None:
    sender, receiver, sink, proxy, losses = net()
    n = 4000
    results: list[bool] = []

    def produce() -> None:
        for i in range(n):
            results.append(sender.send(2, 5, (i, b"x" * 512)))

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    for k in range(1, 4):  # three resets while frames are in flight
        wait_until(lambda k=k: len(sink) >= k * n // 5, what=f"{k}/5 of the stream")
        wait_until(lambda: proxy.reset() > 0, what="a live connection to cut")
    producer.join(60)
    assert results == [True] * n
    wait_until(lambda: len(sink) == n, timeout=30,
               what=f"every frame after the resets {len(sink)} {sender.stats} {receiver.stats}")
    assert [item[0] for _, item in sink.items] == list(range(n))  # no loss, no dup, in order
    assert proxy.resets >= 3 and sender.stats["reconnects"] >= 1
    assert sender.stats["frames_dropped"] == 0
    assert losses == []


def test_unreachable_after_reset_escalates_never_silent(net: Callable[..., Any]) -> None:
    sender, receiver, sink, proxy, losses = net(connect_timeout_s=0.5)
    assert sender.send(2, 0, "first")
    wait_until(lambda: len(sink) == 1)
    proxy.partition()
    proxy.reset()
    for i in range(20):
        sender.send(2, 0, ("lost?", i))
    wait_until(lambda: losses != [], timeout=20, what="the sender to report the lost channel")
    assert losses[0][0] == 2  # the peer whose channel lost frames, by id
    assert sender.stats["frames_dropped"] >= 1


def _raw_data(seq: int, item: Any, incarnation: int = 77) -> bytes:
    return encode_frame(FrameType.DATA, 0, struct.pack("!QQ", incarnation, seq)
                        + encode_item(3, item))


def test_receiver_detects_gap_and_drops_duplicate() -> None:
    sink = Sink()
    losses: list[tuple[int, str]] = []
    receiver = Transport(2, SECRET, sink, on_loss=lambda w, why: losses.append((w, why)))
    receiver.start()
    try:
        sock, n_s = raw_connect(receiver.port)
        n_c = os.urandom(32)
        sock.sendall(encode_frame(FrameType.RESPONSE, 0, (9).to_bytes(4, "big") + n_c
                                  + mac_client(SECRET, n_s, 9)))
        assert read_frame(sock) is not None  # ACCEPT
        sock.sendall(_raw_data(1, "a") + _raw_data(1, "a again") + _raw_data(3, "c"))
        wait_until(lambda: receiver.stats["sequence_gaps"] == 1 and losses, what="gap detection")
        assert receiver.stats["duplicate_frames_dropped"] == 1
        assert sink.items[0] == (3, "a") and (3, "a again") not in sink.items
        assert losses and losses[0][0] == 9 and "gap" in losses[0][1]
        sock.close()
    finally:
        receiver.close()


def test_acks_free_the_send_buffer(net: Callable[..., Any]) -> None:
    sender, receiver, sink, proxy, losses = net(send_buffer_bytes=64 << 10)
    for i in range(2000):  # 2000 x ~1 KiB through a 64 KiB window: acks must flow
        assert sender.send(2, 1, (i, b"y" * 1000))
    wait_until(lambda: len(sink) == 2000)
    deadline = time.monotonic() + 10
    while sender.pending_bytes(2) and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    assert sender.pending_bytes(2) == 0
