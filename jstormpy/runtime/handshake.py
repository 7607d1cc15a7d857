"""The mutual HMAC-SHA256 handshake that authenticates every data-plane connection.

Mutual, per-topology secret; no payload is decoded before it succeeds::

    server                                   client
      | -- CHALLENGE(n_s) ------------------>  |
      | <-- RESPONSE(wid, n_c, mac_c) -------  |   mac_c = HMAC(secret, "jstorm-client"+n_s+wid)
      | -- ACCEPT(mac_s) ------------------->  |   mac_s = HMAC(secret, "jstorm-server"+n_c)
      | <-- DATA ... DATA -------------------  |

* ``CHALLENGE`` (1) payload ``n_s``: 32 random bytes.
* ``RESPONSE`` (2) payload ``worker_id`` (uint32, network order) + ``n_c`` (32 random
  bytes) + ``mac_c``.
* ``ACCEPT`` (3) payload ``mac_s``.

The exchange must finish within ``handshake_timeout_s`` (set by the caller as the socket
timeout) so a silent peer cannot hold a thread. Both MACs are compared with
:func:`hmac.compare_digest`. The two functions below are self-contained (socket in,
peer identity out) so that a transport security layer can wrap the socket around them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
from typing import Any

from jstormpy.api.errors import AuthenticationError, FrameError
from jstormpy.runtime.frames import (
    MAX_CLOSE_REASON,
    FrameType,
    PeerClosedError,
    encode_frame,
    read_frame,
)

NONCE_BYTES = 32
MAC_BYTES = hashlib.sha256().digest_size
WID = struct.Struct("!I")
RESPONSE_BYTES = WID.size + NONCE_BYTES + MAC_BYTES

HANDSHAKE_TIMEOUT_S = 5.0
"""Default bound on the whole authentication exchange, on both sides."""


def mac_client(secret: bytes, n_s: bytes, worker_id: int) -> bytes:
    """The client's proof: ``HMAC-SHA256(secret, b"jstorm-client" + n_s + worker_id)``."""
    return hmac.new(secret, b"jstorm-client" + n_s + WID.pack(worker_id), hashlib.sha256).digest()


def mac_server(secret: bytes, n_c: bytes) -> bytes:
    """The server's proof: ``HMAC-SHA256(secret, b"jstorm-server" + n_c)``."""
    return hmac.new(secret, b"jstorm-server" + n_c, hashlib.sha256).digest()


def client_handshake(sock: socket.socket, secret: bytes, worker_id: int, generation: int,
                     max_frame_bytes: int) -> None:
    """Authenticate an outbound connection as ``worker_id`` and check the server's proof.

    Raises:
        AuthenticationError: the server refused us or its proof does not match ``secret``.
        FrameError: the server spoke something else than the handshake.
        PeerClosedError: the connection closed mid-handshake.
    """
    reader = sock.makefile("rb")
    try:
        # lengths bounded before reading: a CHALLENGE (or a CLOSE reason) is short
        _, _, n_s, _ = read_frame(reader, min(max_frame_bytes, MAX_CLOSE_REASON),
                                  (FrameType.CHALLENGE,))
        assert n_s is not None
        if len(n_s) != NONCE_BYTES:
            raise FrameError(f"CHALLENGE nonce of {len(n_s)} bytes (expected {NONCE_BYTES})")
        n_c = os.urandom(NONCE_BYTES)
        payload = WID.pack(worker_id) + n_c + mac_client(secret, n_s, worker_id)
        sock.sendall(encode_frame(FrameType.RESPONSE, generation, payload))
        try:
            _, _, proof, _ = read_frame(reader, min(max_frame_bytes, MAX_CLOSE_REASON),
                                        (FrameType.ACCEPT,))
        except PeerClosedError as exc:
            raise AuthenticationError(f"server refused us: {exc}") from exc
        if not hmac.compare_digest(proof or b"", mac_server(secret, n_c)):
            raise AuthenticationError("server's ACCEPT proof does not match our secret "
                                      "(peer belongs to another topology?)")
    finally:
        reader.close()


def server_handshake(sock: socket.socket, reader: Any, secret: bytes, generation: int,
                     max_frame_bytes: int) -> int:
    """Challenge an inbound connection; return the peer's authenticated worker id.

    Raises:
        AuthenticationError: the client's proof does not match ``secret``.
        FrameError: malformed RESPONSE.
        PeerClosedError: the connection closed mid-handshake.
    """
    n_s = os.urandom(NONCE_BYTES)
    sock.sendall(encode_frame(FrameType.CHALLENGE, generation, n_s))
    _, _, payload, _ = read_frame(reader, min(max_frame_bytes, RESPONSE_BYTES),
                                  (FrameType.RESPONSE,))
    assert payload is not None
    if len(payload) != RESPONSE_BYTES:
        raise FrameError(f"RESPONSE payload of {len(payload)} bytes "
                         f"(expected {RESPONSE_BYTES})")
    (peer_worker,) = WID.unpack_from(payload)
    n_c = payload[WID.size:WID.size + NONCE_BYTES]
    proof = payload[WID.size + NONCE_BYTES:]
    if not hmac.compare_digest(proof, mac_client(secret, n_s, peer_worker)):
        raise AuthenticationError(f"client claiming worker {peer_worker} sent a wrong "
                                  "HMAC proof (wrong topology secret?)")
    sock.sendall(encode_frame(FrameType.ACCEPT, generation, mac_server(secret, n_c)))
    return int(peer_worker)
