"""A RocksDB state store's native checkpoint in a snapshot backend (Flink's incremental
RocksDB checkpoint).

With ``Config(state_store="rocksdb", incremental_checkpoints=True)`` a task snapshot does
not hold the entries of its RocksDB states. At the barrier the task takes a native RocksDB
checkpoint (hard links, ``RocksDBStore.freeze``); the snapshot thread then
(:func:`upload_checkpoint`):

- uploads every SST file of it that is not in the backend yet, as a *shared file*
  (``state_backends/shared_files.py``) named by the task, the checkpoint, the writer's
  fencing token and the file's name (SST files never change once written, so a name in
  one database is one content):
  ``inc/task-00007/sst-0000000042-g3-a<attempt>-000012.sst``; each file is stored in the
  checksummed envelope (``seal_blob``), so a truncated or garbled copy is detected and
  named at download;
- references the SST files an earlier snapshot of the task already uploaded;
- puts the small files (``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*``, the empty WAL)
  inside the task snapshot itself, every time.

The snapshot's ``"rocksdb"`` entry (:func:`upload_checkpoint` returns it) is::

    {"format": 1, "states": {name: ttl_ms}, "key_groups": [first, end),
     "max_parallelism": n, "now_ms": barrier wall-clock ms,
     "sst": [[file name, backend key, size], ...], "files": {file name: bytes}}

and its ``.refs`` list the SST keys, so retention keeps them while a retained checkpoint
references them. A restore into a task with the same key-group range downloads the files
into a fresh directory and opens them (:func:`download_checkpoint`); any other reader (a
rescale, a savepoint, a restore into the memory store or another range) reads the entries
out of them into the memory format (:func:`materialise`), so savepoints stay
self-contained.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jstormpy.api.errors import CorruptSnapshotError, MissingSegmentError, SnapshotNotFoundError
from jstormpy.state_backends.base import StateBackend, open_blob, seal_blob
from jstormpy.state_backends.shared_files import SHARED_PREFIX
from jstormpy.state_store import FrozenStore, rocksdict_module, store_options

FORMAT = 1
SST_SUFFIX = ".sst"


def sst_key(task_id: int, checkpoint_id: int, generation: int, attempt: str,
            name: str) -> str:
    """Where SST file ``name`` of ``task_id``'s database, first uploaded for
    ``checkpoint_id``, lives in the backend."""
    token = f"g{generation}-a{attempt}" if attempt else f"g{generation}"
    return f"{SHARED_PREFIX}task-{task_id:05d}/sst-{checkpoint_id:010d}-{token}-{name}"


def upload_checkpoint(backend: StateBackend, folder: Path, uploaded: MutableMapping[str, str],
                      known_crcs: MutableMapping[str, int], *, task_id: int,
                      checkpoint_id: int, generation: int, attempt: str,
                      states: dict[str, int | None], key_groups: range | None,
                      max_parallelism: int, now_ms: float,
                      after_first_upload: Callable[[], None] | None = None
                      ) -> tuple[dict[str, Any], int]:
    """Upload the native checkpoint in ``folder``: the SST files not in ``uploaded``
    (file name -> key; each one is added as it lands, so a failed checkpoint's files are
    referenced, not uploaded again, by the next), and the small files inline.
    ``known_crcs`` (key -> CRC-32 of the file, kept by the caller) gives the checksums of
    the files referenced; the entry carries them (local recovery checks its copies against
    them); each new file's is added. Returns the snapshot's ``"rocksdb"`` entry and the
    bytes written. ``after_first_upload`` runs once
    the first new SST file is in the backend (a fault point)."""
    ssts: list[list[Any]] = []
    files: dict[str, bytes] = {}
    written = 0
    hook = after_first_upload
    for path in sorted(folder.iterdir()):
        name = path.name
        if not name.endswith(SST_SUFFIX):
            files[name] = path.read_bytes()
            written += len(files[name])
            continue
        size = path.stat().st_size
        key = uploaded.get(name)
        if key is None:
            key = sst_key(task_id, checkpoint_id, generation, attempt, name)
            data = path.read_bytes()
            backend.put_object(key, seal_blob(data))
            uploaded[name] = key
            known_crcs[key] = zlib.crc32(data)
            written += size
            if hook is not None:
                run: Callable[[], None] = hook
                hook = None
                run()
        ssts.append([name, key, size])
    groups = None if key_groups is None else [key_groups.start, key_groups.stop]
    entry: dict[str, Any] = {
        "format": FORMAT, "states": dict(states), "key_groups": groups,
        "max_parallelism": max_parallelism, "now_ms": now_ms, "sst": ssts,
        "crc32": {k: known_crcs[k] for _n, k, _s in ssts if k in known_crcs},
        "files": files}
    for key in [k for k in known_crcs if k not in entry["crc32"]]:
        del known_crcs[key]  # files the database no longer has
    return entry, written


def sst_keys_of(ssts: Iterable[list[Any]]) -> list[str]:
    return [key for _name, key, _size in ssts]


def sst_keys(entry: dict[str, Any]) -> list[str]:
    """The shared-file keys a ``"rocksdb"`` snapshot entry references (its ``.refs``)."""
    return sst_keys_of(entry.get("sst", ()))


class LocalCopies:
    """Local recovery: a worker's local copies of the SST files one task uploaded, in
    ``folder`` (beside the task databases), hard links to the database's own files (SST
    files never change, so a link costs no space until RocksDB deletes its name).

    After every upload the task keeps links to the files of that checkpoint and of the
    one before (the newest may not complete) and drops the rest of its own; a restore of
    that task on the same host takes every file whose copy has the size and CRC-32 the
    snapshot records, and downloads only the others (:func:`download_checkpoint`)."""

    def __init__(self, folder: Path, task_id: int) -> None:
        self.folder = folder
        self.prefix = _local_name(f"{SHARED_PREFIX}task-{task_id:05d}/")
        self.previous: set[str] = set()

    def path(self, key: str) -> Path:
        return self.folder / _local_name(key)

    def seed(self, entry: dict[str, Any]) -> None:
        """The restored checkpoint's files count as the previous upload's."""
        self.previous = set(sst_keys(entry))

    def keep(self, checkpoint: Path, entry: dict[str, Any]) -> None:
        """Link the SST files of the uploaded ``entry`` from the native checkpoint
        directory ``checkpoint``; delete this task's other copies."""
        self.folder.mkdir(parents=True, exist_ok=True)
        current = set()
        for name, key, _size in entry["sst"]:
            current.add(key)
            target = self.path(key)
            if not target.exists():
                os.link(checkpoint / name, target)
        wanted = {_local_name(k) for k in current | self.previous}
        for p in self.folder.iterdir():
            if p.name.startswith(self.prefix) and p.name not in wanted:
                p.unlink(missing_ok=True)
        self.previous = current

    @staticmethod
    def drop_others(folder: Path, task_ids: Iterable[int]) -> None:
        """Delete the local copies in ``folder`` of every task but ``task_ids`` (the
        tasks this worker no longer runs)."""
        if not folder.is_dir():
            return
        mine = tuple(_local_name(f"{SHARED_PREFIX}task-{t:05d}/") for t in task_ids)
        for p in folder.iterdir():
            if not p.name.startswith(mine):
                p.unlink(missing_ok=True)

    def take(self, key: str, size: int, crc: int | None, dest: Path) -> bool:
        """Link the local copy of ``key`` to ``dest`` if it is intact; whether it was."""
        if crc is None:
            return False
        source = self.path(key)
        try:
            if source.stat().st_size != size or not local_copy_matches(
                    source.read_bytes(), size, crc):
                return False
            os.link(source, dest)
        except OSError:
            return False
        return True


def local_copy_matches(data: bytes | None, size: int, crc: int | None) -> bool:
    """Local recovery's decision: whether a local copy (its bytes; None when there is
    none) is the file the completed checkpoint records, by size and CRC-32. A snapshot
    that recorded no CRC (``None``) is never taken from a local copy: it is downloaded.
    I/O-free, so the simulator (``jstorm simulate --faults local_recovery``) runs it."""
    return (crc is not None and data is not None and len(data) == size
            and zlib.crc32(data) == crc)


def _local_name(key: str) -> str:
    return key.replace("/", "__")


@dataclass
class Downloaded:
    """What :func:`download_checkpoint` put in place."""

    files: dict[str, str]
    """SST file name -> backend key."""
    local: int = 0
    """SST files taken from local copies."""
    downloaded: int = 0
    """SST files downloaded."""
    downloaded_bytes: int = 0


def download_checkpoint(backend: StateBackend, entry: dict[str, Any], target: Path,
                        where: str, local: LocalCopies | None = None) -> Downloaded:
    """Write the native checkpoint of ``entry`` into ``target`` (a fresh directory),
    taking intact ``local`` copies of SST files instead of downloading them.

    Raises:
        MissingSegmentError: an SST file is gone from the backend (named).
        CorruptSnapshotError: an SST file is truncated or garbled (named).
    """
    if entry.get("format") != FORMAT:
        raise CorruptSnapshotError(f"{where}: unknown RocksDB checkpoint format "
                                   f"{entry.get('format')!r}")
    target.mkdir(parents=True, exist_ok=True)
    out = Downloaded({})
    crcs = entry.get("crc32") or {}
    for name, key, size in entry["sst"]:
        out.files[name] = key
        if local is not None and local.take(key, size, crcs.get(key), target / name):
            out.local += 1
            continue
        label = f"SST file {name} ({key}) of {where}"
        try:
            sealed = backend.get_object(key)
        except SnapshotNotFoundError as exc:
            raise MissingSegmentError(f"{label} is missing: {exc}") from exc
        data = open_blob(sealed, label)
        if len(data) != size:
            raise CorruptSnapshotError(f"{label}: {len(data)} bytes, the snapshot says "
                                       f"{size}")
        (target / name).write_bytes(data)
        out.downloaded += 1
        out.downloaded_bytes += size
    for name, data in entry["files"].items():
        (target / name).write_bytes(data)
    return out


def materialise(backend: StateBackend, entry: dict[str, Any],
                groups: Iterable[int] | None, where: str) -> dict[str, dict[Any, Any]]:
    """The entries of the native checkpoint ``entry`` in the memory format: ``{state:
    {key: value}}`` (TTL entries as ``Stamped``, those expired at the barrier left out),
    of key groups ``groups`` only if given. Downloads into a temporary directory."""
    wanted = None if groups is None else set(groups)
    folder = Path(tempfile.mkdtemp(prefix="jstorm-rocksdb-restore-"))
    try:
        download_checkpoint(backend, entry, folder / "db", where)
        frozen = FrozenStore(folder / "db", store_options(rocksdict_module()),
                             float(entry["now_ms"]))
        try:
            return {name: dict(frozen.state(name, ttl_ms, wanted).items())
                    for name, ttl_ms in entry["states"].items()}
        finally:
            frozen.release()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def materialise_into(backend: StateBackend, snap: dict[str, Any],
                     groups: Iterable[int] | None, where: str) -> dict[str, Any]:
    """``snap`` with its ``"rocksdb"`` entry (if any) read into ``snap["states"]``."""
    entry = snap.pop("rocksdb", None)
    if entry:
        states = snap.setdefault("states", {})
        states.update(materialise(backend, entry, groups, where))
    return snap
