"""The receiving half of the data plane: ordered, de-duplicated delivery and batched ACKs.

A :class:`~jstormpy.runtime.transport.Transport` holds one :class:`InboundChannels`. After
an inbound connection authenticated, the transport hands its reader to
:meth:`InboundChannels.read`, which reads its DATA and CREDIT frames, drops frames of
other generations, checks each channel's sequence numbers (duplicates of retransmitted
frames are dropped and acknowledged again, gaps reported through ``on_gap``), decodes a
DATA payload (:mod:`jstormpy.runtime.codec`) and calls ``deliver``, or a CREDIT payload and
calls ``on_credit``. Cumulative ACKs are owed per connection and sent by one thread
(:meth:`InboundChannels.ack_loop`) every few milliseconds.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from jstormpy.api.errors import FrameError
from jstormpy.runtime.codec import decode_item
from jstormpy.runtime.dataplane_counters import DataPlaneCounters
from jstormpy.runtime.frames import (
    CREDIT_GRANT,
    HEADER,
    MAGIC,
    MAX_CLOSE_REASON,
    SEQ,
    VERSION,
    FrameType,
    PeerClosedError,
    decode_header,
    encode_frame,
    read_exact,
)


class InboundChannels:
    """Receive-side state of one worker's transport: per channel the last delivered
    sequence number, per connection the ACK owed, and the generation frames must carry.

    Args:
        worker_id: This worker's id (for log lines).
        deliver: ``deliver(dst_task, item)`` (or ``deliver(dst_task, item, generation)``
            with ``deliver_generation=True``), called in the reader's thread once per DATA
            frame of the current generation, in order.
        on_credit: ``on_credit(src_task, dst_task, total, generation)`` per CREDIT frame.
        on_gap: ``on_gap(peer_worker, why)`` when a channel's sequence numbers skip.
        max_frame_bytes: Largest payload accepted.
        counters: The transport's data-plane counters.
        log: Logger.
    """

    def __init__(self, worker_id: int, deliver: Callable[..., None], *,
                 deliver_generation: bool,
                 on_credit: Callable[[int, int, int, int], None] | None,
                 on_gap: Callable[[int, str], None], max_frame_bytes: int,
                 counters: DataPlaneCounters, log: logging.Logger) -> None:
        self.worker_id = worker_id
        self._deliver = deliver
        self._deliver_generation = deliver_generation
        self._on_credit = on_credit
        self._on_gap = on_gap
        self._max_frame_bytes = max_frame_bytes
        self.counters = counters
        self._log = log
        self._lock = threading.Lock()
        # (peer worker, incarnation, generation) -> [lock, last delivered seq]
        self._channels: dict[tuple[int, int, int], list[Any]] = {}
        # connections owing an ACK: id(sock) -> (sock, generation, incarnation, seq)
        self._acks_due: dict[int, tuple[socket.socket, int, int, int]] = {}
        self._acks_wake = threading.Event()
        self._generation = 0
        self._closed = False

    def set_generation(self, gen: int) -> None:
        """Accept frames of ``gen`` only; forget the channels of every other generation."""
        with self._lock:
            self._generation = gen
            self._channels = {k: v for k, v in self._channels.items() if k[2] == gen}

    def close(self) -> None:
        """Stop the ACK loop and any reader waiting for a channel's lock."""
        self._closed = True
        self._acks_wake.set()

    def ack_loop(self) -> None:
        """Send the cumulative ACKs owed on inbound connections, batched every few ms."""
        while not self._closed:
            self._acks_wake.wait(0.5)
            if self._closed:
                return
            self._acks_wake.clear()
            threading.Event().wait(0.002)  # let a burst of frames share one ACK
            with self._lock:
                due, self._acks_due = self._acks_due, {}
            for sock, gen, incarnation, seq in due.values():
                try:
                    sock.sendall(encode_frame(FrameType.ACK, gen, SEQ.pack(incarnation, seq)))
                except OSError:
                    pass  # the reader of that connection sees the failure

    def _accept_frame(self, peer_worker: int, peer: str, gen: int, incarnation: int,
                      seq: int) -> list[Any] | None:
        """Lock the channel and check ``seq``; None (and unlocked) for a duplicate."""
        key = (peer_worker, incarnation, gen)
        with self._lock:
            chan = self._channels.get(key)
            if chan is None:
                chan = self._channels[key] = [threading.Lock(), 0]
        while not chan[0].acquire(timeout=0.5):  # another connection of the channel delivers
            if self._closed:
                raise PeerClosedError("transport closed")
        last = chan[1]
        if seq <= last:
            chan[0].release()
            self.counters.count("duplicate_frames_dropped")
            return None
        if seq != last + 1:
            self.counters.count("sequence_gaps")
            self._on_gap(peer_worker, f"sequence gap on the channel from {peer}: "
                               f"frame {seq} after {last} ({seq - last - 1} frame(s) missing)")
        return chan

    def read(self, reader: Any, peer: str, sock: socket.socket | None = None,
             peer_worker: int = -1) -> None:
        """Read, check and deliver the frames of one authenticated connection until it
        closes (returns) or breaks (raises :class:`FrameError` or
        :class:`PeerClosedError`)."""
        max_frame = self._max_frame_bytes
        hsize = HEADER.size
        unpack = HEADER.unpack
        deliver = self._deliver
        data_type = int(FrameType.DATA)  # the per-frame test compares plain ints
        while True:
            header = reader.read(hsize)
            if len(header) != hsize:
                if header:
                    raise FrameError(f"truncated header ({len(header)} of {hsize} bytes)")
                self._log.debug("worker %d: %s closed the connection", self.worker_id, peer)
                return
            magic, version, ftype, generation, length = unpack(header)
            if magic != MAGIC or version != VERSION or ftype != data_type or length > max_frame:
                ftype, generation, length = decode_header(header, max_frame)
                if ftype == FrameType.CLOSE:
                    reason = read_exact(reader, min(length, MAX_CLOSE_REASON))
                    raise PeerClosedError(reason.decode("utf-8", "replace"))
                if ftype != FrameType.CREDIT:
                    raise FrameError(f"unexpected {ftype.name} frame after authentication")
            payload = reader.read(length)
            if len(payload) != length:
                raise FrameError(f"truncated {FrameType(ftype).name} frame "
                                 f"({len(payload)} of {length} bytes)")
            if length < SEQ.size:
                raise FrameError(f"{FrameType(ftype).name} frame of {length} bytes has no "
                                 f"sequence prefix")
            incarnation, seq = SEQ.unpack_from(payload)
            if generation != self._generation:
                self.counters.count("stale_frames_dropped")
                self._owe_ack(sock, generation, incarnation, seq)
                continue
            if ftype == data_type:
                try:
                    dst_task, item = decode_item(memoryview(payload)[SEQ.size:])
                except Exception as exc:
                    raise FrameError(f"undecodable DATA payload of {length} bytes: "
                                     f"{type(exc).__name__}: {exc}") from exc
            else:
                if length != SEQ.size + CREDIT_GRANT.size:
                    raise FrameError(f"CREDIT frame of {length} bytes (expected "
                                     f"{SEQ.size + CREDIT_GRANT.size})")
                src, dst, total = CREDIT_GRANT.unpack_from(payload, SEQ.size)
            chan = self._accept_frame(peer_worker, peer, generation, incarnation, seq)
            if chan is None:  # a retransmitted frame delivered before: acknowledge again
                self._owe_ack(sock, generation, incarnation, seq)
                continue
            try:
                self.counters.count2("frames_received", 1, "bytes_received", hsize + length)
                if ftype == data_type:  # inline: once per DATA frame
                    try:
                        if self._deliver_generation:
                            deliver(dst_task, item, generation)
                        else:
                            deliver(dst_task, item)
                    except Exception:
                        self.counters.count("deliver_errors")
                        self._log.exception("worker %d: deliver() raised for a frame from %s "
                                            "to task %r", self.worker_id, peer, dst_task)
                else:
                    self._deliver_credit(peer, generation, src, dst, total)
                chan[1] = seq
            finally:
                chan[0].release()
            self._owe_ack(sock, generation, incarnation, seq)

    def _deliver_credit(self, peer: str, generation: int, src: int, dst: int,
                        total: int) -> None:
        if self._on_credit is None:
            self._log.debug("worker %d: CREDIT frame from %s ignored (no on_credit)",
                            self.worker_id, peer)
            return
        try:
            self._on_credit(src, dst, total, generation)
        except Exception:
            self.counters.count("deliver_errors")
            self._log.exception("worker %d: on_credit() raised for channel %d -> %d from %s",
                                self.worker_id, src, dst, peer)

    def _owe_ack(self, sock: socket.socket | None, gen: int, incarnation: int, seq: int) -> None:
        if sock is None:
            return
        with self._lock:
            self._acks_due[id(sock)] = (sock, gen, incarnation, seq)
        # set once per burst: the ACK loop clears it before it takes what is due (after
        # this entry was stored), so a set seen here still covers this ACK
        if not self._acks_wake.is_set():
            self._acks_wake.set()
