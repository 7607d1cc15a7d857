"""Shared state files and the references to them: what retention keeps.

Some checkpoint state is written once and referenced by many checkpoints instead of being
rewritten into each: the incremental segments of in-memory keyed state
(``state_backends/changelog.py``, ``seg-*``) and the SST files of a RocksDB state store's
native checkpoints (``state_backends/rocksdb_files.py``, ``sst-*``). Both live under
:data:`SHARED_PREFIX`, outside any checkpoint's directory, named by the task and the
checkpoint that first wrote them:

    inc/task-00007/seg-0000000042-g3.delta
    inc/task-00007/sst-0000000042-g3-a<attempt>-000012.sst

A task snapshot that references shared files has a ``.refs`` object beside it (written
before the snapshot, :meth:`StateBackend.put_snapshot`) listing their keys. Retention
(:func:`collect_shared_files`, run by the TM after each completed checkpoint) keeps a file
while any retained checkpoint's snapshot lists it, or while it may belong to a checkpoint
still in flight (written for a checkpoint newer than the newest completed one); it
deletes everything else. The reference count is recomputed each time from the ``.refs``
of the retained (and pinned) checkpoints, so no counter can drift when a process dies in
the middle: a SIGKILLed upload leaves files no completed checkpoint lists, and they go
once a newer checkpoint completes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from jstormpy.api.errors import CorruptSnapshotError, SnapshotNotFoundError

if TYPE_CHECKING:
    from jstormpy.state_backends.base import StateBackend

SHARED_PREFIX = "inc/"
"""Where every shared state file lives."""

_KINDS = ("seg-", "sst-")  # incremental segments, RocksDB SST files


def shared_file_checkpoint(key: str) -> int | None:
    """The checkpoint id a shared file was first written for (None if ``key`` is not a
    shared file's)."""
    name = key.rsplit("/", 1)[-1]
    if not name.startswith(_KINDS):
        return None
    try:
        return int(name[4:14])
    except ValueError:
        return None


def refs_key(handle: str) -> str:
    """The ``.refs`` object beside a task snapshot handle."""
    return handle[:-5] + ".refs" if handle.endswith(".snap") else handle + ".refs"


def encode_refs(keys: Iterable[str]) -> bytes:
    """The body of a ``.refs`` object: the shared-file keys a snapshot needs."""
    return json.dumps(sorted(set(keys))).encode()


def referenced_files(backend: StateBackend, handles: Iterable[str],
                     cache: dict[str, frozenset[str]] | None = None) -> set[str]:
    """Every shared-file key the task snapshots ``handles`` reference (their ``.refs``).

    Raises:
        CorruptSnapshotError: a ``.refs`` object is unreadable (retention must then keep
            every file rather than guess).
    """
    from jstormpy.state_backends.base import open_blob

    out: set[str] = set()
    for handle in handles:
        if cache is not None and handle in cache:
            out |= cache[handle]
            continue
        try:
            raw = open_blob(backend.get_object(refs_key(handle)), f"refs of {handle}")
            refs = frozenset(json.loads(raw))
        except SnapshotNotFoundError:
            refs = frozenset()
        except ValueError as exc:
            raise CorruptSnapshotError(f"refs of {handle} are not JSON: {exc}") from exc
        if cache is not None:
            cache[handle] = refs
        out |= refs
    return out


def collect_shared_files(backend: StateBackend, retained: list[int], newest: int,
                         cache: dict[str, frozenset[str]] | None = None) -> list[str]:
    """Delete the shared files no retained checkpoint references; returns their keys.

    The live set is the union of the ``.refs`` of every task snapshot of the ``retained``
    checkpoints; a file written for a checkpoint newer than ``newest`` belongs to one
    still in flight and is kept. ``cache`` (kept by the caller between runs) remembers the
    ``.refs`` of snapshots already read.
    """
    from jstormpy.faults import fault_point

    files = backend.list_objects(SHARED_PREFIX)
    if not files:
        return []
    cache = {} if cache is None else cache
    handles: list[str] = []
    for cid in retained:
        try:
            meta = backend.read_metadata(cid)
        except SnapshotNotFoundError:
            continue
        handles += [t["handle"] for t in meta.get("tasks", {}).values() if t.get("handle")]
    live = referenced_files(backend, handles, cache)
    live_handles = set(handles)
    for handle in [h for h in cache if h not in live_handles]:
        del cache[handle]
    doomed = [k for k in files if k not in live
              and (shared_file_checkpoint(k) or newest + 1) <= newest]
    for i, key in enumerate(doomed):
        if i == len(doomed) // 2:
            fault_point("master_during_segment_gc", newest)
        backend.delete_objects(key)
    return doomed
