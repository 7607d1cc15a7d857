"""TLS for the worker-to-worker data plane (docs/security.md).

With ``Config.tls`` on, every data connection is wrapped in mutual TLS with the
topology's certificates (``jstormpy.security.tls``): the server requires a client certificate
signed by the topology CA, the client checks the server presents ``jstorm-worker`` from
the same CA. After the TLS handshake the HMAC handshake of ``transport.py`` runs inside
it, and every DATA frame is then integrity-protected and encrypted by TLS (a frame
cannot be injected into an authenticated connection).

The TLS handshake runs under the socket's timeout and so inside the transport's
handshake deadline (``handshake_guard.py``).

One connection, two threads: each data connection is read by one thread (DATA frames on
the receiving side, ACKs on the sending side) while another writes on it (the ACK thread,
or the sender). OpenSSL does not allow two threads inside one ``SSL`` object at once, and
``ssl.SSLSocket`` does not serialise them. So once the TLS handshake is done, a data
connection is a :class:`SerializedSSLSocket`: its socket is non-blocking, every
``SSL_read``/``SSL_write`` runs under one per-connection lock, and a thread that has to
wait (no data to read, a full send buffer) releases the lock and waits in ``poll`` for
the socket, so a reader never blocks the writer and no two threads are ever inside
OpenSSL for the same connection. Writers also hold a write lock for a whole
``sendall``, so two writers (the ACK thread and a CLOSE on the same connection) never
interleave their frames nor retry each other's pending ``SSL_write``. Timeouts set with
``settimeout`` keep their meaning.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import ssl
import threading
import time
from typing import Any

from jstormpy.runtime.handshake_guard import Ticket
from jstormpy.security.tls import ROLE_WORKER, client_context, server_context

POLL_CAP_S = 0.25
"""Longest single wait in ``poll`` before OpenSSL is asked again. Only a safety net:
TLS 1.3 ``SSL_write`` never consumes incoming records, so a reader always finds new
records by polling the socket."""


class SerializedSSLSocket(ssl.SSLSocket):
    """An ``SSLSocket`` that one thread may read while another writes.

    Before :meth:`serialize` it behaves exactly as ``ssl.SSLSocket`` (the TLS handshake
    and anything else a single thread does). After it, reads and writes go through
    non-blocking OpenSSL calls under one lock; see the module docstring.
    """

    _serialized = False
    _io_lock: threading.Lock
    _write_lock: threading.RLock
    _logical_timeout: float | None = None
    _sslobj: Any  # set by ssl.SSLSocket (None once closed); not declared by typeshed

    def serialize(self) -> None:
        """Switch to serialised I/O (call once the TLS handshake is complete)."""
        if self._serialized:
            return
        self._io_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._logical_timeout = super().gettimeout()
        super().settimeout(0.0)  # OpenSSL never blocks; waiting happens in _wait()
        self._serialized = True

    # -- timeouts keep their meaning for callers ----------------------------------------------
    def settimeout(self, value: float | None) -> None:
        if not self._serialized:
            super().settimeout(value)
            return
        if value is not None and value < 0:
            raise ValueError("Timeout value out of range")
        self._logical_timeout = value

    def gettimeout(self) -> float | None:
        return self._logical_timeout if self._serialized else super().gettimeout()

    # -- serialised I/O -----------------------------------------------------------------------
    def _deadline(self) -> float | None:
        timeout = self._logical_timeout
        return None if timeout is None else time.monotonic() + timeout

    def _wait(self, events: int, deadline: float | None) -> None:
        """Wait (lock released) until the socket is ready for ``events`` or the deadline."""
        fd = self.fileno()
        if fd < 0:
            raise OSError(errno.EBADF, "TLS connection closed")
        wait = POLL_CAP_S
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError("timed out")
        poller = select.poll()
        poller.register(fd, events)
        poller.poll(wait * 1000.0)

    def _call(self, op: Any, *args: Any) -> Any:
        """Run one OpenSSL read/write under the connection's lock, waiting (unlocked) and
        retrying while OpenSSL wants the socket readable or writable."""
        deadline = self._deadline()
        while True:
            with self._io_lock:
                if self._sslobj is None:
                    raise OSError(errno.EBADF, "TLS connection closed")
                try:
                    return op(*args)
                except ssl.SSLWantReadError:
                    events = select.POLLIN
                except ssl.SSLWantWriteError:
                    events = select.POLLOUT
            self._wait(events, deadline)

    def read(self, len: int = 1024, buffer: Any = None) -> Any:  # noqa: A002 (ssl's names)
        if not self._serialized:
            return super().read(len, buffer)
        return self._call(super().read, len, buffer)

    def write(self, data: Any) -> int:
        if not self._serialized:
            return super().write(data)
        with self._write_lock:  # a pending SSL_write is retried by the thread that began it
            result: int = self._call(super().write, data)
        return result

    def send(self, data: Any, flags: int = 0) -> int:
        if not self._serialized:
            return super().send(data, flags)
        if flags != 0:
            raise ValueError(f"non-zero flags not allowed in calls to send() on {type(self)}")
        return self.write(data)

    def sendall(self, data: Any, flags: int = 0) -> None:
        if not self._serialized:
            super().sendall(data, flags)
            return
        with self._write_lock:  # one writer's frames are never interleaved with another's
            super().sendall(data, flags)

    def pending(self) -> int:
        if not self._serialized:
            return super().pending()
        with self._io_lock:
            return super().pending()

    def shutdown(self, how: int) -> None:
        """Shut the TCP connection down; a serialised socket keeps its TLS state, so a
        thread still reading or writing sees EOF or an error, never plaintext."""
        if not self._serialized:
            super().shutdown(how)
            return
        socket.socket.shutdown(self, how)

    def _real_close(self) -> None:
        # ssl.SSLSocket's own close hook (the one socket.close calls once no makefile()
        # holds it); overriding it is the only way to serialise the SSL object's release
        if not self._serialized:
            super()._real_close()  # type: ignore[misc]
            return
        with self._io_lock:  # never free the SSL object under another thread's call
            super()._real_close()  # type: ignore[misc]


class DataPlaneTls:
    """Wraps a worker's data sockets in mutual TLS."""

    def __init__(self, tls_dir: str | os.PathLike[str]) -> None:
        self.server_ctx = server_context(tls_dir, "worker")
        self.client_ctx = client_context(tls_dir, "worker")
        for ctx in (self.server_ctx, self.client_ctx):
            ctx.sslsocket_class = SerializedSSLSocket
            ctx.options |= ssl.OP_NO_RENEGOTIATION  # no handshake inside a data stream

    def wrap_accepted(self, sock: socket.socket, ticket: Ticket | None = None
                      ) -> SerializedSSLSocket:
        """TLS server side of an accepted connection (ssl.SSLError on a bad peer). The
        ticket's deadline covers the TLS handshake too."""
        tls = self.server_ctx.wrap_socket(sock, server_side=True,
                                          do_handshake_on_connect=False)
        assert isinstance(tls, SerializedSSLSocket)
        if ticket is not None:
            ticket.sock = tls
        try:
            tls.do_handshake()
        except BaseException:
            tls.close()  # the peer sees the close at once (the raw socket is detached)
            raise
        tls.serialize()
        return tls

    def wrap_connected(self, sock: socket.socket) -> SerializedSSLSocket:
        """TLS client side of a connection we made; checks the peer is a topology worker."""
        tls = self.client_ctx.wrap_socket(sock, server_hostname=ROLE_WORKER)
        assert isinstance(tls, SerializedSSLSocket)
        tls.serialize()
        return tls


def send_buffers(sock: socket.socket, buffers: list[bytes]) -> None:
    """Write buffers over a TLS socket (``sendmsg`` is not available on SSLSocket)."""
    sock.sendall(b"".join(buffers))
