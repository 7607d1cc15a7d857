"""The state-backend interface: where checkpoint snapshots and metadata live.

A backend implements five object primitives (put/get/list/delete/close) over string
keys. ``put_object`` must be atomic: a reader sees the whole new value or none of it.
``put_object_stream`` (the same, from pieces) joins them by default; a backend that can
write an object piece by piece overrides it, so a task's full dump is never whole in
memory.
Everything checkpoint-specific (layout, checksums, completeness, garbage collection)
is implemented once here, on top of those primitives.

Layout (keys, "/"-separated):

    chk-0000000042/task-00007-g3-a<attempt>.snap
                                         one task's snapshot (checksummed envelope; a
                                         full dump is written as a stream, the checksum
                                         in a trailer: :func:`seal_stream`),
                                         fenced by generation + attempt (the writing
                                         worker process's incarnation)
    chk-0000000042/task-00007-g3-a<attempt>.refs
                                         shared-file keys that snapshot references
                                         (state_backends/shared_files.py)
    chk-0000000042/_metadata             JSON; its presence marks checkpoint 42 complete
    inc/task-00007/seg-0000000042-g3.*   incremental segments (state_backends/changelog.py)
    inc/task-00007/sst-0000000042-g3-*   RocksDB SST files (state_backends/rocksdb_files.py)
    meta/<name>                          small named objects (e.g. the generation counter)
    meta/pins/<checkpoint>-<id>          a pin: retention keeps that checkpoint (savepoints)
"""

from __future__ import annotations

import json
import struct
import zlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from jstormpy.api.errors import (
    BackendError,
    CheckpointError,
    CorruptSnapshotError,
    ObjectExistsError,
    SnapshotNotFoundError,
)
from jstormpy.state_backends.retention import eligible, plan_retention

_MAGIC = b"JSNP"
_HEADER = struct.Struct("!4sBIQ")  # magic, version, crc32, length
_VERSION = 1
_STREAM_VERSION = 2
"""A streamed envelope: the header's crc32 and length are 0, a trailer after the data
carries them (the writer knows them only at the end)."""
_TRAILER_MAGIC = b"JSNE"
_TRAILER = struct.Struct("!4sIQ")  # magic, crc32, length
METADATA_NAME = "_metadata"
PINS_PREFIX = "meta/pins/"
COMPLETED_META = "completed_checkpoint"
"""Meta object (``meta/<name>``): the newest checkpoint id whose ``_metadata`` the run's TM
wrote. A resumed TM never restores below it on the say-so of a listing; whatever replaces
the backend's checkpoints (a fresh run, a savepoint restore) deletes it with them."""
CHECKPOINT_IDS_META = "checkpoint_ids"
"""Meta object: the checkpoint ids the run's TMs handed out (the id floor) and the ones
never to restore from (bad: a ``_metadata`` write that failed or timed out, which a timeout
may still land later). Written at every recovery before any worker is prepared, and after a
failed commit point; a resumed TM starts from it, so it neither reuses an id nor restores a
checkpoint an earlier recovery rolled the sinks back past (issue 23, simulator seed 22619).
Deleted with the checkpoints by a fresh run or a savepoint restore."""


def checkpoint_prefix(checkpoint_id: int) -> str:
    """The key prefix of one checkpoint's objects."""
    return f"chk-{checkpoint_id:010d}/"


def seal_blob(data: bytes) -> bytes:
    """Wrap ``data`` in a checksummed envelope (detects truncation and corruption)."""
    return _HEADER.pack(_MAGIC, _VERSION, zlib.crc32(data), len(data)) + data


def seal_stream(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """:func:`seal_blob` for data produced piece by piece: yields the envelope's header,
    ``chunks`` as they come and a trailer with their crc32 and length, holding nothing
    but a running checksum. :func:`open_blob` reads both envelopes."""
    yield _HEADER.pack(_MAGIC, _STREAM_VERSION, 0, 0)
    crc = 0
    length = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
        length += len(chunk)
        yield chunk
    yield _TRAILER.pack(_TRAILER_MAGIC, crc, length)


def open_blob(sealed: bytes, what: str) -> bytes:
    """Unwrap an envelope made by :func:`seal_blob` or :func:`seal_stream`, verifying
    length and checksum (CorruptSnapshotError naming ``what`` if they do not match)."""
    if len(sealed) < _HEADER.size:
        raise CorruptSnapshotError(f"{what}: truncated ({len(sealed)} bytes, no header)")
    magic, version, crc, length = _HEADER.unpack_from(sealed)
    if magic != _MAGIC or version not in (_VERSION, _STREAM_VERSION):
        raise CorruptSnapshotError(f"{what}: not a jstormpy snapshot (bad magic/version)")
    end = len(sealed)
    if version == _STREAM_VERSION:
        if crc or length:  # written as 0: any other value is a corrupted header
            raise CorruptSnapshotError(f"{what}: corrupted header")
        if end < _HEADER.size + _TRAILER.size:
            raise CorruptSnapshotError(f"{what}: truncated ({end} bytes, no trailer)")
        end -= _TRAILER.size
        trailer, crc, length = _TRAILER.unpack_from(sealed, end)
        if trailer != _TRAILER_MAGIC:
            raise CorruptSnapshotError(f"{what}: truncated or damaged at its end (no "
                                       f"valid trailer after {end - _HEADER.size} bytes)")
    data = sealed[_HEADER.size:end]
    if len(data) != length:
        raise CorruptSnapshotError(f"{what}: truncated ({len(data)} of {length} bytes)")
    if zlib.crc32(data) != crc:
        raise CorruptSnapshotError(f"{what}: checksum mismatch")
    return data


class StateBackend(ABC):
    """Where snapshots live. Selected by URI; see :func:`jstormpy.state_backends.open_backend`."""

    uri: str = ""

    # -- primitives each backend implements -------------------------------------------
    @abstractmethod
    def put_object(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (all or nothing), replacing any old value."""

    @abstractmethod
    def get_object(self, key: str) -> bytes:
        """The bytes under ``key``; raise SnapshotNotFoundError if there are none."""

    @abstractmethod
    def list_objects(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix`` (any order)."""

    @abstractmethod
    def delete_objects(self, prefix: str) -> None:
        """Delete every key starting with ``prefix`` (no error if there are none)."""

    def put_object_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        """:meth:`put_object` of the concatenation of ``chunks``, as atomic: a reader sees
        the whole object or none of it, also when iterating ``chunks`` raises (nothing
        is stored then). ``file://`` and ``hdfs://`` write the chunks as they come, so
        the object is never whole in memory; this default, for a backend that needs
        the whole value at once (``memory://``, ``hbase://``), joins them first.

        A backend that retries a failed write iterates ``chunks`` again: pass an
        iterable that starts over on each ``iter()`` to allow that; a one-shot iterator
        (a generator) is not retried (BackendError instead)."""
        self.put_object(key, b"".join(chunks))

    def create_object(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` only if the key is absent; raise ObjectExistsError
        if it is taken. Every backend overrides this atomically (``file://``: a hard link;
        ``hdfs://``: a rename that does not overwrite; ``hbase://``: ``checkAndPut``;
        ``memory://``: under its lock); this default, for a backend that cannot, is a
        look then a write: a writer between the two still replaces."""
        if key in self.list_objects(key):
            raise ObjectExistsError(f"{key!r} exists in {self.uri}")
        self.put_object(key, data)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    # -- checkpoint operations (shared) -------------------------------------------------
    def put_snapshot(self, checkpoint_id: int, task_id: int, data: bytes | Iterable[bytes],
                     generation: int = 0, attempt: str = "",
                     refs: bytes | None = None) -> str:
        """Store one task's snapshot for a checkpoint; returns its handle (the key).

        ``data`` is the snapshot's bytes, or an iterable of its pieces (a full dump,
        ``runtime/snapshots.py``): those are written as a stream
        (:meth:`put_object_stream`, :func:`seal_stream`), never joined here, so a large
        snapshot does not have to fit in memory. :meth:`get_snapshot` returns the same
        bytes either way.

        The key carries the fencing token (``generation`` and the writer's ``attempt``), so
        a zombie of the same generation never overwrites the live incarnation's snapshot;
        the TM keeps only handles acked by live workers. ``refs`` (incremental checkpoints)
        is the JSON list of segment keys the snapshot references; it is written first, so a
        snapshot never exists without it.
        """
        token = f"g{generation}-a{attempt}" if attempt else f"g{generation}"
        key = f"{checkpoint_prefix(checkpoint_id)}task-{task_id:05d}-{token}.snap"
        if refs is not None:
            self.put_object(key[:-5] + ".refs", seal_blob(refs))
        if isinstance(data, bytes | bytearray | memoryview):
            self.put_object(key, seal_blob(bytes(data)))
        else:
            self.put_object_stream(key, _Sealed(data))
        return key

    def get_snapshot(self, handle: str) -> bytes:
        """The snapshot behind ``handle``, checksum verified (CorruptSnapshotError if not)."""
        return open_blob(self.get_object(handle), f"snapshot {handle!r} in {self.uri}")

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        """Create checkpoint ``checkpoint_id``'s metadata (its commit point) atomically and
        only if it is absent (:meth:`create_object`; ObjectExistsError if it exists). There
        is no way to replace a commit point: a deposed or dead Topology Master's write that
        lands late never replaces the one a newer TM wrote under the same id, nor the
        reverse. Every commit point is created here, through one path
        (docs/checkpointing.md, "The one commit path")."""
        body = json.dumps({**metadata, "checkpoint_id": checkpoint_id}, sort_keys=True)
        self.create_object(checkpoint_prefix(checkpoint_id) + METADATA_NAME,
                           seal_blob(body.encode()))

    def read_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        """The metadata of a completed checkpoint (checksum verified)."""
        key = checkpoint_prefix(checkpoint_id) + METADATA_NAME
        raw = open_blob(self.get_object(key), f"metadata of checkpoint {checkpoint_id}")
        try:
            meta: dict[str, Any] = json.loads(raw)
        except ValueError as exc:
            raise CorruptSnapshotError(
                f"metadata of checkpoint {checkpoint_id} is not JSON: {exc}") from exc
        return meta

    def list_completed(self) -> list[int]:
        """Ids of checkpoints whose metadata was written, ascending."""
        ids = []
        for key in self.list_objects("chk-"):
            head, _, tail = key.partition("/")
            if tail == METADATA_NAME:
                try:
                    ids.append(int(head[4:]))
                except ValueError:
                    continue
        return sorted(set(ids))

    def list_checkpoint_ids(self) -> list[int]:
        """Ids of every checkpoint with any object stored (complete or not), ascending.

        A checkpoint's task snapshots are stored before its commit point is written, so a
        checkpoint whose ``_metadata`` write a dead TM left with the backend (it may still
        land) is among these: a recovery hands out ids above them
        (:meth:`~jstormpy.master.coordinator.CheckpointCoordinator.recovery_resolved`)."""
        ids = set()
        for key in self.list_objects("chk-"):
            try:
                ids.add(int(key.partition("/")[0][4:]))
            except ValueError:
                continue
        return sorted(ids)

    def latest_completed(self) -> int | None:
        """The newest completed checkpoint id, or None."""
        done = self.list_completed()
        return done[-1] if done else None

    def discard_checkpoint(self, checkpoint_id: int) -> None:
        """Delete every object of one checkpoint (metadata first, so it stops counting)."""
        prefix = checkpoint_prefix(checkpoint_id)
        self.delete_objects(prefix + METADATA_NAME)
        self.delete_objects(prefix)

    def garbage_collect(self, keep: int, bad: Collection[int] = (),
                        upto: int | None = None) -> list[int]:
        """Delete all but the newest ``keep`` completed checkpoints, and any incomplete
        checkpoint older than the newest completed one. Returns the ids deleted.

        The Topology Master passes the checkpoints it will never restore (``bad``) and the
        newest id it knows of (``upto``): neither counts among the newest ``keep``, and
        nothing above ``upto`` is touched. A commit point of a deposed or dead TM that
        landed late may carry an id above every checkpoint of the TM that runs now; as
        the newest it would crowd out the checkpoints it restores from (issue 27).
        CheckpointError: ``keep`` is negative."""
        if keep < 0:
            raise CheckpointError(f"garbage_collect(keep={keep}): the number of completed "
                                  "checkpoints to keep must be >= 0")
        listed = self.list_completed()
        done = eligible(listed, bad, upto)  # the decision: state_backends/retention.py
        if not done:
            return []
        pinned = self.pinned_checkpoints()
        seen: set[int] = set()
        for key in self.list_objects("chk-"):
            try:
                seen.add(int(key.partition("/")[0][4:]))
            except ValueError:
                continue
        plan = plan_retention(done, listed, seen, keep, pinned)
        for cid in plan.doomed:
            self.discard_checkpoint(cid)
        self.collect_shared_files(sorted(plan.keep), plan.newest)
        return list(plan.doomed)

    def pin_checkpoint(self, checkpoint_id: int, ttl_s: float = 3600.0) -> str:
        """Keep checkpoint ``checkpoint_id`` (and every segment it references) out of
        retention until :meth:`unpin` or ``ttl_s`` seconds (a pin of a process that died
        expires). Returns the pin's name. Used while a savepoint copies a checkpoint."""
        import time
        import uuid

        name = f"{PINS_PREFIX}{checkpoint_id:010d}-{uuid.uuid4().hex[:12]}"
        self.put_object(name, seal_blob(json.dumps(
            {"checkpoint_id": checkpoint_id, "expires_at": time.time() + ttl_s}).encode()))
        return name

    def unpin(self, pin: str) -> None:
        """Release a pin made by :meth:`pin_checkpoint`."""
        self.delete_objects(pin)

    def pinned_checkpoints(self) -> set[int]:
        """Checkpoint ids with a live pin (expired pins are deleted)."""
        import time

        out: set[int] = set()
        for key in self.list_objects(PINS_PREFIX):
            try:
                pin = json.loads(open_blob(self.get_object(key), key))
            except SnapshotNotFoundError:
                continue  # unpinned meanwhile
            except (CorruptSnapshotError, ValueError):
                continue  # half-written by a process that died: expires like any pin
            if pin.get("expires_at", 0) < time.time():
                self.delete_objects(key)
                continue
            out.add(int(pin["checkpoint_id"]))
        return out

    def collect_shared_files(self, retained: list[int], newest: int) -> list[str]:
        """Delete the shared state files (incremental segments, RocksDB SST files) no
        retained checkpoint references (``state_backends/shared_files.py``); returns
        their keys."""
        from jstormpy.state_backends.shared_files import collect_shared_files

        cache: dict[str, frozenset[str]] = self.__dict__.setdefault("_refs_cache", {})
        return collect_shared_files(self, retained, newest, cache)

    def get_segment(self, key: str, groups: set[int] | None = None) -> bytes:
        """An incremental segment (state_backends/changelog.py); a backend that stores
        a row per key group may return only the sections of ``groups`` (None = all).
        Here: the whole object."""
        return self.get_object(key)

    def put_meta(self, name: str, data: bytes) -> None:
        """Store a small named object atomically (e.g. the generation counter)."""
        self.put_object(f"meta/{name}", seal_blob(data))

    def get_meta(self, name: str) -> bytes | None:
        """A small named object, or None if it was never written."""
        try:
            return open_blob(self.get_object(f"meta/{name}"), f"meta/{name}")
        except SnapshotNotFoundError:
            return None


class ChunkSource:
    """The chunks of a :meth:`StateBackend.put_object_stream`, as a backend iterates them:
    it records an exception the producer raised (:attr:`error`), so the backend re-raises
    that one as it is, not as a failure of its own write (an HTTP client reports it as a
    broken connection, which would be retried; a file write as an I/O error)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = chunks
        self.error: Exception | None = None

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.chunks
        except Exception as exc:  # not GeneratorExit: the backend stopped reading
            self.error = exc
            raise


class _Sealed:
    """``chunks`` in a streamed envelope, each time it is iterated (so a backend that
    retries a write can start over, if ``chunks`` can)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = chunks
        self.started = False

    def __iter__(self) -> Iterator[bytes]:
        if self.started and iter(self.chunks) is self.chunks:
            # a one-shot iterator, partly or wholly consumed: a retry would store less
            raise BackendError("a snapshot stream given as a one-shot iterator cannot be "
                               "written again; pass an iterable that starts over")
        self.started = True
        return seal_stream(self.chunks)
