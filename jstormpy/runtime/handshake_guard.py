"""Limits on unauthenticated data-plane connections (docs/security.md).

A worker's data port is reachable before anyone has proved anything, so what a stranger
can cost it is bounded here:

* at most ``max_connections`` connections at once (authenticated or not) and at most
  ``max_handshakes`` still authenticating: a flood is refused at ``accept`` (closed at
  once, logged with the peer), so the threads serving connections stay bounded too;
* a *total* handshake deadline (``deadline_s``), not a per-read timeout: a slow-loris peer
  sending one byte at a time is cut off when the deadline passes, by one watchdog thread
  shared by every connection.

Refusals are logged (rate-limited) with the peer's address and counted.
"""

from __future__ import annotations

import heapq
import logging
import socket
import threading
import time

MAX_CONNECTIONS = 256
MAX_HANDSHAKES = 32


class Ticket:
    """One admitted connection: the socket to cut at the deadline (replace it with the
    TLS-wrapped socket once wrapped) and where it stands."""

    __slots__ = ("authenticated", "peer", "released", "sock")

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.authenticated = False
        self.released = False


class HandshakeGuard:
    """Admission control and handshake deadlines for one listener."""

    def __init__(self, deadline_s: float, max_connections: int = MAX_CONNECTIONS,
                 max_handshakes: int = MAX_HANDSHAKES,
                 logger: logging.Logger | None = None, name: str = "") -> None:
        self.deadline_s = deadline_s
        self.max_connections = max_connections
        self.max_handshakes = max_handshakes
        self.log = logger or logging.getLogger(__name__)
        self.name = name
        self.lock = threading.Condition()
        self.connections = 0
        self.handshakes = 0
        self.refused = 0
        self.expired = 0
        self._heap: list[tuple[float, int, Ticket]] = []
        self._seq = 0
        self._closed = False
        self._last_log = 0.0
        self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                          name=f"jstorm-handshake-watchdog{name}")
        self._watchdog.start()

    def admit(self, sock: socket.socket, peer: str) -> Ticket | None:
        """Count a new connection and start its handshake deadline; None (and the socket
        closed) if a cap is reached."""
        with self.lock:
            if self.connections >= self.max_connections:
                why = f"{self.connections} connections open (max {self.max_connections})"
            elif self.handshakes >= self.max_handshakes:
                why = f"{self.handshakes} handshakes in progress (max {self.max_handshakes})"
            else:
                self.connections += 1
                self.handshakes += 1
                ticket = Ticket(sock, peer)
                self._seq += 1
                heapq.heappush(self._heap, (time.monotonic() + self.deadline_s, self._seq,
                                            ticket))
                self.lock.notify()
                return ticket
            self.refused += 1
            now = time.monotonic()
            loud = now - self._last_log > 1.0
            if loud:
                self._last_log = now
        if loud:
            self.log.warning("data port%s: refused connection from %s: %s (%d refused so far)",
                             self.name, peer, why, self.refused)
        try:
            sock.close()
        except OSError:
            pass
        return None

    def authenticated(self, ticket: Ticket) -> None:
        """The handshake succeeded: the deadline no longer applies."""
        with self.lock:
            if not ticket.authenticated and not ticket.released:
                self.handshakes -= 1
            ticket.authenticated = True

    def release(self, ticket: Ticket) -> None:
        """The connection is closed (call before closing its socket): it no longer counts."""
        with self.lock:
            if ticket.released:
                return
            if not ticket.authenticated:
                self.handshakes -= 1
            ticket.released = True
            self.connections -= 1

    def close(self) -> None:
        """Stop the watchdog."""
        with self.lock:
            self._closed = True
            self.lock.notify()

    def _watch(self) -> None:
        with self.lock:
            while not self._closed:
                if not self._heap:
                    self.lock.wait()
                    continue
                due, _, ticket = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.lock.wait(wait)
                    continue
                heapq.heappop(self._heap)
                if ticket.authenticated or ticket.released:
                    continue
                self.expired += 1
                self.log.warning("data port%s: closing connection from %s: handshake not "
                                 "completed within %.1fs (slow or silent peer)", self.name,
                                 ticket.peer, self.deadline_s)
                try:
                    ticket.sock.shutdown(socket.SHUT_RDWR)  # the reader sees EOF and closes
                except OSError:
                    pass
