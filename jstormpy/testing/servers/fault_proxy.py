"""A fault-injecting TCP proxy: real sockets between two workers, faults on command.

Put a :class:`FaultProxy` between a sender and a receiver (tell the sender the proxy's
address for that peer) and it forwards bytes both ways until told otherwise:

* :meth:`FaultProxy.reset` — abort every live connection with a TCP RST (``SO_LINGER 0``);
* :meth:`FaultProxy.partition` — stop forwarding and refuse new connections (bytes sent
  meanwhile are held back, as a network that has stopped delivering), until :meth:`heal`;
* :meth:`FaultProxy.hang` — accept connections but answer nothing (a server that hangs),
  until :meth:`heal`;
* :attr:`FaultProxy.delay_s` — forward every chunk this much later (a slow server).

``upstream`` may be a callable returning the address (or None: refuse), asked at every
accepted connection: a peer that restarts on another port is followed.

Example:
    >>> proxy = FaultProxy(("127.0.0.1", receiver_port))     # doctest: +SKIP
    >>> port = proxy.start()                                 # doctest: +SKIP
    >>> proxy.reset()                                        # doctest: +SKIP
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable

_CHUNK = 64 << 10


def _abort(sock: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN.

    ``SO_LINGER 0`` makes the final close send RST; ``SHUT_RD`` first wakes a pump thread
    blocked in ``recv`` on it (a bare close would not, and the RST would wait for it).
    """
    for op in (lambda: sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0)),
               lambda: sock.shutdown(socket.SHUT_RD), sock.close):
        try:
            op()
        except OSError:
            pass


class FaultProxy:
    """Forward TCP connections from a local port to ``upstream``, injecting faults.

    Args:
        upstream: ``(host, port)`` every accepted connection is forwarded to, or a callable
            returning it (None: refuse the connection), asked at each connection.
        host: Address to listen on.
    """

    def __init__(self, upstream: tuple[str, int] | Callable[[], tuple[str, int] | None],
                 host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.host = host
        self.port = 0
        self.delay_s = 0.0
        self._refusing = False
        self.resets = 0
        self.connections_accepted = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        self._listener: socket.socket | None = None
        self._aborted: set[socket.socket] = set()

    def start(self) -> int:
        """Listen and start forwarding; returns the proxy's port."""
        listener = socket.create_server((self.host, 0), backlog=64)
        listener.settimeout(0.2)
        self._listener = listener
        self.port = listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, daemon=True,
                         name=f"fault-proxy-{self.port}").start()
        return self.port

    def reset(self) -> int:
        """Abort every live connection (RST both ways); returns how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self.resets += len(pairs)
            self._aborted.update(s for pair in pairs for s in pair)
        for a, b in pairs:
            _abort(a)
            _abort(b)
        return len(pairs)

    def partition(self) -> None:
        """Stop forwarding bytes and refuse new connections until :meth:`heal`."""
        self._refusing = True
        self._flowing.clear()

    def hang(self) -> None:
        """Accept connections but forward nothing either way until :meth:`heal`."""
        self._refusing = False
        self._flowing.clear()

    def heal(self) -> None:
        """Resume forwarding after :meth:`partition` or :meth:`hang`."""
        self._refusing = False
        self._flowing.set()

    @property
    def live_connections(self) -> int:
        """Connections currently forwarded."""
        with self._lock:
            return len(self._pairs)

    def close(self) -> None:
        """Stop listening and cut every connection."""
        self._closed = True
        self._flowing.set()
        if self._listener is not None:
            self._listener.close()
        self.reset()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._refusing:
                _abort(client)  # partitioned: the peer is unreachable
                continue
            try:
                upstream = self.upstream() if callable(self.upstream) else self.upstream
                if upstream is None:
                    raise ConnectionRefusedError("no upstream address")
                server = socket.create_connection(upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _abort(client)
                continue
            with self._lock:
                self._pairs.append((client, server))
                self.connections_accepted += 1
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if src in self._aborted or dst in self._aborted:
                    raise ConnectionResetError("reset by the fault proxy")
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                if self.delay_s > 0:
                    time.sleep(self.delay_s)
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            _abort(src)
            _abort(dst)
