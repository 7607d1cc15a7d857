"""One outbound data-plane channel to a peer worker: its frame queue, sender and ack reader.

Every DATA frame gets the next sequence number of this channel (per generation). Frames
handed to the socket stay in ``unacked`` until the receiver's cumulative ACK covers them;
they count against the send buffer meanwhile, so back-pressure still holds. When the
connection breaks (reset, EOF, send error), the channel reconnects within
``connect_timeout_s`` and retransmits every unacknowledged frame first; the receiver drops
the ones it already delivered. Only if the peer stays unreachable is the channel declared
dead: its frames are counted dropped and the transport's ``on_loss`` callback is called
(the worker turns that into a recovery). A frame is never lost silently.
"""

from __future__ import annotations

import collections
import logging
import random
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from jstormpy.api.errors import AuthenticationError, FrameError
from jstormpy.faults import chaos_route
from jstormpy.runtime.frames import (
    MAX_BATCH_BYTES,
    MAX_BATCH_FRAMES,
    SEQ,
    FrameType,
    PeerClosedError,
    close_quietly,
    read_frame,
    sendmsg_all,
    shutdown_quietly,
)
from jstormpy.runtime.handshake import client_handshake
from jstormpy.runtime.tls_socket import send_buffers

if TYPE_CHECKING:
    from jstormpy.runtime.dataplane_counters import DataPlaneCounters


class ConnectionState(StrEnum):
    """Where an outbound connection is: connecting (first time or after a break), ready
    to send, or dead (the peer stayed unreachable; it never comes back)."""

    CONNECTING = "connecting"
    READY = "ready"
    DEAD = "dead"


Frame = tuple[int, int, bytes, bytes]
"""A queued frame: (generation, seq, header + SEQ prefix, pickled payload)."""


@dataclass(frozen=True)
class OutboundSettings:
    """What every outbound connection of one worker needs to know (set at transport start)."""

    worker_id: int  # this worker, sent in the handshake
    secret: bytes
    max_frame_bytes: int
    connect_timeout_s: float
    handshake_timeout_s: float
    tls: Any  # DataPlaneTls or None: mutual TLS first, then the HMAC handshake inside it
    log: logging.Logger


class OutboundOwner(Protocol):
    """What a connection tells the transport that opened it, and reads from it."""

    counters: DataPlaneCounters

    @property
    def generation(self) -> int:
        """The current generation (sent in the handshake)."""

    def forget_outbound(self, ob: Outbound) -> None:
        """``ob`` gave up: the next send to its peer opens a new connection."""

    def channel_lost(self, worker_id: int, why: str) -> None:
        """Frames to ``worker_id`` were lost: log, count, escalate."""


class Outbound:
    """One outbound channel to a peer worker: bounded queue, sender thread, ack reader."""

    def __init__(self, settings: OutboundSettings, owner: OutboundOwner, worker_id: int,
                 addr: tuple[str, int]) -> None:
        self.settings = settings
        self.owner = owner
        self.worker_id = worker_id
        self.addr = addr
        self.incarnation = random.getrandbits(63) + 1
        self.cond = threading.Condition(threading.Lock())
        self.queue: collections.deque[Frame] = collections.deque()
        self.unacked: collections.deque[Frame] = collections.deque()
        self.queued_bytes = 0  # queue + unacked
        self.next_seq: dict[int, int] = {}
        self.state = ConnectionState.CONNECTING
        self.broken = False
        self.why_dead = ""
        self.sock: socket.socket | None = None
        # who waits on ``cond`` (changed under it): an append wakes the threads only if
        # the sender thread waits for a frame and no append woke it yet, an ACK only if
        # a producer waits for room
        self.drain_waiting = False
        self.room_waiting = 0
        self.thread = threading.Thread(
            target=self._run, daemon=True,
            name=f"jstorm-send-{settings.worker_id}->{worker_id}")

    # -- called with self.cond held ------------------------------------------------------------
    def append_locked(self, gen: int, header: bytes, payload: bytes) -> None:
        """Sequence and queue one DATA or CREDIT frame (``header`` still lacks the SEQ
        prefix)."""
        seq = self.next_seq.get(gen, 0) + 1
        self.next_seq[gen] = seq
        head = header + SEQ.pack(self.incarnation, seq)
        self.queue.append((gen, seq, head, payload))
        self.queued_bytes += len(head) + len(payload)
        if self.drain_waiting:  # a busy sender thread finds the frame when it next looks
            self.drain_waiting = False
            self.cond.notify_all()

    def wait_for_room_locked(self, timeout: float) -> None:
        """A producer waits (``cond`` held) for room in the buffer or a change of state."""
        self.room_waiting += 1
        try:
            self.cond.wait(timeout)
        finally:
            self.room_waiting -= 1

    def _kill_locked(self, why: str) -> int:
        """Mark dead, drop queue and unacked frames, wake everyone; returns frames dropped."""
        dropped = len(self.queue) + len(self.unacked)
        self.queue.clear()
        self.unacked.clear()
        self.queued_bytes = 0
        if self.state != ConnectionState.DEAD:
            self.state = ConnectionState.DEAD
            self.why_dead = why
        self.cond.notify_all()
        return dropped

    def discard_other_generations(self, generation: int) -> int:
        """Drop queued/unacked frames not of ``generation``; wake senders. Returns drop count."""
        with self.cond:
            dropped = 0
            for name in ("queue", "unacked"):
                q: collections.deque[Frame] = getattr(self, name)
                keep = [e for e in q if e[0] == generation]
                dropped += len(q) - len(keep)
                setattr(self, name, collections.deque(keep))
            if dropped:
                self.queued_bytes = sum(len(h) + len(p)
                                        for q in (self.queue, self.unacked) for _, _, h, p in q)
            self.cond.notify_all()
        return dropped

    def kill(self, why: str) -> None:
        """Close this connection from outside (reset, address change, close)."""
        with self.cond:
            dropped = self._kill_locked(why)
            sock = self.sock
        if dropped:
            self.owner.counters.count("frames_dropped", dropped)
        shutdown_quietly(sock)  # unblocks a sender thread stuck in sendmsg

    # -- sender thread -------------------------------------------------------------------------
    def _run(self) -> None:
        t = self.settings
        try:
            while True:
                sock = self._connect()
                if sock is None:
                    return
                acks = threading.Thread(target=self._read_acks, args=(sock,), daemon=True,
                                        name=f"jstorm-acks-{t.worker_id}->{self.worker_id}")
                acks.start()
                try:
                    self._drain(sock)
                finally:
                    shutdown_quietly(sock)
                    close_quietly(sock)
                    acks.join(5.0)
                with self.cond:
                    if self.state == ConnectionState.DEAD:
                        return
                    # Retransmit every unacknowledged frame first, in order.
                    retransmit = len(self.unacked)
                    self.queue.extendleft(reversed(self.unacked))
                    self.unacked.clear()
                    self.state = ConnectionState.CONNECTING
                    self.broken = False
                    self.sock = None
                    self.cond.notify_all()
                self.owner.counters.count("reconnects")
                self.owner.counters.count("frames_retransmitted", retransmit)
                # nothing in flight (a peer that stopped at the end of a run): not a warning
                t.log.log(logging.WARNING if retransmit else logging.INFO,
                           "worker %d: connection to worker %d at %s:%d broke; reconnecting "
                           "to retransmit %d unacknowledged frame(s)", t.worker_id,
                           self.worker_id, *self.addr, retransmit)
        except Exception:  # never let a sender thread die silently
            t.log.exception("worker %d: sender thread to worker %d at %s:%d crashed",
                             t.worker_id, self.worker_id, *self.addr)
            self._declare_lost("sender thread crashed")
        finally:
            self.owner.forget_outbound(self)

    def _declare_lost(self, why: str) -> None:
        """The channel cannot deliver its frames: drop them, count, and escalate."""
        with self.cond:
            was_dead = self.state == ConnectionState.DEAD
            dropped = self._kill_locked(why)
        if dropped:
            self.owner.counters.count("frames_dropped", dropped)
        if not was_dead:
            self.owner.channel_lost(self.worker_id, f"channel to worker {self.worker_id} at "
                            f"{self.addr[0]}:{self.addr[1]} lost: {why} "
                            f"({dropped} frame(s) undelivered)")

    def _connect(self) -> socket.socket | None:
        """Connect and authenticate, retrying until ``connect_timeout_s``; None on failure."""
        t = self.settings
        deadline = time.monotonic() + t.connect_timeout_s
        backoff = 0.02
        last_error = "no attempt made"
        while True:
            with self.cond:
                if self.state == ConnectionState.DEAD:
                    return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock: socket.socket | None = None
            try:
                sock = socket.create_connection(  # a chaos test may route it via a proxy
                    chaos_route(t.worker_id, self.worker_id, self.addr),
                    timeout=min(remaining, t.handshake_timeout_s))
                sock.settimeout(min(max(deadline - time.monotonic(), 0.05),
                                    t.handshake_timeout_s))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if t.tls is not None:  # mutual TLS first, then the HMAC handshake inside it
                    sock = t.tls.wrap_connected(sock)
                client_handshake(sock, t.secret, t.worker_id, self.owner.generation,
                                 t.max_frame_bytes)
                sock.settimeout(None)
            except (OSError, FrameError, AuthenticationError, PeerClosedError) as exc:
                close_quietly(sock)
                if isinstance(exc, (AuthenticationError, ssl.SSLCertVerificationError)):
                    self.owner.counters.count("auth_failures")
                    t.log.error("worker %d: authentication with worker %d at %s:%d failed: %s",
                                 t.worker_id, self.worker_id, *self.addr, exc)
                last_error = f"{type(exc).__name__}: {exc}"
                with self.cond:
                    if self.state == ConnectionState.DEAD:
                        return None
                    self.cond.wait(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, 0.5)
                continue
            with self.cond:
                if self.state == ConnectionState.DEAD:
                    close_quietly(sock)
                    return None
                self.sock = sock
                self.state = ConnectionState.READY
                self.cond.notify_all()
            t.log.debug("worker %d: connected to worker %d at %s:%d",
                         t.worker_id, self.worker_id, *self.addr)
            return sock
        t.log.warning("worker %d: cannot reach worker %d at %s:%d within %.1fs (last error: %s)",
                       t.worker_id, self.worker_id, *self.addr, t.connect_timeout_s, last_error)
        self._declare_lost(f"unreachable within {t.connect_timeout_s}s ({last_error})")
        return None

    def _read_acks(self, sock: socket.socket) -> None:
        """Apply the receiver's cumulative ACKs; mark the connection broken at EOF/error."""
        t = self.settings
        reader = sock.makefile("rb")
        try:
            while True:
                _, gen, payload, _ = read_frame(reader, t.max_frame_bytes, (FrameType.ACK,))
                assert payload is not None
                incarnation, seq = SEQ.unpack(payload)
                if incarnation != self.incarnation:
                    continue
                with self.cond:
                    q = self.unacked
                    freed = 0
                    while q and q[0][0] == gen and q[0][1] <= seq:
                        _, _, h, p = q.popleft()
                        freed += len(h) + len(p)
                    if freed:
                        self.queued_bytes -= freed
                        if self.room_waiting:
                            self.cond.notify_all()
        except (OSError, FrameError, PeerClosedError, ValueError) as exc:
            t.log.debug("worker %d: ack stream from worker %d ended: %s",
                         t.worker_id, self.worker_id, exc)
        finally:
            close_quietly(reader)
            with self.cond:
                self.broken = True
                self.cond.notify_all()
            shutdown_quietly(sock)

    def _drain(self, sock: socket.socket) -> None:
        """Send queued frames until the connection breaks or the channel is killed."""
        t = self.settings
        while True:
            with self.cond:
                while not self.queue and self.state == ConnectionState.READY and not self.broken:
                    self.drain_waiting = True
                    try:
                        self.cond.wait()
                    finally:
                        self.drain_waiting = False
                if self.state != ConnectionState.READY or self.broken:
                    return
                buffers: list[bytes] = []
                nbytes = 0
                q = self.queue
                sent: list[Frame] = []
                while q and len(sent) < MAX_BATCH_FRAMES and nbytes < MAX_BATCH_BYTES:
                    frame = q.popleft()
                    sent.append(frame)
                    buffers.append(frame[2])
                    buffers.append(frame[3])
                    nbytes += len(frame[2]) + len(frame[3])
                self.unacked.extend(sent)  # acks only ever cover frames already sent
            try:
                if t.tls is not None:
                    send_buffers(sock, buffers)
                else:
                    sendmsg_all(sock, buffers)
            except OSError as exc:
                t.log.info("worker %d: send to worker %d at %s:%d failed: %s",
                            t.worker_id, self.worker_id, *self.addr, exc)
                return
            self.owner.counters.count2("frames_sent", len(sent), "bytes_sent", nbytes)
