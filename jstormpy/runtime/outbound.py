"""One outbound data-plane connection to a peer worker: its frame queue and sender thread."""

from __future__ import annotations

import collections
import socket
import threading
import time
from typing import TYPE_CHECKING

from jstormpy.errors import AuthenticationError, FrameError
from jstormpy.runtime.frames import (
    MAX_BATCH_BYTES,
    MAX_BATCH_FRAMES,
    PeerClosedError,
    close_quietly,
    sendmsg_all,
    shutdown_quietly,
)
from jstormpy.runtime.handshake import client_handshake

if TYPE_CHECKING:
    from jstormpy.runtime.transport import Transport

# Outbound connection states.
CONNECTING = "connecting"
READY = "ready"
DEAD = "dead"


class Outbound:
    """One outbound connection to a peer worker: a bounded frame queue and its sender thread."""

    def __init__(self, transport: Transport, worker_id: int, addr: tuple[str, int]) -> None:
        self.transport = transport
        self.worker_id = worker_id
        self.addr = addr
        self.cond = threading.Condition(threading.Lock())
        # Entries: (generation, header, payload).
        self.queue: collections.deque[tuple[int, bytes, bytes]] = collections.deque()
        self.queued_bytes = 0
        self.state = CONNECTING
        self.why_dead = ""
        self.sock: socket.socket | None = None
        self.thread = threading.Thread(
            target=self._run, daemon=True,
            name=f"jstorm-send-{transport.worker_id}->{worker_id}")

    # -- called with self.cond held ------------------------------------------------------------
    def _kill_locked(self, why: str) -> int:
        """Mark dead, drop the queue, wake everyone; returns the number of frames dropped."""
        dropped = len(self.queue)
        self.queue.clear()
        self.queued_bytes = 0
        if self.state != DEAD:
            self.state = DEAD
            self.why_dead = why
        self.cond.notify_all()
        return dropped

    def discard_other_generations(self, generation: int) -> int:
        """Drop queued frames not of ``generation``; wake blocked senders. Returns drop count."""
        with self.cond:
            keep = [e for e in self.queue if e[0] == generation]
            dropped = len(self.queue) - len(keep)
            if dropped:
                self.queue = collections.deque(keep)
                self.queued_bytes = sum(len(h) + len(p) for _, h, p in keep)
            self.cond.notify_all()
        return dropped

    def kill(self, why: str) -> None:
        """Close this connection from outside (reset, address change, close)."""
        with self.cond:
            dropped = self._kill_locked(why)
            sock = self.sock
        if dropped:
            self.transport._count("frames_dropped", dropped)
        shutdown_quietly(sock)  # unblocks a sender thread stuck in sendmsg

    # -- sender thread -------------------------------------------------------------------------
    def _run(self) -> None:
        t = self.transport
        try:
            sock = self._connect()
            if sock is None:
                return
            try:
                self._drain(sock)
            finally:
                shutdown_quietly(sock)
                close_quietly(sock)
        except Exception:  # never let a sender thread die silently
            t._log.exception("worker %d: sender thread to worker %d at %s:%d crashed",
                             t.worker_id, self.worker_id, *self.addr)
            self.kill("sender thread crashed")
        finally:
            t._forget_outbound(self)

    def _connect(self) -> socket.socket | None:
        """Connect and authenticate, retrying until ``connect_timeout_s``; None on failure."""
        t = self.transport
        deadline = time.monotonic() + t._connect_timeout_s
        backoff = 0.02
        last_error = "no attempt made"
        while True:
            with self.cond:
                if self.state == DEAD:
                    return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock: socket.socket | None = None
            try:
                sock = socket.create_connection(
                    self.addr, timeout=min(remaining, t._handshake_timeout_s))
                sock.settimeout(min(max(deadline - time.monotonic(), 0.05),
                                    t._handshake_timeout_s))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._handshake(sock)
                sock.settimeout(None)
            except (OSError, FrameError, AuthenticationError, PeerClosedError) as exc:
                close_quietly(sock)
                if isinstance(exc, AuthenticationError):
                    t._count("auth_failures")
                    t._log.error("worker %d: authentication with worker %d at %s:%d failed: %s",
                                 t.worker_id, self.worker_id, *self.addr, exc)
                last_error = f"{type(exc).__name__}: {exc}"
                with self.cond:
                    if self.state == DEAD:
                        return None
                    self.cond.wait(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, 0.5)
                continue
            with self.cond:
                if self.state == DEAD:
                    close_quietly(sock)
                    return None
                self.sock = sock
                self.state = READY
                self.cond.notify_all()
            t._log.debug("worker %d: connected to worker %d at %s:%d",
                         t.worker_id, self.worker_id, *self.addr)
            return sock
        t._log.warning("worker %d: cannot reach worker %d at %s:%d within %.1fs (last error: %s)",
                       t.worker_id, self.worker_id, *self.addr, t._connect_timeout_s, last_error)
        with self.cond:
            dropped = self._kill_locked(f"unreachable within {t._connect_timeout_s}s")
        if dropped:
            t._count("frames_dropped", dropped)
        return None

    def _handshake(self, sock: socket.socket) -> None:
        t = self.transport
        client_handshake(sock, t._secret, t.worker_id, t._generation, t._max_frame_bytes)

    def _drain(self, sock: socket.socket) -> None:
        t = self.transport
        while True:
            with self.cond:
                while not self.queue and self.state == READY:
                    self.cond.wait()
                if self.state != READY:
                    return
                buffers: list[bytes] = []
                nbytes = 0
                q = self.queue
                while q and len(buffers) < 2 * MAX_BATCH_FRAMES and nbytes < MAX_BATCH_BYTES:
                    _, header, payload = q.popleft()
                    buffers.append(header)
                    buffers.append(payload)
                    nbytes += len(header) + len(payload)
                self.queued_bytes -= nbytes
                self.cond.notify_all()
            try:
                sendmsg_all(sock, buffers)
            except OSError as exc:
                with self.cond:
                    was_ready = self.state == READY
                    dropped = self._kill_locked(f"send failed: {exc}") + len(buffers) // 2
                t._count("frames_dropped", dropped)
                if was_ready:
                    t._log.warning("worker %d: connection to worker %d at %s:%d failed (%s); "
                                   "%d frame(s) dropped", t.worker_id, self.worker_id,
                                   *self.addr, exc, dropped)
                return
            t._count2("frames_sent", len(buffers) // 2, "bytes_sent", nbytes)

