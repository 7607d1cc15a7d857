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

import shutil
import tempfile
from collections.abc import Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

from jstormpy.api.errors import CorruptSnapshotError, MissingSegmentError, SnapshotNotFoundError
from jstormpy.state_backends.base import StateBackend, open_blob, seal_blob
from jstormpy.state_backends.shared_files import SHARED_PREFIX

FORMAT = 1
SST_SUFFIX = ".sst"


def sst_key(task_id: int, checkpoint_id: int, generation: int, attempt: str,
            name: str) -> str:
    """Where SST file ``name`` of ``task_id``'s database, first uploaded for
    ``checkpoint_id``, lives in the backend."""
    token = f"g{generation}-a{attempt}" if attempt else f"g{generation}"
    return f"{SHARED_PREFIX}task-{task_id:05d}/sst-{checkpoint_id:010d}-{token}-{name}"


def upload_checkpoint(backend: StateBackend, folder: Path, uploaded: MutableMapping[str, str],
                      *, task_id: int, checkpoint_id: int, generation: int, attempt: str,
                      states: dict[str, int | None], key_groups: range | None,
                      max_parallelism: int, now_ms: float,
                      after_first_upload: Callable[[], None] | None = None
                      ) -> tuple[dict[str, Any], int]:
    """Upload the native checkpoint in ``folder``: the SST files not in ``uploaded``
    (file name -> key; each one is added as it lands, so a failed checkpoint's files are
    referenced, not uploaded again, by the next), and the small files inline. Returns the
    snapshot's ``"rocksdb"`` entry and the bytes written. ``after_first_upload`` runs once
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
            backend.put_object(key, seal_blob(path.read_bytes()))
            uploaded[name] = key
            written += size
            if hook is not None:
                run: Callable[[], None] = hook
                hook = None
                run()
        ssts.append([name, key, size])
    groups = None if key_groups is None else [key_groups.start, key_groups.stop]
    entry = {"format": FORMAT, "states": dict(states), "key_groups": groups,
             "max_parallelism": max_parallelism, "now_ms": now_ms, "sst": ssts,
             "files": files}
    return entry, written


def sst_keys(entry: dict[str, Any]) -> list[str]:
    """The shared-file keys a ``"rocksdb"`` snapshot entry references (its ``.refs``)."""
    return [key for _name, key, _size in entry.get("sst", ())]


def download_checkpoint(backend: StateBackend, entry: dict[str, Any], target: Path,
                        where: str) -> dict[str, str]:
    """Write the native checkpoint of ``entry`` into ``target`` (a fresh directory);
    returns file name -> key of its SST files.

    Raises:
        MissingSegmentError: an SST file is gone from the backend (named).
        CorruptSnapshotError: an SST file is truncated or garbled (named).
    """
    if entry.get("format") != FORMAT:
        raise CorruptSnapshotError(f"{where}: unknown RocksDB checkpoint format "
                                   f"{entry.get('format')!r}")
    target.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    for name, key, size in entry["sst"]:
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
        out[name] = key
    for name, data in entry["files"].items():
        (target / name).write_bytes(data)
    return out


def materialise(backend: StateBackend, entry: dict[str, Any],
                groups: Iterable[int] | None, where: str) -> dict[str, dict[Any, Any]]:
    """The entries of the native checkpoint ``entry`` in the memory format: ``{state:
    {key: value}}`` (TTL entries as ``Stamped``, those expired at the barrier left out),
    of key groups ``groups`` only if given. Downloads into a temporary directory."""
    from jstormpy.state_store import FrozenStore, rocksdict_module, store_options

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
