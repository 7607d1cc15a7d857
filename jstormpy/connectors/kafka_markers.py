"""Which Kafka records are committed: read the transaction markers with a raw Fetch.

librdkafka's mock cluster (the tests' Kafka, docs/kafka.md) writes the COMMIT/ABORT
control markers of transactions into the partition log, but its Fetch reports no aborted
transactions, so a ``read_committed`` consumer on it also returns aborted and open records.
This module decides the transactional state of every record itself, the way a broker does:
it fetches each partition with a minimal Kafka-protocol Fetch (v4, plaintext, no client
library involved), walks the record-batch headers, and resolves each transactional data
batch by the next control marker of the same producer id in that partition. On a real
cluster it gives the same answer as ``read_committed`` (the tests check that too).

Used by the tests (what a fresh ``read_committed`` reader of a real cluster would see) and
by ``KafkaSink(commit_log_read="markers")`` (its commit log read the same way).

Rules (Kafka's, KIP-98):

* a non-transactional batch is visible (``"plain"``);
* a transactional batch is ``"committed"`` / ``"aborted"`` by the first later control
  marker of its producer id in the partition (marker key type 1 / 0);
* a transactional batch of an older producer epoch that no marker resolved before a batch
  or marker of a newer epoch of the same producer id is ``"aborted"``: a real coordinator
  aborts it when the newer epoch is initialised (the fencing);
* no marker at all: ``"open"`` (a real cluster's ``read_committed`` does not return it;
  the mock gives a restarted ``transactional.id`` a new producer id and never aborts the
  old one's open transaction, so a crashed producer's last transaction stays ``"open"``).

Only batch headers are parsed here (compressed batches are fine); record payloads are
decoded by a normal consumer in :func:`committed_records`. SASL/TLS listeners are not
supported: this is for plaintext test clusters.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["BatchState", "committed_records", "partition_batches", "records_with_states",
           "transaction_states"]

_FETCH = 1
_FETCH_VERSION = 4
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # baseOffset .. recordCount (61 bytes)


@dataclass(frozen=True)
class BatchState:
    """One record batch of a partition log and its transactional state."""

    partition: int
    first_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    state: str
    """``"plain"``, ``"committed"``, ``"aborted"``, ``"open"`` or ``"marker"`` (a control
    batch: ``marker`` then holds ``"COMMIT"`` or ``"ABORT"``)."""
    marker: str | None = None


@dataclass
class _Batch:
    base: int
    last: int
    pid: int
    epoch: int
    transactional: bool
    control: str | None  # "COMMIT" / "ABORT" for control batches


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("Kafka broker closed the connection mid-response")
        buf += chunk
    return bytes(buf)


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _fetch_request(correlation: int, topic: str, partition: int, offset: int,
                   max_bytes: int) -> bytes:
    body = struct.pack(">hhi", _FETCH, _FETCH_VERSION, correlation) + _string("jstorm-txn")
    body += struct.pack(">iiiib", -1, 0, 0, max_bytes, 0)  # replica, wait, min, max, iso
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">iiqi", 1, partition, offset, max_bytes)
    return struct.pack(">i", len(body)) + body


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        st = struct.Struct(fmt)
        vals = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return vals if len(vals) > 1 else vals[0]

    def skip_string(self) -> None:
        n = self.take(">h")
        self.pos += max(n, 0)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zig-zag
        shift += 7


def _control_type(batch: bytes) -> str:
    """``"COMMIT"``/``"ABORT"`` from the first record's key of a control batch."""
    pos = _BATCH_HEADER.size
    _length, pos = _varint(batch, pos)
    pos += 1  # record attributes
    _ts, pos = _varint(batch, pos)
    _off, pos = _varint(batch, pos)
    key_len, pos = _varint(batch, pos)
    if key_len < 4:
        raise ValueError("control record without a key")
    _version, ctype = struct.unpack_from(">hh", batch, pos)
    return "COMMIT" if ctype == 1 else "ABORT"


def _parse_record_set(data: bytes) -> list[_Batch]:
    """Whole record batches (magic 2) in a Fetch record set; a truncated tail is dropped."""
    out: list[_Batch] = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            break  # partial batch at the end of the response
        raw = data[pos:end]
        (_b, _l, _ple, magic, _crc, attrs, last_delta, _t0, _t1, pid, epoch, _seq,
         _count) = _BATCH_HEADER.unpack_from(raw, 0)
        if magic != 2:
            raise ValueError(f"record batch magic {magic} at offset {base}: only v2 is read")
        control = _control_type(raw) if attrs & _ATTR_CONTROL else None
        out.append(_Batch(base, base + last_delta, pid, epoch,
                          bool(attrs & _ATTR_TRANSACTIONAL), control))
        pos = end
    return out


def _fetch_batches(host: str, port: int, topic: str, partition: int,
                   timeout: float = 10.0) -> Iterator[_Batch]:
    """Every batch of ``topic``/``partition`` from offset 0 up to the high watermark."""
    max_bytes = 8 * 1024 * 1024
    with socket.create_connection((host, port), timeout=timeout) as sock:
        offset, correlation = 0, 0
        while True:
            correlation += 1
            sock.sendall(_fetch_request(correlation, topic, partition, offset, max_bytes))
            size = struct.unpack(">i", _recv_exact(sock, 4))[0]
            r = _Reader(_recv_exact(sock, size))
            if r.take(">i") != correlation:
                raise ConnectionError("Kafka Fetch: response out of order")
            r.take(">i")  # throttle
            if r.take(">i") != 1:
                raise ValueError("Kafka Fetch: expected one topic in the response")
            r.skip_string()
            if r.take(">i") != 1:
                raise ValueError("Kafka Fetch: expected one partition in the response")
            _p, err, high, _lso = r.take(">ihqq")
            if err:
                raise ConnectionError(f"Kafka Fetch {topic}/{partition} at {offset}: "
                                      f"error code {err}")
            n_aborted = r.take(">i")
            r.pos += max(n_aborted, 0) * 16
            size = r.take(">i")
            batches = _parse_record_set(r.data[r.pos:r.pos + max(size, 0)])
            for b in batches:
                if b.last >= offset:
                    yield b
            if batches:
                offset = batches[-1].last + 1
            if offset >= high or not batches:
                if offset < high:
                    raise ValueError(f"Kafka Fetch {topic}/{partition}: no whole batch at "
                                     f"offset {offset} within {max_bytes} bytes")
                return


def _leaders(bootstrap: str, topic: str) -> dict[int, tuple[str, int]]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    md = admin.list_topics(topic, timeout=10)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        raise ValueError(f"topic {topic!r} not found at {bootstrap}")
    out = {}
    for p, pm in meta.partitions.items():
        b = md.brokers[pm.leader]
        out[p] = (str(b.host), int(b.port))
    return out


def partition_batches(bootstrap: str, topic: str) -> list[BatchState]:
    """Every batch of every partition of ``topic`` with its transactional state."""
    out: list[BatchState] = []
    for p, (host, port) in sorted(_leaders(bootstrap, topic).items()):
        pending: dict[int, list[_Batch]] = {}
        state: dict[int, str] = {}
        order: list[_Batch] = []
        for b in _fetch_batches(host, port, topic, p):
            order.append(b)
            if b.control is not None:
                for d in pending.pop(b.pid, []):
                    if d.epoch < b.epoch and b.control == "COMMIT":
                        state[d.base] = "aborted"  # fenced: an older epoch's leftover
                    else:
                        state[d.base] = "committed" if b.control == "COMMIT" else "aborted"
            elif b.transactional:
                older = [d for d in pending.get(b.pid, []) if d.epoch < b.epoch]
                for d in older:  # a newer epoch began: the coordinator aborted these
                    state[d.base] = "aborted"
                pending[b.pid] = [d for d in pending.get(b.pid, []) if d.epoch >= b.epoch]
                pending[b.pid].append(b)
        for b in order:
            if b.control is not None:
                s, marker = "marker", b.control
            else:
                s = state.get(b.base, "open") if b.transactional else "plain"
                marker = None
            out.append(BatchState(p, b.base, b.last, b.pid, b.epoch, s, marker))
    return out


def transaction_states(bootstrap: str, topic: str) -> dict[tuple[int, int], str]:
    """``{(partition, offset): state}`` for every data record offset of ``topic``."""
    out: dict[tuple[int, int], str] = {}
    for b in partition_batches(bootstrap, topic):
        if b.state != "marker":
            for off in range(b.first_offset, b.last_offset + 1):
                out[(b.partition, off)] = b.state
    return out


def records_with_states(bootstrap: str, topic: str,
                        timeout: float = 30.0) -> list[tuple[Any, str]]:
    """Every data record of ``topic`` with its transactional state, read with a fresh
    ``read_uncommitted`` consumer, in partition and offset order: ``(Message, state)``."""
    import confluent_kafka as ck

    states = transaction_states(bootstrap, topic)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"jstorm-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                     "log_level": 3})
    out: list[tuple[Any, str]] = []
    try:
        wanted: dict[int, int] = {}
        for (p, off) in states:
            wanted[p] = max(wanted.get(p, -1), off)
        for p in sorted(wanted):
            c.assign([ck.TopicPartition(topic, p, 0)])
            last = -1
            deadline = time.monotonic() + timeout
            while last < wanted[p]:
                # consume() returns when it has the batch *or* at the timeout: keep it short
                msgs = c.consume(500, timeout=0.05)
                if not msgs and time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}/{p}: stopped at offset {last} before "
                                       f"{wanted[p]}")
                for m in msgs:
                    if m.error() is not None or m.partition() != p:
                        continue
                    last = int(m.offset() or 0)
                    out.append((m, states.get((p, last), "open")))
    finally:
        c.close()
    return out


def committed_records(bootstrap: str, topic: str) -> list[Any]:
    """The records a ``read_committed`` reader of a real cluster sees, read with a fresh
    consumer: every record whose batch is ``"plain"`` or ``"committed"``, in partition
    and offset order (confluent-kafka ``Message`` objects)."""
    return [m for m, state in records_with_states(bootstrap, topic)
            if state in ("plain", "committed")]
