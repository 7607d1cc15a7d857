"""The worker-to-worker data plane: authenticated, ordered, back-pressured TCP frames.

Every worker owns one :class:`Transport`. It listens on one TCP port (inbound connections,
one reader thread each) and keeps at most one outbound connection per peer worker (created
lazily by :meth:`Transport.send`, authenticated before use, drained by one sender thread).

Layout
------
The wire format (frame header, types, encode/decode) is in :mod:`jstormpy.runtime.frames`,
the mutual HMAC handshake in :mod:`jstormpy.runtime.handshake`, one outbound connection
(queue, sender thread) in :mod:`jstormpy.runtime.outbound`, the receive loop (ordering,
de-duplication, ACKs) in :mod:`jstormpy.runtime.inbound`, the DATA payload codec in
:mod:`jstormpy.runtime.codec`; this module is the facade.
A bad frame is answered with ``CLOSE`` + reason where possible, the connection is closed,
the reason is logged with the peer address and counted; every other connection keeps
being served.

Generations
-----------
Each ``DATA`` frame carries the sender's generation (set by :meth:`Transport.set_generation`
after a recovery). The receiver drops frames whose generation differs from its own and counts
them in ``stats["stale_frames_dropped"]``; the sender discards queued frames of old generations.
The generation in handshake and ``CLOSE`` frames is informational only.

Backpressure
------------
Each outbound connection has a bounded buffer (``send_buffer_bytes`` of encoded frames);
``send()`` blocks while it is full. ``deliver()`` runs in the reader thread, so a receiver
that blocks in ``deliver()`` stops reading its socket, TCP fills up, the sender thread
stops draining, the buffer fills and ``send()`` blocks: backpressure end to end.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from jstormpy.api.errors import AuthenticationError, FrameError
from jstormpy.runtime.codec import encode_item
from jstormpy.runtime.dataplane_counters import DataPlaneCounters
from jstormpy.runtime.frames import (
    CREDIT_GRANT,
    HEADER,
    MAGIC,
    MAX_CLOSE_REASON,
    READ_BUFFER,
    SEQ,
    VERSION,
    FrameType,
    PeerClosedError,
    close_quietly,
    decode_header,
    encode_frame,
    shutdown_quietly,
)
from jstormpy.runtime.handshake import (
    HANDSHAKE_TIMEOUT_S,
    mac_client,
    mac_server,
    server_handshake,
)
from jstormpy.runtime.handshake_guard import (
    MAX_CONNECTIONS,
    MAX_HANDSHAKES,
    HandshakeGuard,
    Ticket,
)
from jstormpy.runtime.inbound import InboundChannels
from jstormpy.runtime.outbound import ConnectionState, Outbound, OutboundSettings
from jstormpy.runtime.tls_socket import DataPlaneTls

__all__ = [
    "HEADER",
    "MAGIC",
    "VERSION",
    "FrameType",
    "Transport",
    "decode_header",
    "encode_frame",
    "mac_client",
    "mac_server",
]


class Transport:
    """One worker's data plane: a TCP listener plus one outbound connection per peer.

    Args:
        worker_id: This worker's id (sent to peers during the handshake).
        secret: Per-topology secret for the mutual HMAC-SHA256 handshake.
        deliver: ``deliver(dst_task, item)`` (or ``deliver(dst_task, item, generation)`` with
            ``deliver_generation=True``), called in the connection's reader thread once
            per DATA frame of the current generation, in order. May block (backpressure).
        on_credit: ``on_credit(src_task, dst_task, total, generation)``, called in the
            reader thread once per CREDIT frame of the current generation (sent by
            :meth:`send_credit`), in order with the DATA frames of its channel.
        host: Address to bind.
        port: Port to bind (0 = any free port).
        max_frame_bytes: Largest payload accepted (and sent).
        send_buffer_bytes: Encoded bytes queued per outbound connection before ``send()``
            blocks.
        connect_timeout_s: How long ``send()`` keeps trying to connect and authenticate
            before it drops the frame.
        logger: Logger to use (default: this module's logger).
        handshake_timeout_s: Bound on one authentication exchange.

    Example:
        >>> got = []
        >>> a = Transport(1, b"s3cret", lambda task, item: got.append((task, item)))
        >>> b = Transport(2, b"s3cret", lambda task, item: None)
        >>> port = a.start(); _ = b.start()
        >>> b.set_peers({1: ("127.0.0.1", port)})
        >>> b.send(1, 7, ("hello",))
        True
        >>> b.close(); a.close()
    """

    def __init__(self, worker_id: int, secret: bytes, deliver: Callable[..., None], *,
                 host: str = "127.0.0.1", port: int = 0, max_frame_bytes: int = 64 << 20,
                 send_buffer_bytes: int = 8 << 20, connect_timeout_s: float = 10.0,
                 deliver_generation: bool = False,
                 on_credit: Callable[[int, int, int, int], None] | None = None,
                 logger: logging.Logger | None = None,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
                 on_loss: Callable[[int, str], None] | None = None,
                 tls_dir: str = "", max_connections: int = MAX_CONNECTIONS,
                 max_handshakes: int = MAX_HANDSHAKES) -> None:
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise AuthenticationError("Transport secret must be non-empty bytes "
                                      "(the per-topology secret)")
        if not 0 <= worker_id <= 0xFFFFFFFF:
            raise FrameError(f"worker_id={worker_id} does not fit the uint32 wire field")
        if max_frame_bytes < 1 or max_frame_bytes > 0xFFFFFFFF:
            raise FrameError(f"max_frame_bytes={max_frame_bytes} must be in [1, 2**32-1]")
        self.worker_id = worker_id
        self._secret = bytes(secret)
        self._host = host
        self._requested_port = port
        self._max_frame_bytes = max_frame_bytes
        self._send_buffer_bytes = max(1, send_buffer_bytes)
        self._connect_timeout_s = connect_timeout_s
        self._handshake_timeout_s = handshake_timeout_s
        self._log = logger or logging.getLogger(__name__)
        self._tls = DataPlaneTls(tls_dir) if tls_dir else None  # mutual TLS (docs/security.md)
        self._caps = (max_connections, max_handshakes)
        self._guard: HandshakeGuard | None = None

        self._on_loss = on_loss
        self._lock = threading.Lock()
        self._generation = 0
        self._sends_stopped = False  # interrupt_sends() until the next set_generation()
        self._peers: dict[int, tuple[str, int]] = {}
        self._outbound: dict[int, Outbound] = {}
        self._inbound: dict[int, tuple[socket.socket, threading.Thread]] = {}
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._ack_thread: threading.Thread | None = None
        self._port = 0
        self.counters = DataPlaneCounters()
        self.inbound = InboundChannels(
            worker_id, deliver, deliver_generation=deliver_generation, on_credit=on_credit,
            on_gap=self.channel_lost, max_frame_bytes=max_frame_bytes,
            counters=self.counters, log=self._log)
        """The receive side: sequence checks, delivery, ACKs (:mod:`.inbound`)."""
        # what every outbound connection needs of this side, read-only
        self.outbound_settings = OutboundSettings(
            worker_id=worker_id, secret=self._secret, max_frame_bytes=max_frame_bytes,
            connect_timeout_s=connect_timeout_s, handshake_timeout_s=handshake_timeout_s,
            tls=self._tls, log=self._log)

    # -- properties ----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (0 before :meth:`start`)."""
        return self._port

    @property
    def generation(self) -> int:
        """The current generation (starts at 0)."""
        return self._generation

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the counters (``dataplane_counters.COUNTER_KEYS``)."""
        return self.counters.snapshot()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> int:
        """Bind, listen and start the accept thread.

        Returns:
            The bound port.

        Raises:
            FrameError: if called twice or after close.
            OSError: if the address cannot be bound.
        """
        with self._lock:
            if self._closed or self._listener is not None:
                raise FrameError(f"Transport of worker {self.worker_id} already started or "
                                 "closed; create a new one")
            listener = socket.create_server((self._host, self._requested_port), backlog=128)
            listener.settimeout(0.5)  # bounded accept() so close() never waits long
            self._listener = listener
            self._port = listener.getsockname()[1]
            self._guard = HandshakeGuard(self._handshake_timeout_s, *self._caps,
                                         logger=self._log, name=f" of worker {self.worker_id}")
            self._accept_thread = threading.Thread(
                target=self._accept_loop, daemon=True, name=f"jstorm-accept-{self.worker_id}")
            self._accept_thread.start()
            self._ack_thread = threading.Thread(
                target=self.inbound.ack_loop, daemon=True, name=f"jstorm-ack-{self.worker_id}")
            self._ack_thread.start()
        self._log.info("worker %d: transport listening on %s:%d",
                       self.worker_id, self._host, self._port)
        return self._port

    def set_generation(self, gen: int) -> None:
        """Switch to generation ``gen``.

        Outbound frames are tagged with ``gen`` from now on, queued frames of other
        generations are discarded, inbound frames of other generations are dropped, and any
        ``send()`` blocked on a full buffer or a pending connect returns False promptly.
        """
        if not 0 <= gen <= 0xFFFFFFFF:
            raise FrameError(f"generation {gen} does not fit the uint32 wire field")
        with self._lock:
            self._generation = gen
            self._sends_stopped = False
            self.inbound.set_generation(gen)
            outs = list(self._outbound.values())
        dropped = sum(ob.discard_other_generations(gen) for ob in outs)
        if dropped:
            self.counters.count("frames_dropped", dropped)
            self._log.info("worker %d: generation %d: discarded %d queued frame(s) of older "
                           "generations", self.worker_id, gen, dropped)

    def interrupt_sends(self) -> None:
        """Stop sending until the next :meth:`set_generation`: every ``send()`` waiting for
        a channel returns False now, later ones at once.

        The worker calls it when it stops its tasks. Their frames are not needed (the next
        generation restores a checkpoint and replays from it), and a task waiting for a
        peer that cannot be reached would otherwise hold up the stop for
        ``connect_timeout_s``.
        """
        with self._lock:
            self._sends_stopped = True
            outs = list(self._outbound.values())
        for ob in outs:
            with ob.cond:
                ob.cond.notify_all()

    def set_peers(self, peers: dict[int, tuple[str, int]]) -> None:
        """Set ``worker_id -> (host, port)`` of every worker's Transport.

        A peer whose address changed (or that disappeared) has its outbound connection
        closed and its queued frames dropped; the next ``send()`` connects to the new address.
        """
        new = {int(w): (str(h), int(p)) for w, (h, p) in peers.items()}
        with self._lock:
            self._peers = new
            stale = [ob for wid, ob in self._outbound.items() if new.get(wid) != ob.addr]
            for ob in stale:
                del self._outbound[ob.worker_id]
        for ob in stale:
            self._log.info("worker %d: worker %d moved from %s:%d; closing old connection",
                           self.worker_id, ob.worker_id, *ob.addr)
            ob.kill("peer address changed")

    def pending_bytes(self, worker_id: int) -> int:
        """Encoded bytes queued (not yet handed to the socket) for ``worker_id``."""
        with self._lock:
            ob = self._outbound.get(worker_id)
        if ob is None:
            return 0
        with ob.cond:
            return ob.queued_bytes

    def send(self, worker_id: int, dst_task: int, item: Any,
             generation: int | None = None, wait: bool = True) -> bool:
        """Queue ``(dst_task, item)`` as one DATA frame for ``worker_id``.

        With ``generation``, the frame is sent only if that is still the current generation
        (a task of an older generation can never inject a frame into a newer one).

        Blocks while that peer's buffer holds ``>= send_buffer_bytes`` and while the first
        connection to it is being made. With ``wait=False`` it never blocks: a frame the
        channel cannot take at once (connecting, reconnecting, buffer full) is not sent
        (False; not counted as dropped) — for frames that are sent again anyway, such as
        the periodic credit totals of the heartbeat thread.

        Returns:
            True if the frame was queued; False if it was dropped (peer unknown, unreachable
            for ``connect_timeout_s``, connection lost, generation changed while blocked, or
            transport closed). Peer failures are logged, never raised.

        Raises:
            FrameError: the item cannot be pickled or its frame exceeds ``max_frame_bytes``.
        """
        gen = self._generation
        if generation is not None and generation != gen:
            return self._dropped(worker_id, f"sender of generation {generation} is stale")
        try:
            payload = encode_item(dst_task, item)
        except Exception as exc:
            raise FrameError(f"cannot pickle item for task {dst_task} on worker {worker_id}: "
                             f"{type(exc).__name__}: {exc}") from exc
        if len(payload) + SEQ.size > self._max_frame_bytes:
            raise FrameError(f"item for task {dst_task} on worker {worker_id} encodes to "
                             f"{len(payload)} bytes, above max_frame_bytes="
                             f"{self._max_frame_bytes}; send smaller batches")
        header = HEADER.pack(MAGIC, VERSION, FrameType.DATA, gen, SEQ.size + len(payload))
        return self._enqueue(worker_id, gen, header, payload, wait)

    def send_credit(self, worker_id: int, src_task: int, dst_task: int, total: int,
                    generation: int | None = None, wait: bool = True) -> bool:
        """Queue one CREDIT frame for ``worker_id``: the receiver of channel ``src_task ->
        dst_task`` has returned ``total`` credits of it in this generation.

        Sequenced, acknowledged, blocking and dropped exactly like :meth:`send`.
        """
        gen = self._generation
        if generation is not None and generation != gen:
            return self._dropped(worker_id, f"sender of generation {generation} is stale")
        payload = CREDIT_GRANT.pack(src_task, dst_task, total)
        header = HEADER.pack(MAGIC, VERSION, FrameType.CREDIT, gen, SEQ.size + len(payload))
        return self._enqueue(worker_id, gen, header, payload, wait)

    def _enqueue(self, worker_id: int, gen: int, header: bytes, payload: bytes,
                 wait: bool) -> bool:
        """Hand one frame of generation ``gen`` to the peer's outbound connection."""
        with self._lock:
            if self._closed:
                ob = None
                why = "transport closed"
            elif worker_id not in self._peers:
                ob = None
                why = "unknown peer (not in set_peers)"
            else:
                ob = self._outbound_locked(worker_id)
                why = ""
        if ob is None:
            return self._dropped(worker_id, why)

        limit = self._send_buffer_bytes
        with ob.cond:
            while True:
                if self._closed:
                    why = "transport closed"
                    break
                if self._generation != gen:
                    why = f"generation changed from {gen} to {self._generation}"
                    break
                if self._sends_stopped:
                    why = "sending stopped until the next generation (tasks stopping)"
                    break
                if ob.state == ConnectionState.DEAD:
                    why = f"connection to peer lost ({ob.why_dead})"
                    break
                if ob.state == ConnectionState.READY and ob.queued_bytes < limit:
                    ob.append_locked(gen, header, payload)
                    return True
                if not wait:
                    return False  # the caller sends it again later; nothing is lost
                ob.wait_for_room_locked(1.0)  # whoever changes a condition notifies; 1 s: a guard
        return self._dropped(worker_id, why)

    def connect(self, worker_ids: Iterable[int]) -> None:
        """Open the outbound connections to ``worker_ids`` now, without waiting: each
        connects, wraps TLS and authenticates in its sender thread, so the first frame to
        that peer does not wait for it (a worker calls this when it prepares its tasks,
        before they start). Ids that are no known peer are skipped."""
        with self._lock:
            if self._closed:
                return
            for worker_id in worker_ids:
                if worker_id in self._peers:
                    self._outbound_locked(worker_id)

    def _outbound_locked(self, worker_id: int) -> Outbound:
        """The outbound connection to known peer ``worker_id``, opened (its sender thread
        started) if there is none. Called under ``_lock``."""
        ob = self._outbound.get(worker_id)
        if ob is None:
            ob = Outbound(self.outbound_settings, self, worker_id, self._peers[worker_id])
            self._outbound[worker_id] = ob
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(ob.thread)
            ob.thread.start()
        return ob

    def _dropped(self, worker_id: int, why: str) -> bool:
        self.counters.count("frames_dropped")
        self._log.debug("worker %d: frame to worker %d dropped: %s", self.worker_id, worker_id, why)
        return False

    def forget_outbound(self, ob: Outbound) -> None:
        """A connection that gave up: the next send to its peer opens a new one."""
        with self._lock:
            if self._outbound.get(ob.worker_id) is ob:
                del self._outbound[ob.worker_id]

    def reset(self) -> None:
        """Drop all queued outbound frames and close every outbound connection."""
        with self._lock:
            outs = list(self._outbound.values())
            self._outbound.clear()
        for ob in outs:
            ob.kill("transport reset")

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop everything: close the listener and all connections, join threads.

        Waits at most about ``timeout_s`` for threads; a reader stuck inside a blocking
        ``deliver()`` is abandoned (it is a daemon thread) and logged.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listener = self._listener
            outs = list(self._outbound.values())
            self._outbound.clear()
            inbound = list(self._inbound.values())
            threads = list(self._threads)
            accept_thread = self._accept_thread
            ack_thread = self._ack_thread
        self.inbound.close()
        shutdown_quietly(listener)
        close_quietly(listener)
        if self._guard is not None:
            self._guard.close()
        for ob in outs:
            ob.kill("transport closed")
        for sock, _ in inbound:
            shutdown_quietly(sock)
        deadline = time.monotonic() + timeout_s
        all_threads = [t for t in [accept_thread, ack_thread, *threads] if t is not None]
        all_threads += [t for _, t in inbound]
        me = threading.current_thread()
        all_threads = [th for th in all_threads if th is not me]  # close() from deliver()
        for th in all_threads:
            th.join(max(0.0, deadline - time.monotonic()))
        alive = [th.name for th in all_threads if th.is_alive()]
        if alive:
            self._log.warning("worker %d: transport closed but thread(s) still running "
                              "(blocked in deliver()?): %s", self.worker_id, ", ".join(alive))
        self._log.info("worker %d: transport closed", self.worker_id)

    # -- inbound -------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._closed:
            try:
                sock, addr = listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if not self._closed:
                    self._log.error("worker %d: accept failed: %s", self.worker_id, exc)
                    # avoid a hot loop on persistent errors (e.g. EMFILE)
                    threading.Event().wait(0.1)
                continue
            assert self._guard is not None
            ticket = self._guard.admit(sock, f"{addr[0]}:{addr[1]}")
            if ticket is None:  # over a cap (a flood): refused and logged by the guard
                continue
            th = threading.Thread(target=self._serve, args=(sock, addr, ticket), daemon=True,
                                  name=f"jstorm-recv-{self.worker_id}<-{addr[0]}:{addr[1]}")
            with self._lock:
                if self._closed:
                    close_quietly(sock)
                    break
                self._inbound[id(sock)] = (sock, th)
                self._threads = [t for t in self._threads if t.is_alive()]
            th.start()

    def _serve(self, sock: socket.socket, addr: tuple[str, int],
               ticket: Ticket | None = None) -> None:
        """Authenticate one inbound connection, then deliver its DATA frames in order."""
        peer = f"{addr[0]}:{addr[1]}"
        reader = None
        raw = sock
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self._handshake_timeout_s)
            if self._tls is not None:
                sock = self._tls.wrap_accepted(sock, ticket)
                with self._lock:
                    if id(raw) in self._inbound:
                        self._inbound[id(raw)] = (sock, self._inbound[id(raw)][1])
            reader = sock.makefile("rb", buffering=READ_BUFFER)
            try:
                peer_worker = self._server_handshake(sock, reader, peer)
            except AuthenticationError as exc:
                self.counters.count("auth_failures")
                self._log.warning("worker %d: authentication failed for %s: %s",
                                  self.worker_id, peer, exc)
                self._send_close(sock, "authentication failed")
                return
            if ticket is not None and self._guard is not None:
                self._guard.authenticated(ticket)
            sock.settimeout(None)
            peer = f"worker {peer_worker} at {peer}"
            self._log.debug("worker %d: accepted %s", self.worker_id, peer)
            self.inbound.read(reader, peer, sock, peer_worker)
        except FrameError as exc:
            self.counters.count("malformed_frames")
            self._log.warning("worker %d: closing connection from %s: %s",
                              self.worker_id, peer, exc)
            self._send_close(sock, str(exc))
        except PeerClosedError as exc:
            self._log.debug("worker %d: %s closed: %s", self.worker_id, peer, exc)
        except ssl.SSLError as exc:
            self.counters.count("auth_failures")
            self._log.warning("worker %d: TLS handshake with %s failed: %s",
                              self.worker_id, peer, exc)
        except TimeoutError:
            self._log.warning("worker %d: closing connection from %s: handshake not completed "
                              "within %.1fs", self.worker_id, peer, self._handshake_timeout_s)
            self._send_close(sock, "handshake timeout")
        except OSError as exc:
            if not self._closed:
                self._log.info("worker %d: connection from %s lost: %s", self.worker_id, peer, exc)
        except Exception:
            self._log.exception("worker %d: reader for %s crashed", self.worker_id, peer)
        finally:
            if ticket is not None and self._guard is not None:
                self._guard.release(ticket)
            close_quietly(reader, sock)
            with self._lock:
                self._inbound.pop(id(raw), None)

    def _server_handshake(self, sock: socket.socket, reader: Any, peer: str) -> int:
        return server_handshake(sock, reader, self._secret, self._generation,
                                self._max_frame_bytes)

    def channel_lost(self, worker_id: int, why: str) -> None:
        """A channel to or from ``worker_id`` lost frames: log, count, escalate."""
        self.counters.count("channels_lost")
        self._log.error("worker %d: %s", self.worker_id, why)
        if self._on_loss is not None and not self._closed:
            try:
                self._on_loss(worker_id, why)
            except Exception:
                self._log.exception("worker %d: on_loss callback raised", self.worker_id)

    def _send_close(self, sock: socket.socket, reason: str) -> None:
        """Best effort: tell the peer why, then half-close so it sees EOF after the reason."""
        try:
            sock.settimeout(1.0)
            sock.sendall(encode_frame(FrameType.CLOSE, self._generation,
                                      reason.encode("utf-8")[:MAX_CLOSE_REASON]))
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

