"""``hbase://host:port/table`` — snapshots in an HBase table, via the Thrift (v1) gateway.

``host:port`` is an HBase Thrift server (``hbase thrift start``, default port 9090);
the backend talks to it with happybase.

Row layout (column family ``s`` by default)
-------------------------------------------
* Manifest row, row key = the object key (UTF-8): ``s:m`` = JSON manifest
  ``{"v": 1, "version": <hex>, "chunks": n, "size": bytes, "crc32": crc}``, and ``s:d`` =
  the value itself when it fits in one cell (``chunks == 0``), else empty.
* Chunk rows of a large value, row key = ``<key>\\x00<version>\\x00<index:08d>``:
  ``s:c`` = up to ``chunk_bytes`` of data and ``s:k`` = empty marker (so scans can find
  chunk rows without transferring their data).

* Increments (``inc/...delta`` segments of incremental checkpoints,
  state_backends/changelog.py) get **a row per key group**: row key =
  ``<key>\x00<version>\x00g<group:05d>``, ``s:c`` = that key group's entries (its section
  of the segment, with its checksum kept in the segment's index) and ``s:k`` = marker. The
  manifest row holds the segment's head (header and index) in ``s:d`` and lists the
  groups (``"groups": [...]``). A restore of some key groups (a rescaled task) reads only
  their rows (:meth:`HBaseBackend.get_segment`); reading the whole object reassembles the
  original bytes, checked against the manifest's size and crc32.

Atomicity: a put first writes all chunk rows of a fresh ``version`` (invisible: nothing
points at them), then makes the object visible with ONE single-row put of the manifest
row — HBase applies a single-row mutation atomically, so readers see the old or the new
manifest, never a mix. Chunks of the replaced version are deleted afterwards; a reader
that loses that race (chunk gone) re-reads the manifest and retries. Keys never contain
``\\x00``, so listing = scan with ``row_prefix`` restricted to column ``s:m``, which
only manifest rows have. Deleting = scan for ``s:m``/``s:k`` (row keys only, no data),
then batched row deletes, manifests first.

Create-only (:meth:`HBaseBackend.create_object`, the Topology Master's ``_metadata``
commit point): the manifest cell is written with the Thrift v1 ``checkAndPut`` (put only
if ``s:m`` does not exist), so of two writers racing on one key exactly one wins and the
other gets :class:`~jstormpy.api.errors.ObjectExistsError`. Such an object's value, when
it fits one cell, is stored in ``s:m`` itself after the manifest JSON and a ``\\x00``
(``checkAndPut`` puts one cell); a bigger one goes to chunk rows first, as above. A Thrift
gateway without ``checkAndPut`` fails the create with a BackendError saying so.

Failures: Thrift transport and socket errors are retried ``retries`` times with
exponential backoff over a fresh connection; then :class:`~jstormpy.api.errors.BackendError`
naming the URI is raised. HBase-side errors (``IOError``, ``IllegalArgument``) are not
retried.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import happybase
from Hbase_thrift import Mutation  # the IDL module happybase loads (happybase/Hbase.thrift)
from thriftpy2.thrift import TApplicationException, TException
from thriftpy2.transport import TTransportException

from jstormpy.api.errors import (
    BackendError,
    CorruptSnapshotError,
    ObjectExistsError,
    SnapshotNotFoundError,
)
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.changelog import SEGMENT_PREFIX, join_delta, split_delta

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_CHUNK_BYTES = 2 << 20
_SEP = b"\x00"
_TRANSIENT = (TTransportException, OSError, EOFError, socket.timeout, ConnectionError)


class HBaseBackend(StateBackend):
    """Checkpoint objects as rows of an HBase table.

    Args:
        uri: ``hbase://thrift_host:thrift_port/table``.
        column_family: Column family holding the backend's columns.
        chunk_bytes: Largest cell written; bigger values are split into chunk rows.
            Keep it within HBase's ``hbase.client.keyvalue.maxsize`` (default 10 MiB) and
            the region server's comfort zone; at most 2 MiB is accepted by default.
        timeout_ms: Socket timeout of the Thrift connection, in milliseconds.
        retries: How often a transiently failing operation is retried.
        transport: ``"buffered"`` or ``"framed"`` — must match the Thrift server.
        protocol: ``"binary"`` or ``"compact"`` — must match the Thrift server.
        create_table: Create the table (one family, 1 version) if it does not exist.
        backoff_s: First retry delay; doubles on each further retry (capped at 5 s).

    Raises:
        BackendError: Bad URI or options.
    """

    def __init__(self, uri: str, *, column_family: str = "s", chunk_bytes: int = 1 << 20,
                 timeout_ms: int = 10000, retries: int = 3, transport: str = "buffered",
                 protocol: str = "binary", create_table: bool = True,
                 backoff_s: float = 0.1) -> None:
        self.uri = uri
        parts = urlsplit(uri)
        table = parts.path.strip("/")
        if parts.scheme != "hbase" or not parts.hostname or not table or "/" in table:
            raise BackendError(f"state backend {uri!r}: expected hbase://host:port/table "
                               "(host:port = an HBase Thrift server, e.g. :9090)")
        if not 0 < chunk_bytes <= MAX_CHUNK_BYTES:
            raise BackendError(f"state backend {uri!r}: chunk_bytes must be in "
                               f"1..{MAX_CHUNK_BYTES}, not {chunk_bytes}")
        if transport not in ("buffered", "framed") or protocol not in ("binary", "compact"):
            raise BackendError(f"state backend {uri!r}: transport must be buffered|framed and "
                               f"protocol binary|compact, not {transport!r}/{protocol!r}")
        self.host = parts.hostname
        self.port = parts.port or 9090
        self.table_name = table
        self.family = column_family.encode()
        self.chunk_bytes = chunk_bytes
        self.timeout_ms = timeout_ms
        self.retries = max(0, int(retries))
        self.transport = transport
        self.protocol = protocol
        self.create_table = create_table
        self.backoff_s = backoff_s
        self._col_manifest = self.family + b":m"
        self._col_data = self.family + b":d"
        self._col_chunk = self.family + b":c"
        self._col_marker = self.family + b":k"
        self._lock = threading.RLock()
        self._conn: happybase.Connection | None = None
        self._table_ready = False

    # -- connection & retries -----------------------------------------------------------
    def _table(self) -> Any:
        if self._conn is None:
            conn = happybase.Connection(self.host, self.port, timeout=self.timeout_ms,
                                        autoconnect=False, transport=self.transport,
                                        protocol=self.protocol)
            conn.open()
            self._conn = conn
        if not self._table_ready:
            name = self.table_name.encode()
            if name not in self._conn.tables():
                if not self.create_table:
                    raise BackendError(f"state backend {self.uri}: table {self.table_name!r}"
                                       " does not exist (and create_table=False)")
                try:
                    self._conn.create_table(self.table_name,
                                            {self.family.decode(): {"max_versions": 1}})
                    log.info("state backend %s: created table %s", self.uri, self.table_name)
                except TException as exc:
                    if type(exc).__name__ != "AlreadyExists":
                        raise
            self._table_ready = True
        return self._conn.table(self.table_name)

    def _reset(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the connection is broken anyway
                pass

    def _retry(self, what: str, fn: Callable[[Any], T]) -> T:
        delay = self.backoff_s
        err: Exception | None = None
        with self._lock:
            for attempt in range(self.retries + 1):
                try:
                    return fn(self._table())
                except (SnapshotNotFoundError, CorruptSnapshotError, BackendError):
                    raise
                except _TRANSIENT as exc:
                    err = exc
                    self._reset()
                except TApplicationException as exc:
                    self._reset()
                    raise BackendError(f"state backend {self.uri}: {what} failed: "
                                       f"Thrift application error {exc}") from exc
                except TException as exc:
                    msg = getattr(exc, "message", exc)
                    if isinstance(msg, bytes):
                        msg = msg.decode(errors="replace")
                    raise BackendError(f"state backend {self.uri}: {what} failed: "
                                       f"{type(exc).__name__}: {msg}") from exc
                if attempt < self.retries:
                    log.warning("state backend %s: %s failed (%s), retry %d/%d in %.2fs",
                                self.uri, what, err, attempt + 1, self.retries, delay)
                    time.sleep(delay)  # backoff between attempts
                    delay = min(delay * 2, 5.0)
        raise BackendError(f"state backend {self.uri} unreachable: {what} failed after "
                           f"{self.retries + 1} attempts: {err}") from err

    # -- helpers ------------------------------------------------------------------------
    def _row_key(self, key: str) -> bytes:
        raw = key.encode()
        if not raw or _SEP in raw:
            raise BackendError(f"state backend {self.uri}: bad object key {key!r}")
        return raw

    @staticmethod
    def _chunk_key(row: bytes, version: str, index: int) -> bytes:
        return row + _SEP + version.encode() + _SEP + b"%08d" % index

    def _manifest(self, key: str, raw: bytes | None) -> dict[str, Any] | None:
        if raw is None:
            return None
        try:
            manifest: dict[str, Any] = json.loads(raw.partition(_SEP)[0])
            int(manifest["chunks"])
            int(manifest["size"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptSnapshotError(f"state backend {self.uri}: manifest of {key!r} is "
                                       f"unreadable: {exc}") from exc
        return manifest

    @staticmethod
    def _group_key(row: bytes, version: str, group: int) -> bytes:
        return row + _SEP + version.encode() + _SEP + b"g%05d" % group

    def _delete_chunks(self, table: Any, row: bytes, manifest: dict[str, Any]) -> None:
        n = int(manifest.get("chunks", 0))
        groups = manifest.get("groups") or []
        if not n and not groups:
            return
        version = str(manifest["version"])
        with table.batch(batch_size=1000) as batch:
            for i in range(n):
                batch.delete(self._chunk_key(row, version, i))
            for g in groups:
                batch.delete(self._group_key(row, version, int(g)))

    def _split(self, key: str, data: bytes) -> tuple[bytes, list[tuple[int, bytes]]] | None:
        """A delta segment as head + a payload per key group, if every part fits a cell."""
        if not key.startswith(SEGMENT_PREFIX) or not key.endswith(".delta"):
            return None
        split = split_delta(data)
        if split is None or len(split[0]) > self.chunk_bytes \
                or any(len(p) > self.chunk_bytes for _g, p in split[1]):
            return None
        return split

    def _group_rows(self, table: Any, key: str, row: bytes, manifest: dict[str, Any],
                    groups: list[int]) -> dict[int, bytes]:
        """The payloads of ``groups`` of a segment stored a row per key group."""
        version = str(manifest["version"])
        keys = [self._group_key(row, version, g) for g in groups]
        by_key = {k: g for k, g in zip(keys, groups, strict=True)}
        out: dict[int, bytes] = {}
        for i in range(0, len(keys), 500):
            for k, cols in table.rows(keys[i:i + 500], columns=[self._col_chunk]):
                out[by_key[k]] = cols.get(self._col_chunk, b"")
        return out

    def _inline(self, cells: dict[bytes, bytes]) -> bytes:
        """The value of a one-cell object: after the manifest's ``\\x00`` if it was created
        (:meth:`create_object`), else the ``s:d`` cell."""
        _head, sep, tail = cells.get(self._col_manifest, b"").partition(_SEP)
        return tail if sep else cells.get(self._col_data, b"")

    # -- primitives ---------------------------------------------------------------------
    def put_object(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``: chunk rows first, then one atomic manifest put."""
        row = self._row_key(key)
        data = bytes(data)
        version = uuid.uuid4().hex[:16]
        split = self._split(key, data)
        chunked = len(data) > self.chunk_bytes and split is None
        nchunks = -(-len(data) // self.chunk_bytes) if chunked else 0
        fields: dict[str, Any] = {"v": 1, "version": version, "chunks": nchunks,
                                  "size": len(data), "crc32": zlib.crc32(data)}
        if split is not None:
            fields["groups"] = [g for g, _p in split[1]]
        manifest = json.dumps(fields).encode()
        per_batch = max(1, (8 << 20) // self.chunk_bytes)

        def run(table: Any) -> None:
            old = self._manifest(key, table.row(row, columns=[self._col_manifest])
                                 .get(self._col_manifest))
            if split is not None:  # a row per key group, then the manifest row (the head)
                with table.batch(batch_size=per_batch) as batch:
                    for group, payload in split[1]:
                        batch.put(self._group_key(row, version, group),
                                  {self._col_chunk: payload, self._col_marker: b""})
                table.put(row, {self._col_manifest: manifest, self._col_data: split[0]})
            else:
                if chunked:
                    self._put_chunks(table, row, version, data, nchunks)
                # the commit point: one single-row (atomic) put of manifest + inline data
                table.put(row, {self._col_manifest: manifest,
                                self._col_data: b"" if chunked else data})
            if old is not None and old.get("version") != version:
                self._delete_chunks(table, row, old)

        self._retry(f"put {key!r}", run)

    def _put_chunks(self, table: Any, row: bytes, version: str, data: bytes,
                    nchunks: int) -> None:
        """Write ``data`` as ``nchunks`` chunk rows of ``version`` (invisible until a
        manifest names that version), in batches of about 8 MB."""
        per_batch = max(1, (8 << 20) // self.chunk_bytes)
        with table.batch(batch_size=per_batch) as batch:
            for i in range(nchunks):
                piece = data[i * self.chunk_bytes:(i + 1) * self.chunk_bytes]
                batch.put(self._chunk_key(row, version, i),
                          {self._col_chunk: piece, self._col_marker: b""})

    def create_object(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` only if the key is absent, atomically: the manifest
        cell is written with HBase's ``checkAndPut`` (put only if ``s:m`` does not exist).

        The manifest cell is the whole commit: a value that fits a cell travels in it,
        after the manifest's JSON and a ``\\x00``; a bigger one is written as chunk rows of
        a fresh version first (invisible until the manifest names them, deleted again if
        this writer loses). A retry after a lost answer finds its own manifest and counts
        as the win.

        Raises:
            ObjectExistsError: ``key`` exists (another writer created it first).
            BackendError: The Thrift gateway has no ``checkAndPut`` (its IDL predates it),
                or the backend is unreachable.
        """
        row = self._row_key(key)
        data = bytes(data)
        version = uuid.uuid4().hex[:16]
        chunked = len(data) > self.chunk_bytes
        nchunks = -(-len(data) // self.chunk_bytes) if chunked else 0
        fields: dict[str, Any] = {"v": 1, "version": version, "chunks": nchunks,
                                  "size": len(data), "crc32": zlib.crc32(data)}
        cell = json.dumps(fields).encode() + (b"" if chunked else _SEP + data)

        def run(table: Any) -> None:
            if chunked:
                self._put_chunks(table, row, version, data, nchunks)
            mput = Mutation(isDelete=False, column=self._col_manifest, value=cell)
            try:
                won = table.connection.client.checkAndPut(table.name, row, self._col_manifest,
                                                          None, mput, {})
            except TApplicationException as exc:
                if exc.type == TApplicationException.UNKNOWN_METHOD:
                    raise BackendError(
                        f"state backend {self.uri}: cannot create {key!r} create-only: the "
                        "HBase Thrift server has no checkAndPut (use a Thrift v1 gateway "
                        f"that has it): {exc}") from exc
                raise
            if won:
                return
            current = table.row(row, columns=[self._col_manifest]).get(self._col_manifest)
            if current == cell:
                return  # our own put: its answer was lost and this is the retry
            if chunked:
                self._delete_chunks(table, row, fields)
            raise ObjectExistsError(f"{key!r} exists in {self.uri} (checkAndPut: another "
                                    "writer created it first; it is not replaced)")

        self._retry(f"create {key!r}", run)

    def get_object(self, key: str) -> bytes:
        """The bytes under ``key``; SnapshotNotFoundError if absent."""
        row = self._row_key(key)

        def run(table: Any) -> bytes:
            for _ in range(10):
                cells = table.row(row, columns=[self._col_manifest, self._col_data])
                manifest = self._manifest(key, cells.get(self._col_manifest))
                if manifest is None:
                    raise SnapshotNotFoundError(f"no object {key!r} in {self.uri}")
                n = int(manifest["chunks"])
                if manifest.get("groups"):  # a delta stored a row per key group
                    groups = [int(g) for g in manifest["groups"]]
                    parts_by_group = self._group_rows(table, key, row, manifest, groups)
                    if len(parts_by_group) < len(groups):
                        again = table.row(row, columns=[self._col_manifest])
                        if again.get(self._col_manifest) != cells.get(self._col_manifest):
                            continue  # replaced while we read: read the new version
                        lost = sorted(set(groups) - set(parts_by_group))
                        raise CorruptSnapshotError(f"state backend {self.uri}: {key!r}: the "
                                                   f"rows of key group(s) {lost} are missing")
                    data: bytes = join_delta(cells.get(self._col_data, b""), parts_by_group)
                elif n == 0:
                    data = self._inline(cells)
                else:
                    keys = [self._chunk_key(row, str(manifest["version"]), i) for i in range(n)]
                    parts: dict[bytes, bytes] = {}
                    step = max(1, (16 << 20) // self.chunk_bytes)
                    for i in range(0, n, step):
                        for k, cols in table.rows(keys[i:i + step], columns=[self._col_chunk]):
                            parts[k] = cols.get(self._col_chunk, b"")
                    if len(parts) < n:
                        again = table.row(row, columns=[self._col_manifest])
                        if again.get(self._col_manifest) != cells.get(self._col_manifest):
                            continue  # replaced while we read: read the new version
                        raise CorruptSnapshotError(
                            f"state backend {self.uri}: {key!r} is missing "
                            f"{n - len(parts)} of {n} chunks")
                    data = b"".join(parts[k] for k in keys)
                if len(data) != int(manifest["size"]) or (
                        "crc32" in manifest and zlib.crc32(data) != int(manifest["crc32"])):
                    raise CorruptSnapshotError(f"state backend {self.uri}: {key!r} does not "
                                               "match its manifest (size/crc32)")
                return data
            raise BackendError(f"state backend {self.uri}: {key!r} kept changing while read")

        return self._retry(f"get {key!r}", run)

    def get_segment(self, key: str, groups: set[int] | None = None) -> bytes:
        """An incremental segment; of a delta stored a row per key group, only the rows of
        ``groups`` are read (the segment returned holds those key groups' sections)."""
        if groups is None:
            return self.get_object(key)
        row = self._row_key(key)

        def run(table: Any) -> bytes | None:
            for _ in range(10):
                cells = table.row(row, columns=[self._col_manifest, self._col_data])
                manifest = self._manifest(key, cells.get(self._col_manifest))
                if manifest is None:
                    raise SnapshotNotFoundError(f"no object {key!r} in {self.uri}")
                if not manifest.get("groups"):
                    return None  # stored whole
                stored = [int(g) for g in manifest["groups"]]
                wanted = [g for g in stored if g in groups]
                payloads = self._group_rows(table, key, row, manifest, wanted)
                if len(payloads) < len(wanted):
                    again = table.row(row, columns=[self._col_manifest])
                    if again.get(self._col_manifest) != cells.get(self._col_manifest):
                        continue
                    lost = sorted(set(wanted) - set(payloads))
                    raise CorruptSnapshotError(f"state backend {self.uri}: {key!r}: the rows "
                                               f"of key group(s) {lost} are missing")
                return join_delta(cells.get(self._col_data, b""), payloads, wanted)
            raise BackendError(f"state backend {self.uri}: {key!r} kept changing while read")

        got = self._retry(f"get {key!r}", run)
        return self.get_object(key) if got is None else got

    def _scan_keys(self, table: Any, prefix: str, columns: list[bytes]) -> list[bytes]:
        kwargs: dict[str, Any] = {"columns": columns, "batch_size": 1000}
        if prefix:
            kwargs["row_prefix"] = prefix.encode()
        return [k for k, _cols in table.scan(**kwargs)]

    def list_objects(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix`` (manifest rows only)."""
        def run(table: Any) -> list[str]:
            keys = self._scan_keys(table, prefix, [self._col_manifest])
            return [k.decode() for k in keys if _SEP not in k]

        return self._retry(f"list {prefix!r}", run)

    def delete_objects(self, prefix: str) -> None:
        """Delete every key starting with ``prefix``, with its chunk rows."""
        def run(table: Any) -> None:
            keys = self._scan_keys(table, prefix, [self._col_manifest, self._col_marker])
            keys.sort(key=lambda k: _SEP in k)  # manifests first: objects vanish at once
            with table.batch(batch_size=1000) as batch:
                for k in keys:
                    batch.delete(k)

        self._retry(f"delete {prefix!r}", run)

    def close(self) -> None:
        """Close the Thrift connection."""
        with self._lock:
            self._reset()
