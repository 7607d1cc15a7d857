"""TLS for the worker-to-worker data plane (docs/security.md).

With ``Config.tls`` on, every data connection is wrapped in mutual TLS with the
topology's certificates (``jstormpy.tls``): the server requires a client certificate
signed by the topology CA, the client checks the server presents ``jstorm-worker`` from
the same CA. After the TLS handshake the HMAC handshake of ``transport.py`` runs inside
it, and every DATA frame is then integrity-protected and encrypted by TLS (a frame
cannot be injected into an authenticated connection).

The TLS handshake runs under the socket's timeout and so inside the transport's
handshake deadline (``handshake_guard.py``).
"""

from __future__ import annotations

import os
import socket
import ssl

from jstormpy.runtime.handshake_guard import Ticket
from jstormpy.tls import ROLE_WORKER, client_context, server_context


class DataPlaneTls:
    """Wraps a worker's data sockets in mutual TLS."""

    def __init__(self, tls_dir: str | os.PathLike[str]) -> None:
        self.server_ctx = server_context(tls_dir, "worker")
        self.client_ctx = client_context(tls_dir, "worker")

    def wrap_accepted(self, sock: socket.socket, ticket: Ticket | None = None
                      ) -> ssl.SSLSocket:
        """TLS server side of an accepted connection (ssl.SSLError on a bad peer). The
        ticket's deadline covers the TLS handshake too."""
        tls = self.server_ctx.wrap_socket(sock, server_side=True,
                                          do_handshake_on_connect=False)
        if ticket is not None:
            ticket.sock = tls
        try:
            tls.do_handshake()
        except BaseException:
            tls.close()  # the peer sees the close at once (the raw socket is detached)
            raise
        return tls

    def wrap_connected(self, sock: socket.socket) -> ssl.SSLSocket:
        """TLS client side of a connection we made; checks the peer is a topology worker."""
        return self.client_ctx.wrap_socket(sock, server_hostname=ROLE_WORKER)


def send_buffers(sock: socket.socket, buffers: list[bytes]) -> None:
    """Write buffers over a TLS socket (``sendmsg`` is not available on SSLSocket)."""
    sock.sendall(b"".join(buffers))
