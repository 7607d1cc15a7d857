"""The worker-to-worker data plane: authenticated, ordered, back-pressured TCP frames.

Every worker owns one :class:`Transport`. It listens on one TCP port (inbound connections,
one reader thread each) and keeps at most one outbound connection per peer worker (created
lazily by :meth:`Transport.send`, authenticated before use, drained by one sender thread).

Wire format
-----------
Every frame is a 12-byte header followed by ``length`` payload bytes::

    struct.Struct("!2sBBII")
    +-------+---------+------+------------+--------+------------------+
    | magic | version | type | generation | length | payload ...      |
    | b"JS" |  1 (u8) |  u8  |   uint32   | uint32 | ``length`` bytes |
    +-------+---------+------+------------+--------+------------------+

Frame types:

* ``CHALLENGE`` (1) server -> client, payload ``n_s``: 32 random bytes.
* ``RESPONSE`` (2) client -> server, payload ``worker_id`` (uint32, network order)
  + ``n_c`` (32 random bytes) + ``HMAC-SHA256(secret, b"jstorm-client" + n_s + worker_id)``.
* ``ACCEPT`` (3) server -> client, payload ``HMAC-SHA256(secret, b"jstorm-server" + n_c)``.
* ``DATA`` (4) client -> server, payload ``pickle.dumps((dst_task, item), protocol=5)``.
* ``CLOSE`` (5) either way, payload a UTF-8 reason; the sender closes the connection after it.

The header is validated (magic, version, known type, ``length <= max_frame_bytes``, type
allowed in the connection's state) *before* any payload byte is read, so a hostile or
broken peer can never make us allocate more than ``max_frame_bytes``. A bad frame is
answered with ``CLOSE`` + reason where possible, the connection is closed, the reason is
logged with the peer address and counted; every other connection keeps being served.

Handshake (mutual, per-topology secret; no payload is decoded before it succeeds)::

    server                                   client
      | -- CHALLENGE(n_s) ------------------>  |
      | <-- RESPONSE(wid, n_c, mac_c) -------  |   mac_c = HMAC(secret, "jstorm-client"+n_s+wid)
      | -- ACCEPT(mac_s) ------------------->  |   mac_s = HMAC(secret, "jstorm-server"+n_c)
      | <-- DATA ... DATA -------------------  |

The handshake must finish within ``handshake_timeout_s`` (default 5 s) so a silent peer
cannot hold a thread. Both MACs are compared with :func:`hmac.compare_digest`.

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

import collections
import hashlib
import hmac
import logging
import os
import pickle
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from jstormpy.errors import AuthenticationError, FrameError
from jstormpy.runtime.handshake_guard import (  # [security hook]
    MAX_CONNECTIONS,
    MAX_HANDSHAKES,
    HandshakeGuard,
    Ticket,
)
from jstormpy.runtime.tls_socket import DataPlaneTls, send_buffers  # [security hook]

__all__ = [
    "ACCEPT",
    "CHALLENGE",
    "CLOSE",
    "DATA",
    "HEADER",
    "MAGIC",
    "RESPONSE",
    "VERSION",
    "Transport",
    "decode_header",
    "encode_frame",
    "mac_client",
    "mac_server",
]

HEADER = struct.Struct("!2sBBII")
"""Frame header: magic, version, type, generation, payload length."""
MAGIC = b"JS"
VERSION = 1

CHALLENGE = 1
RESPONSE = 2
ACCEPT = 3
DATA = 4
CLOSE = 5
_TYPE_NAMES = {CHALLENGE: "CHALLENGE", RESPONSE: "RESPONSE", ACCEPT: "ACCEPT", DATA: "DATA",
               CLOSE: "CLOSE"}

NONCE_BYTES = 32
MAC_BYTES = hashlib.sha256().digest_size
_WID = struct.Struct("!I")
_RESPONSE_BYTES = _WID.size + NONCE_BYTES + MAC_BYTES
_MAX_CLOSE_REASON = 4096

HANDSHAKE_TIMEOUT_S = 5.0
"""Default bound on the whole authentication exchange, on both sides."""
_MAX_BATCH_FRAMES = 500  # frames per sendmsg (2 iovecs each; IOV_MAX is 1024 on Linux)
_MAX_BATCH_BYTES = 4 << 20
_IOV_MAX = 1024
_READ_BUFFER = 256 << 10

_STAT_KEYS = ("frames_sent", "bytes_sent", "frames_received", "bytes_received",
              "auth_failures", "malformed_frames", "stale_frames_dropped", "frames_dropped",
              "deliver_errors")


def mac_client(secret: bytes, n_s: bytes, worker_id: int) -> bytes:
    """The client's proof: ``HMAC-SHA256(secret, b"jstorm-client" + n_s + worker_id)``."""
    return hmac.new(secret, b"jstorm-client" + n_s + _WID.pack(worker_id), hashlib.sha256).digest()


def mac_server(secret: bytes, n_c: bytes) -> bytes:
    """The server's proof: ``HMAC-SHA256(secret, b"jstorm-server" + n_c)``."""
    return hmac.new(secret, b"jstorm-server" + n_c, hashlib.sha256).digest()


def encode_frame(ftype: int, generation: int, payload: bytes = b"") -> bytes:
    """One complete frame (header + payload) as bytes."""
    return HEADER.pack(MAGIC, VERSION, ftype, generation & 0xFFFFFFFF, len(payload)) + payload


def decode_header(header: bytes, max_frame_bytes: int) -> tuple[int, int, int]:
    """Validate a 12-byte header and return ``(type, generation, length)``.

    Raises:
        FrameError: bad magic, unsupported version, unknown type, or a length above
            ``max_frame_bytes`` (checked before any payload is read).
    """
    magic, version, ftype, generation, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise FrameError(f"bad magic {magic!r} (expected {MAGIC!r}): not a jstorm peer")
    if version != VERSION:
        raise FrameError(f"unsupported protocol version {version} (this side speaks {VERSION})")
    if ftype not in _TYPE_NAMES:
        raise FrameError(f"unknown frame type {ftype}")
    if length > max_frame_bytes:
        raise FrameError(f"{_TYPE_NAMES[ftype]} frame of {length} bytes exceeds "
                         f"max_frame_bytes={max_frame_bytes}")
    return ftype, generation, length


class _PeerClosedError(Exception):
    """The peer sent CLOSE (message = its reason) or closed the connection."""


def _read_exact(reader: Any, n: int) -> bytes:
    """Read exactly ``n`` bytes from a buffered socket file or raise _PeerClosedError."""
    data = reader.read(n) if n else b""
    if len(data) != n:
        raise _PeerClosedError(f"connection closed by peer after {len(data)} of {n} bytes")
    return data


def _read_frame(reader: Any, max_frame_bytes: int,
                allowed: tuple[int, ...]) -> tuple[int, int, bytes | None, int]:
    """Read one frame whose type must be in ``allowed`` (CLOSE is always allowed).

    Returns ``(type, generation, payload, length)``. CLOSE raises _PeerClosedError.
    """
    ftype, generation, length = decode_header(_read_exact(reader, HEADER.size), max_frame_bytes)
    if ftype == CLOSE:
        reason = _read_exact(reader, min(length, _MAX_CLOSE_REASON))
        raise _PeerClosedError(f"peer sent CLOSE: {reason.decode('utf-8', 'replace')}")
    if ftype not in allowed:
        names = "/".join(_TYPE_NAMES[t] for t in allowed)
        raise FrameError(f"unexpected {_TYPE_NAMES[ftype]} frame (expected {names})")
    return ftype, generation, _read_exact(reader, length), length


def _sendmsg_all(sock: socket.socket, buffers: list[bytes]) -> None:
    """Write every buffer, in order, with as few ``sendmsg`` calls as possible."""
    views = [memoryview(b) for b in buffers if b]
    i = 0
    while i < len(views):
        sent = sock.sendmsg(views[i:i + _IOV_MAX])
        while sent > 0:
            size = len(views[i])
            if sent >= size:
                sent -= size
                i += 1
            else:
                views[i] = views[i][sent:]
                sent = 0


def _close_quietly(*closables: Any) -> None:
    for c in closables:
        if c is None:
            continue
        try:
            c.close()
        except OSError:
            pass


def _shutdown_quietly(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# Outbound connection states.
_CONNECTING = "connecting"
_READY = "ready"
_DEAD = "dead"


class _Outbound:
    """One outbound connection to a peer worker: a bounded frame queue and its sender thread."""

    def __init__(self, transport: Transport, worker_id: int, addr: tuple[str, int]) -> None:
        self.transport = transport
        self.worker_id = worker_id
        self.addr = addr
        self.cond = threading.Condition(threading.Lock())
        # Entries: (generation, header, payload).
        self.queue: collections.deque[tuple[int, bytes, bytes]] = collections.deque()
        self.queued_bytes = 0
        self.state = _CONNECTING
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
        if self.state != _DEAD:
            self.state = _DEAD
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
        _shutdown_quietly(sock)  # unblocks a sender thread stuck in sendmsg

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
                _shutdown_quietly(sock)
                _close_quietly(sock)
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
                if self.state == _DEAD:
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
                if t._tls is not None:  # [security hook]
                    sock = t._tls.wrap_connected(sock)  # [security hook]
                self._handshake(sock)
                sock.settimeout(None)
            except (OSError, FrameError, AuthenticationError, _PeerClosedError) as exc:
                _close_quietly(sock)
                auth = (AuthenticationError, ssl.SSLCertVerificationError)  # [security hook]
                if isinstance(exc, auth):  # [security hook]
                    t._count("auth_failures")
                    t._log.error("worker %d: authentication with worker %d at %s:%d failed: %s",
                                 t.worker_id, self.worker_id, *self.addr, exc)
                last_error = f"{type(exc).__name__}: {exc}"
                with self.cond:
                    if self.state == _DEAD:
                        return None
                    self.cond.wait(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, 0.5)
                continue
            with self.cond:
                if self.state == _DEAD:
                    _close_quietly(sock)
                    return None
                self.sock = sock
                self.state = _READY
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
        reader = sock.makefile("rb")
        try:
            _, _, n_s, _ = _read_frame(reader, _MAX_CLOSE_REASON, (CHALLENGE,))  # [security hook]
            assert n_s is not None
            if len(n_s) != NONCE_BYTES:
                raise FrameError(f"CHALLENGE nonce of {len(n_s)} bytes (expected {NONCE_BYTES})")
            n_c = os.urandom(NONCE_BYTES)
            payload = _WID.pack(t.worker_id) + n_c + mac_client(t._secret, n_s, t.worker_id)
            sock.sendall(encode_frame(RESPONSE, t._generation, payload))
            try:
                # [security hook] ACCEPT (or a CLOSE reason) is short: bounded before reading
                _, _, proof, _ = _read_frame(reader, _MAX_CLOSE_REASON, (ACCEPT,))
            except _PeerClosedError as exc:
                raise AuthenticationError(f"server refused us: {exc}") from exc
            if not hmac.compare_digest(proof or b"", mac_server(t._secret, n_c)):
                raise AuthenticationError("server's ACCEPT proof does not match our secret "
                                          "(peer belongs to another topology?)")
        finally:
            reader.close()

    def _drain(self, sock: socket.socket) -> None:
        t = self.transport
        while True:
            with self.cond:
                while not self.queue and self.state == _READY:
                    self.cond.wait()
                if self.state != _READY:
                    return
                buffers: list[bytes] = []
                nbytes = 0
                q = self.queue
                while q and len(buffers) < 2 * _MAX_BATCH_FRAMES and nbytes < _MAX_BATCH_BYTES:
                    _, header, payload = q.popleft()
                    buffers.append(header)
                    buffers.append(payload)
                    nbytes += len(header) + len(payload)
                self.queued_bytes -= nbytes
                self.cond.notify_all()
            try:
                write = send_buffers if t._tls is not None else _sendmsg_all  # [security hook]
                write(sock, buffers)  # [security hook]
            except OSError as exc:
                with self.cond:
                    was_ready = self.state == _READY
                    dropped = self._kill_locked(f"send failed: {exc}") + len(buffers) // 2
                t._count("frames_dropped", dropped)
                if was_ready:
                    t._log.warning("worker %d: connection to worker %d at %s:%d failed (%s); "
                                   "%d frame(s) dropped", t.worker_id, self.worker_id,
                                   *self.addr, exc, dropped)
                return
            t._count2("frames_sent", len(buffers) // 2, "bytes_sent", nbytes)


class Transport:
    """One worker's data plane: a TCP listener plus one outbound connection per peer.

    Args:
        worker_id: This worker's id (sent to peers during the handshake).
        secret: Per-topology secret for the mutual HMAC-SHA256 handshake.
        deliver: ``deliver(dst_task, item)`` (or ``deliver(dst_task, item, generation)`` with
            ``deliver_generation=True``), called in the connection's reader thread once
            per DATA frame of the current generation, in order. May block (backpressure).
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
                 logger: logging.Logger | None = None,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
                 tls_dir: str = "", max_connections: int = MAX_CONNECTIONS,  # [security hook]
                 max_handshakes: int = MAX_HANDSHAKES) -> None:  # [security hook]
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise AuthenticationError("Transport secret must be non-empty bytes "
                                      "(the per-topology secret)")
        if not 0 <= worker_id <= 0xFFFFFFFF:
            raise FrameError(f"worker_id={worker_id} does not fit the uint32 wire field")
        if max_frame_bytes < 1 or max_frame_bytes > 0xFFFFFFFF:
            raise FrameError(f"max_frame_bytes={max_frame_bytes} must be in [1, 2**32-1]")
        self.worker_id = worker_id
        self._secret = bytes(secret)
        self._deliver = deliver
        self._deliver_generation = deliver_generation
        self._host = host
        self._requested_port = port
        self._max_frame_bytes = max_frame_bytes
        self._send_buffer_bytes = max(1, send_buffer_bytes)
        self._connect_timeout_s = connect_timeout_s
        self._handshake_timeout_s = handshake_timeout_s
        self._log = logger or logging.getLogger(__name__)
        self._tls = DataPlaneTls(tls_dir) if tls_dir else None  # [security hook]
        self._caps = (max_connections, max_handshakes)  # [security hook]
        self._guard: HandshakeGuard | None = None  # [security hook]

        self._lock = threading.Lock()
        self._generation = 0
        self._peers: dict[int, tuple[str, int]] = {}
        self._outbound: dict[int, _Outbound] = {}
        self._inbound: dict[int, tuple[socket.socket, threading.Thread]] = {}
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._port = 0
        self._stats_lock = threading.Lock()
        self._stats = dict.fromkeys(_STAT_KEYS, 0)

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
        """A snapshot of the counters.

        ``frames_*``/``bytes_*`` count DATA frames (bytes include the 12-byte header);
        ``frames_dropped`` counts frames this side dropped before sending (``send()``
        returned False, or queued frames discarded by a generation change, reset, address
        change or broken connection); ``deliver_errors`` counts ``deliver()`` exceptions.
        """
        with self._stats_lock:
            return dict(self._stats)

    def _count(self, key: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[key] += n

    def _count2(self, k1: str, n1: int, k2: str, n2: int) -> None:
        with self._stats_lock:
            self._stats[k1] += n1
            self._stats[k2] += n2

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
            self._guard = HandshakeGuard(self._handshake_timeout_s, *self._caps,  # [security hook]
                                         logger=self._log, name=f" of worker {self.worker_id}")
            self._accept_thread = threading.Thread(
                target=self._accept_loop, daemon=True, name=f"jstorm-accept-{self.worker_id}")
            self._accept_thread.start()
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
            outs = list(self._outbound.values())
        dropped = sum(ob.discard_other_generations(gen) for ob in outs)
        if dropped:
            self._count("frames_dropped", dropped)
            self._log.info("worker %d: generation %d: discarded %d queued frame(s) of older "
                           "generations", self.worker_id, gen, dropped)

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
             generation: int | None = None) -> bool:
        """Queue ``(dst_task, item)`` as one DATA frame for ``worker_id``.

        With ``generation``, the frame is sent only if that is still the current generation
        (a task of an older generation can never inject a frame into a newer one).

        Blocks while that peer's buffer holds ``>= send_buffer_bytes`` and while the first
        connection to it is being made.

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
            payload = pickle.dumps((dst_task, item), protocol=5)
        except Exception as exc:
            raise FrameError(f"cannot pickle item for task {dst_task} on worker {worker_id}: "
                             f"{type(exc).__name__}: {exc}") from exc
        if len(payload) > self._max_frame_bytes:
            raise FrameError(f"item for task {dst_task} on worker {worker_id} encodes to "
                             f"{len(payload)} bytes, above max_frame_bytes="
                             f"{self._max_frame_bytes}; send smaller batches")
        header = HEADER.pack(MAGIC, VERSION, DATA, gen, len(payload))
        size = len(header) + len(payload)

        with self._lock:
            if self._closed:
                ob = None
                why = "transport closed"
            elif worker_id not in self._peers:
                ob = None
                why = "unknown peer (not in set_peers)"
            else:
                ob = self._outbound.get(worker_id)
                if ob is None:
                    ob = _Outbound(self, worker_id, self._peers[worker_id])
                    self._outbound[worker_id] = ob
                    self._threads = [t for t in self._threads if t.is_alive()]
                    self._threads.append(ob.thread)
                    ob.thread.start()
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
                if ob.state == _DEAD:
                    why = f"connection to peer lost ({ob.why_dead})"
                    break
                if ob.state == _READY and ob.queued_bytes < limit:
                    ob.queue.append((gen, header, payload))
                    ob.queued_bytes += size
                    ob.cond.notify_all()
                    return True
                ob.cond.wait(1.0)  # everyone who changes a condition notifies; 1 s is a guard
        return self._dropped(worker_id, why)

    def _dropped(self, worker_id: int, why: str) -> bool:
        self._count("frames_dropped")
        self._log.debug("worker %d: frame to worker %d dropped: %s", self.worker_id, worker_id, why)
        return False

    def _forget_outbound(self, ob: _Outbound) -> None:
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
        _shutdown_quietly(listener)
        _close_quietly(listener)
        if self._guard is not None:  # [security hook]
            self._guard.close()  # [security hook]
        for ob in outs:
            ob.kill("transport closed")
        for sock, _ in inbound:
            _shutdown_quietly(sock)
        deadline = time.monotonic() + timeout_s
        all_threads = [t for t in [accept_thread, *threads] if t is not None]
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
            assert self._guard is not None  # [security hook]
            ticket = self._guard.admit(sock, f"{addr[0]}:{addr[1]}")  # [security hook]
            if ticket is None:  # [security hook] over a cap (flood): refused and logged
                continue  # [security hook]
            th = threading.Thread(target=self._serve, args=(sock, addr, ticket),  # [security hook]
                                  daemon=True,
                                  name=f"jstorm-recv-{self.worker_id}<-{addr[0]}:{addr[1]}")
            with self._lock:
                if self._closed:
                    _close_quietly(sock)
                    break
                self._inbound[id(sock)] = (sock, th)
                self._threads = [t for t in self._threads if t.is_alive()]
            th.start()

    def _serve(self, sock: socket.socket, addr: tuple[str, int],
               ticket: Ticket | None = None) -> None:  # [security hook]
        """Authenticate one inbound connection, then deliver its DATA frames in order."""
        peer = f"{addr[0]}:{addr[1]}"
        reader = None
        raw = sock  # [security hook]
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self._handshake_timeout_s)
            if self._tls is not None:  # [security hook]
                sock = self._tls.wrap_accepted(sock, ticket)  # [security hook]
                with self._lock:  # [security hook]
                    self._inbound[id(raw)] = (sock, self._inbound[id(raw)][1])  # [security hook]
            reader = sock.makefile("rb", buffering=_READ_BUFFER)
            try:
                peer_worker = self._server_handshake(sock, reader, peer)
            except AuthenticationError as exc:
                self._count("auth_failures")
                self._log.warning("worker %d: authentication failed for %s: %s",
                                  self.worker_id, peer, exc)
                self._send_close(sock, "authentication failed")
                return
            if ticket is not None and self._guard is not None:  # [security hook]
                self._guard.authenticated(ticket)  # [security hook]
            sock.settimeout(None)
            peer = f"worker {peer_worker} at {peer}"
            self._log.debug("worker %d: accepted %s", self.worker_id, peer)
            self._read_data(reader, peer)
        except FrameError as exc:
            self._count("malformed_frames")
            self._log.warning("worker %d: closing connection from %s: %s",
                              self.worker_id, peer, exc)
            self._send_close(sock, str(exc))
        except _PeerClosedError as exc:
            self._log.debug("worker %d: %s closed: %s", self.worker_id, peer, exc)
        except ssl.SSLError as exc:  # [security hook]
            self._count("auth_failures")  # [security hook]
            self._log.warning("worker %d: TLS handshake with %s failed: %s",  # [security hook]
                              self.worker_id, peer, exc)  # [security hook]
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
            if ticket is not None and self._guard is not None:  # [security hook]
                self._guard.release(ticket)  # [security hook]
            _close_quietly(reader, sock)
            with self._lock:
                self._inbound.pop(id(raw), None)  # [security hook]

    def _server_handshake(self, sock: socket.socket, reader: Any, peer: str) -> int:
        n_s = os.urandom(NONCE_BYTES)
        sock.sendall(encode_frame(CHALLENGE, self._generation, n_s))
        _, _, payload, _ = _read_frame(reader, _RESPONSE_BYTES, (RESPONSE,))  # [security hook]
        assert payload is not None
        if len(payload) != _RESPONSE_BYTES:
            raise FrameError(f"RESPONSE payload of {len(payload)} bytes "
                             f"(expected {_RESPONSE_BYTES})")
        (peer_worker,) = _WID.unpack_from(payload)
        n_c = payload[_WID.size:_WID.size + NONCE_BYTES]
        proof = payload[_WID.size + NONCE_BYTES:]
        if not hmac.compare_digest(proof, mac_client(self._secret, n_s, peer_worker)):
            raise AuthenticationError(f"client claiming worker {peer_worker} sent a wrong "
                                      "HMAC proof (wrong topology secret?)")
        sock.sendall(encode_frame(ACCEPT, self._generation, mac_server(self._secret, n_c)))
        return int(peer_worker)

    def _read_data(self, reader: Any, peer: str) -> None:
        max_frame = self._max_frame_bytes
        hsize = HEADER.size
        unpack = HEADER.unpack
        deliver = self._deliver
        while True:
            header = reader.read(hsize)
            if len(header) != hsize:
                if header:
                    raise FrameError(f"truncated header ({len(header)} of {hsize} bytes)")
                self._log.debug("worker %d: %s closed the connection", self.worker_id, peer)
                return
            magic, version, ftype, generation, length = unpack(header)
            if magic != MAGIC or version != VERSION or ftype != DATA or length > max_frame:
                ftype, generation, length = decode_header(header, max_frame)
                if ftype == CLOSE:
                    reason = _read_exact(reader, min(length, _MAX_CLOSE_REASON))
                    raise _PeerClosedError(reason.decode("utf-8", "replace"))
                raise FrameError(f"unexpected {_TYPE_NAMES[ftype]} frame after authentication")
            payload = reader.read(length)
            if len(payload) != length:
                raise FrameError(f"truncated DATA frame ({len(payload)} of {length} bytes)")
            if generation != self._generation:
                self._count("stale_frames_dropped")
                continue
            try:
                dst_task, item = pickle.loads(payload)
            except Exception as exc:
                raise FrameError(f"undecodable DATA payload of {length} bytes: "
                                 f"{type(exc).__name__}: {exc}") from exc
            self._count2("frames_received", 1, "bytes_received", hsize + length)
            try:
                if self._deliver_generation:
                    deliver(dst_task, item, generation)
                else:
                    deliver(dst_task, item)
            except Exception:
                self._count("deliver_errors")
                self._log.exception("worker %d: deliver() raised for a frame from %s to task %r",
                                    self.worker_id, peer, dst_task)

    def _send_close(self, sock: socket.socket, reason: str) -> None:
        """Best effort: tell the peer why, then half-close so it sees EOF after the reason."""
        try:
            sock.settimeout(1.0)
            sock.sendall(encode_frame(CLOSE, self._generation,
                                      reason.encode("utf-8")[:_MAX_CLOSE_REASON]))
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
