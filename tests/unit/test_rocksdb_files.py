"""Native RocksDB checkpoints in a snapshot backend (state_backends/rocksdb_files.py): only
new SST files are uploaded, a restore opens the downloaded files, savepoint/rescale readers
get the memory format, a damaged or missing SST file is named, and retention keeps every
SST file a retained checkpoint references (state_backends/shared_files.py)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import CorruptSnapshotError, MissingSegmentError
from jstormpy.keygroups import key_group
from jstormpy.runtime.snapshots import capture, release, serialise, upload_native, verify
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.changelog import load_task_snapshot
from jstormpy.state_backends.rocksdb_files import download_checkpoint, materialise
from jstormpy.state_backends.shared_files import SHARED_PREFIX, encode_refs
from jstormpy.state_store import RocksDBStore, RocksState, Stamped
from tests.manual_clock import Clock

MAX_P = 128
N = 40_000


def native_store(path: Path, clock: Clock | None = None) -> RocksDBStore:
    store = RocksDBStore(path, MAX_P, clock or Clock(1_000_000.0))
    store.native_checkpoints = True
    store.key_groups = range(0, MAX_P)
    return store


def checkpoint(backend: StateBackend, store: RocksDBStore, states: dict[str, Any],
               cid: int) -> tuple[str, int]:
    """What the executor does at a barrier and on the snapshot thread; returns the handle
    and the bytes written."""
    view = capture({"states": dict(states), "custom": None})
    try:
        verify(view)
        keys, written = upload_native(view, backend, task_id=7, checkpoint_id=cid,
                                      generation=1, attempt="x")
        data = serialise(view)
    finally:
        release(view)
    handle = backend.put_snapshot(cid, 7, data, 1, "x", refs=encode_refs(keys))
    backend.create_metadata(cid, {"tasks": {"7": {"handle": handle}}})
    return handle, written + len(data)


def restore(backend: StateBackend, handle: str, path: Path) -> tuple[RocksDBStore, dict[str, Any]]:
    """A native store at ``path`` restored from the checkpoint ``handle`` (its files
    downloaded), and its states."""
    entry = pickle.loads(backend.get_snapshot(handle))["rocksdb"]
    store = native_store(path)
    got = download_checkpoint(backend, entry, store.path, "test")
    return store, store.open_restored(entry["states"], got.files, entry["crc32"])


@pytest.fixture
def backend(tmp_path: Path) -> Any:
    b = open_backend(f"file://{tmp_path / 'ckpt'}")
    yield b
    b.close()


def test_second_checkpoint_uploads_only_new_sst_files(tmp_path: Path, backend: Any) -> None:
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    for i in range(N):
        counts[f"k{i}"] = i
    _h1, full = checkpoint(backend, store, {"counts": counts}, 1)
    for i in range(0, N, 100):  # 1 % of the keys change
        counts[f"k{i}"] = -i
    h2, small = checkpoint(backend, store, {"counts": counts}, 2)
    assert small < full * 0.2, (small, full)
    snap = pickle.loads(backend.get_snapshot(h2))
    entry = snap["rocksdb"]
    assert "counts" not in snap["states"]  # no entry is pickled into the snapshot
    assert entry["states"] == {"counts": None} and entry["key_groups"] == [0, MAX_P]
    assert {"CURRENT"} <= set(entry["files"]) and any(n.startswith("MANIFEST")
                                                        for n in entry["files"])
    first = {k for _n, k, _s in pickle.loads(backend.get_snapshot(_h1))["rocksdb"]["sst"]}
    assert first and first <= {k for _n, k, _s in entry["sst"]}  # referenced, not re-sent
    assert all(k.startswith(SHARED_PREFIX + "task-00007/sst-0000000001-g1-ax-")
               for k in first)
    store.close()

    # a restore of the same key groups opens the files as they are
    restored = native_store(tmp_path / "db2")
    got = download_checkpoint(backend, entry, restored.path, "test")
    assert got.downloaded == len(entry["sst"]) and got.local == 0
    states = restored.open_restored(entry["states"], got.files, entry["crc32"])
    assert isinstance(states["counts"], RocksState)
    assert states["counts"]["k100"] == -100 and states["counts"]["k101"] == 101
    assert len(states["counts"]) == N
    states["counts"]["new"] = 1  # it goes on from there, referencing what it downloaded
    _h3, third = checkpoint(backend, restored, states, 3)
    assert third < full * 0.2
    restored.close()

    # every other reader gets the memory format (savepoints, rescale, memory store)
    whole = load_task_snapshot(backend, h2)
    assert "rocksdb" not in whole and len(whole["states"]["counts"]) == N
    assert whole["states"]["counts"]["k200"] == -200
    half = range(0, MAX_P // 2)
    part = load_task_snapshot(backend, h2, groups=half)["states"]["counts"]
    assert part and all(key_group(k, MAX_P) in half for k in part)
    assert len(part) < N


def test_ttl_entries_expired_at_the_barrier_are_not_materialised(tmp_path: Path,
                                                                 backend: Any) -> None:
    clock = Clock(1_000_000.0)
    store = native_store(tmp_path / "db", clock)
    sessions = store.open("sessions", 1000, None)
    sessions["old"] = 1
    clock.now += 800
    sessions["new"] = 2
    clock.now += 500  # "old" expired before the barrier, "new" did not
    handle, _ = checkpoint(backend, store, {"sessions": sessions}, 1)
    store.close()
    entry = pickle.loads(backend.get_snapshot(handle))["rocksdb"]
    got = materialise(backend, entry, None, "test")["sessions"]
    assert list(got) == ["new"] and isinstance(got["new"], Stamped)


@pytest.mark.parametrize("damage", ["truncated", "garbled", "missing"])
def test_damaged_or_missing_sst_file_is_named(tmp_path: Path, backend: Any,
                                              damage: str) -> None:
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    for i in range(5000):
        counts[i] = i
    handle, _ = checkpoint(backend, store, {"counts": counts}, 1)
    store.close()
    entry = pickle.loads(backend.get_snapshot(handle))["rocksdb"]
    name, key, _size = entry["sst"][0]
    path = tmp_path / "ckpt" / key
    if damage == "missing":
        path.unlink()
        error: type[Exception] = MissingSegmentError
    else:
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) // 2] if damage == "truncated"
                         else raw[:-10] + bytes(b ^ 0xFF for b in raw[-10:]))
        error = CorruptSnapshotError
    with pytest.raises(error, match=f"SST file {name}"):
        download_checkpoint(backend, entry, tmp_path / "restore", "checkpoint 1")
    with pytest.raises(error, match=f"SST file {name}"):
        load_task_snapshot(backend, handle)


def test_retention_keeps_referenced_sst_files_and_drops_orphans(tmp_path: Path,
                                                                 backend: Any) -> None:
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    handles = []
    for cid in range(1, 6):
        for i in range(3000):
            counts[(cid, i)] = i
        store.families["counts"].compact_range(None, None)  # old SST files go: only newer checkpoints hold them
        handles.append(checkpoint(backend, store, {"counts": counts}, cid)[0])
    # an upload killed before its snapshot was written: an SST file no checkpoint lists
    orphan = f"{SHARED_PREFIX}task-00007/sst-0000000004-g1-adead-000999.sst"
    backend.put_object(orphan, b"partial")
    in_flight = f"{SHARED_PREFIX}task-00007/sst-0000000006-g1-ax-001000.sst"
    backend.put_object(in_flight, b"for checkpoint 6, still uploading")
    backend.garbage_collect(keep=2)
    left = set(backend.list_objects(SHARED_PREFIX))
    needed = set()
    for handle in handles[-2:]:
        needed |= {k for _n, k, _s in pickle.loads(backend.get_snapshot(handle))["rocksdb"]["sst"]}
    assert needed <= left, "retention deleted an SST file a retained checkpoint references"
    assert orphan not in left and in_flight in left
    assert left - {in_flight} == needed, "unreferenced SST files of old checkpoints stayed"
    for handle in handles[-2:]:  # and both retained checkpoints still restore
        assert len(load_task_snapshot(backend, handle)["states"]["counts"]) > 0
    store.close()


def test_full_local_disk_declines_the_checkpoint_and_the_next_one_goes_ahead(
        tmp_path: Path, backend: Any) -> None:
    """A real full disk (a 16 MB tmpfs filled with ballast, the disk_full chaos fault's)
    under the task database: the snapshot thread's apply of the barrier's sealed writes
    and native checkpoint fails, that checkpoint is declined (nothing is pickled at the
    barrier), the task keeps reading and writing its state, and once there is space again
    the next checkpoint holds every write."""
    from jstormpy.api.errors import CheckpointError
    from jstormpy.testing.chaos.disk import FullDisk

    disk = FullDisk(tmp_path / "local")
    if not disk.mounted:
        pytest.skip("needs root to mount a tmpfs (a read-only directory is no full disk)")
    try:
        store = native_store(tmp_path / "local" / "db")
        counts = store.open("counts", None, None)
        counts.update({i: i for i in range(5000)})
        checkpoint(backend, store, {"counts": counts}, 1)
        assert "ENOSPC" in disk.fill()
        counts.update({i: -i for i in range(2000)})
        view = capture({"states": {"counts": counts}})
        assert "counts" not in pickle.loads(view.rest)["states"]
        with pytest.raises(CheckpointError, match="native RocksDB checkpoint failed.*"
                                                  "No space left"):
            upload_native(view, backend, task_id=7, checkpoint_id=2, generation=1,
                          attempt="x")
        release(view)
        assert counts[5] == -5 and counts[4999] == 4999  # the task goes on
        counts[6000] = 6000
        disk.free()
        handle, _ = checkpoint(backend, store, {"counts": counts}, 2)
        store.close()
        got = load_task_snapshot(backend, handle)["states"]["counts"]
        assert len(got) == 5001 and got[1999] == -1999 and got[2000] == 2000
        assert got[6000] == 6000
    finally:
        disk.release()


def test_local_recovery_takes_intact_local_copies_and_downloads_the_rest(
        tmp_path: Path, backend: Any) -> None:
    from jstormpy.state_backends.rocksdb_files import LocalCopies

    local = tmp_path / "local"
    store = native_store(tmp_path / "db")
    store.local = LocalCopies(local, 7)
    counts = store.open("counts", None, None)
    entries = []
    for cid in range(1, 5):
        counts.update({(cid, i): i for i in range(3000)})
        if cid == 3:
            store.families["counts"].compact_range(None, None)  # the files of checkpoints 1-2 go
        handle, _ = checkpoint(backend, store, {"counts": counts}, cid)
        entries.append(pickle.loads(backend.get_snapshot(handle))["rocksdb"])
    store.close()
    kept = {p.name for p in local.iterdir()}
    newest = {k.replace("/", "__") for _n, k, _s in entries[3]["sst"]}
    previous = {k.replace("/", "__") for _n, k, _s in entries[2]["sst"]}
    assert kept == newest | previous, "local copies of the last two uploads only"
    assert set(entries[3]["crc32"]) == {k for _n, k, _s in entries[3]["sst"]}

    # a restart on the same host: every SST file of the newest checkpoint is local, and
    # is taken even with the backend's copies gone
    for _n, key, _s in entries[3]["sst"]:
        backend.delete_objects(key)
    fresh = native_store(tmp_path / "db2")
    got = download_checkpoint(backend, entries[3], fresh.path, "checkpoint 4",
                              LocalCopies(local, 7))
    assert got.local == len(entries[3]["sst"]) and got.downloaded == 0
    states = fresh.open_restored(entries[3]["states"], got.files, entries[3]["crc32"])
    assert len(states["counts"]) == 4 * 3000
    fresh.close()

    # a damaged local copy is not taken: that file is downloaded (here: it is gone from
    # the backend too, so the restore names it rather than open a damaged database)
    name, key, _size = entries[3]["sst"][0]
    copy = local / key.replace("/", "__")
    copy.unlink()
    copy.write_bytes(b"\0" * _size)
    with pytest.raises(MissingSegmentError, match=f"SST file {name}"):
        download_checkpoint(backend, entries[3], tmp_path / "db3", "checkpoint 4",
                            LocalCopies(local, 7))

    # the task moves to another worker: this worker drops its copies, and only its
    (local / "inc__task-00008__sst-0000000001-g1-ax-000009.sst").write_bytes(b"task 8")
    LocalCopies.drop_others(local, [8, 9])
    assert [p.name for p in local.iterdir()] == ["inc__task-00008__sst-0000000001-g1-ax-000009.sst"]


def test_local_recovery_downloads_only_what_differs(tmp_path: Path, backend: Any) -> None:
    from jstormpy.state_backends.rocksdb_files import LocalCopies

    store = native_store(tmp_path / "db")
    store.local = LocalCopies(tmp_path / "local", 7)
    counts = store.open("counts", None, None)
    counts.update({i: i for i in range(3000)})
    checkpoint(backend, store, {"counts": counts}, 1)
    store.local = None  # checkpoint 2's new file is uploaded but not kept locally
    counts.update({i: -i for i in range(100)})
    h2, _ = checkpoint(backend, store, {"counts": counts}, 2)
    store.close()
    entry = pickle.loads(backend.get_snapshot(h2))["rocksdb"]
    got = download_checkpoint(backend, entry, tmp_path / "db2", "checkpoint 2",
                              LocalCopies(tmp_path / "local", 7))
    assert got.local >= 1 and got.downloaded >= 1
    assert got.local + got.downloaded == len(entry["sst"])
    # what was downloaded is exactly the file(s) checkpoint 2 added
    assert got.downloaded_bytes == sum(s for _n, k, s in entry["sst"]
                                       if "sst-0000000002-" in k)


def test_a_pinned_checkpoint_keeps_its_sst_files(tmp_path: Path, backend: Any) -> None:
    """A savepoint copying checkpoint 1 pins it: retention keeps every SST file it
    references however many newer checkpoints complete, and drops them once unpinned."""
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    counts.update({i: i for i in range(3000)})
    h1, _ = checkpoint(backend, store, {"counts": counts}, 1)
    first = {k for _n, k, _s in pickle.loads(backend.get_snapshot(h1))["rocksdb"]["sst"]}
    pin = backend.pin_checkpoint(1)
    for cid in range(2, 5):
        counts.update({(cid, i): i for i in range(3000)})
        store.families["counts"].compact_range(None, None)  # checkpoint 1's files leave the database
        checkpoint(backend, store, {"counts": counts}, cid)
        backend.garbage_collect(keep=1)
    assert first <= set(backend.list_objects(SHARED_PREFIX))
    assert len(load_task_snapshot(backend, h1)["states"]["counts"]) == 3000
    backend.unpin(pin)
    counts[0] = -1
    checkpoint(backend, store, {"counts": counts}, 5)
    backend.garbage_collect(keep=1)
    assert not first & set(backend.list_objects(SHARED_PREFIX))
    store.close()


def test_local_copy_matches_only_the_recorded_file() -> None:
    """Local recovery's decision (the simulator runs it too): a copy is taken only if it
    has the size and CRC-32 the completed checkpoint recorded."""
    import zlib

    from jstormpy.state_backends.rocksdb_files import local_copy_matches

    data = b"an SST file of checkpoint 4" * 10
    crc = zlib.crc32(data)
    assert local_copy_matches(data, len(data), crc)
    garbled = data[:5] + bytes([data[5] ^ 1]) + data[6:]
    assert not local_copy_matches(garbled, len(data), crc)        # same size, other bytes
    assert not local_copy_matches(data[:-1], len(data), crc)      # truncated
    other = b"the same name, another generation's file" * 7
    assert not local_copy_matches(other, len(data), crc)          # another file
    assert not local_copy_matches(None, len(data), crc)           # no copy
    assert not local_copy_matches(data, len(data), None)          # no CRC recorded
