"""The data plane's wire format: frame header, frame types, encode/decode, socket I/O helpers.

Every frame is a 12-byte header followed by ``length`` payload bytes::

    struct.Struct("!2sBBII")
    +-------+---------+------+------------+--------+------------------+
    | magic | version | type | generation | length | payload ...      |
    | b"JS" |  2 (u8) |  u8  |   uint32   | uint32 | ``length`` bytes |
    +-------+---------+------+------------+--------+------------------+

Frame types:

* ``CHALLENGE`` (1), ``RESPONSE`` (2), ``ACCEPT`` (3): the handshake
  (:mod:`jstormpy.runtime.handshake`).
* ``DATA`` (4) client -> server, payload ``SEQ`` + ``(dst_task, item)`` encoded by
  :mod:`jstormpy.runtime.codec` (a tag byte, then :mod:`marshal` for plain scalar batches
  or :mod:`pickle` protocol 5). ``SEQ = struct.Struct("!QQ")`` is ``(incarnation, seq)``:
  a random id of the sending channel (one per outbound connection object, kept across
  reconnects) and a per-channel, per-generation sequence number starting at 1.
* ``CLOSE`` (5) either way, payload a UTF-8 reason; the sender closes the connection after it.
* ``ACK`` (6) server -> client, payload ``SEQ``: every DATA or CREDIT frame of that
  channel up to ``seq`` has been delivered (cumulative). The sender keeps unacknowledged
  frames and retransmits them after a reconnect; the receiver drops duplicates and reports
  gaps.
* ``CREDIT`` (7) client -> server, payload ``SEQ`` + ``CREDIT_GRANT`` ``(src_task,
  dst_task, total)``: the receiver of channel ``src_task -> dst_task`` has returned
  ``total`` credits of it in this generation (:mod:`jstormpy.runtime.credits`). Sequenced
  and acknowledged like DATA, on the same channel, so a grant never overtakes the data
  before it. Version 2 of the protocol added it (version 1 sent grants as DATA frames to
  the fake task id -1); both ends of a topology always run the same build.

The frame types are :class:`FrameType`; the in-band kinds of the items a DATA frame
carries (data batch, barrier, watermark, end of stream) are a different enum,
:class:`jstormpy.runtime.routing.MessageKind`.

The header is validated (magic, version, known type, ``length <= max_frame_bytes``, type
allowed in the connection's state) *before* any payload byte is read, so a hostile or
broken peer can never make us allocate more than ``max_frame_bytes``.
"""

from __future__ import annotations

import socket
import struct
from enum import IntEnum
from typing import Any

from jstormpy.api.errors import FrameError

HEADER = struct.Struct("!2sBBII")
"""Frame header: magic, version, type, generation, payload length."""
MAGIC = b"JS"
VERSION = 2
"""Protocol version: 2 added the CREDIT frame type."""


class FrameType(IntEnum):
    """The ``type`` byte of a frame header."""

    CHALLENGE = 1
    RESPONSE = 2
    ACCEPT = 3
    DATA = 4
    CLOSE = 5
    ACK = 6
    CREDIT = 7


SEQ = struct.Struct("!QQ")
"""Prefix of every DATA and CREDIT payload and the whole ACK payload: channel incarnation,
sequence."""
CREDIT_GRANT = struct.Struct("!iiQ")
"""A CREDIT payload after its SEQ prefix: source task, destination task, total returned."""

MAX_CLOSE_REASON = 4096
MAX_BATCH_FRAMES = 500  # frames per sendmsg (2 iovecs each; IOV_MAX is 1024 on Linux)
MAX_BATCH_BYTES = 4 << 20
IOV_MAX = 1024
READ_BUFFER = 256 << 10


class PeerClosedError(Exception):
    """The peer sent CLOSE (message = its reason) or closed the connection."""


def encode_frame(ftype: FrameType, generation: int, payload: bytes = b"") -> bytes:
    """One complete frame (header + payload) as bytes."""
    return HEADER.pack(MAGIC, VERSION, ftype, generation & 0xFFFFFFFF, len(payload)) + payload


def decode_header(header: bytes, max_frame_bytes: int) -> tuple[FrameType, int, int]:
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
    try:
        kind = FrameType(ftype)
    except ValueError:
        raise FrameError(f"unknown frame type {ftype}") from None
    if length > max_frame_bytes:
        raise FrameError(f"{kind.name} frame of {length} bytes exceeds "
                         f"max_frame_bytes={max_frame_bytes}")
    return kind, generation, length


def read_exact(reader: Any, n: int) -> bytes:
    """Read exactly ``n`` bytes from a buffered socket file or raise PeerClosedError."""
    data = reader.read(n) if n else b""
    if len(data) != n:
        raise PeerClosedError(f"connection closed by peer after {len(data)} of {n} bytes")
    return data


def read_frame(reader: Any, max_frame_bytes: int,
               allowed: tuple[FrameType, ...]) -> tuple[FrameType, int, bytes | None, int]:
    """Read one frame whose type must be in ``allowed`` (CLOSE is always allowed).

    Returns ``(type, generation, payload, length)``. CLOSE raises PeerClosedError.
    """
    ftype, generation, length = decode_header(read_exact(reader, HEADER.size), max_frame_bytes)
    if ftype == FrameType.CLOSE:
        reason = read_exact(reader, min(length, MAX_CLOSE_REASON))
        raise PeerClosedError(f"peer sent CLOSE: {reason.decode('utf-8', 'replace')}")
    if ftype not in allowed:
        names = "/".join(t.name for t in allowed)
        raise FrameError(f"unexpected {ftype.name} frame (expected {names})")
    return ftype, generation, read_exact(reader, length), length


def sendmsg_all(sock: socket.socket, buffers: list[bytes]) -> None:
    """Write every buffer, in order, with as few ``sendmsg`` calls as possible."""
    views = [memoryview(b) for b in buffers if b]
    i = 0
    while i < len(views):
        sent = sock.sendmsg(views[i:i + IOV_MAX])
        while sent > 0:
            size = len(views[i])
            if sent >= size:
                sent -= size
                i += 1
            else:
                views[i] = views[i][sent:]
                sent = 0


def close_quietly(*closables: Any) -> None:
    """Close each of ``closables`` (None skipped), ignoring OSError."""
    for c in closables:
        if c is None:
            continue
        try:
            c.close()
        except OSError:
            pass


def shutdown_quietly(sock: socket.socket | None) -> None:
    """``shutdown(SHUT_RDWR)`` ignoring OSError: unblocks any thread reading or writing."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
