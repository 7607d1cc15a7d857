"""Native RocksDB checkpoints over every backend (memory, file, WebHDFS and HBase Thrift
test servers), through the StateBackend API only: the second checkpoint uploads only new
SST files, a restore opens the downloaded files, a damaged or missing SST file is named,
and retention keeps exactly the SST files the retained checkpoints reference."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from jstormpy.api.errors import CorruptSnapshotError, MissingSegmentError
from jstormpy.state_backends.changelog import load_task_snapshot
from jstormpy.state_backends.rocksdb_files import download_checkpoint
from jstormpy.state_backends.shared_files import SHARED_PREFIX
from tests.state_backends.test_contract import Env, env  # noqa: F401 - the fixture
from tests.unit.test_rocksdb_files import checkpoint, native_store

N = 20_000


def test_native_checkpoints_round_trip_incrementally(env: Env, tmp_path: Path  # noqa: F811
                                                     ) -> None:
    b = env.backend
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    for i in range(N):
        counts[f"k{i}"] = (i, "x" * 20)
    _h1, full = checkpoint(b, store, {"counts": counts}, 1)
    for i in range(0, N, 100):
        counts[f"k{i}"] = (-i, "y")
    h2, small = checkpoint(b, store, {"counts": counts}, 2)
    assert small < full * 0.2, (small, full)
    store.close()
    entry = pickle.loads(b.get_snapshot(h2))["rocksdb"]
    restored = native_store(tmp_path / "db2")
    files = download_checkpoint(b, entry, restored.path, "checkpoint 2").files
    got = restored.open_restored(entry["states"], files)["counts"]
    assert len(got) == N
    assert got["k300"] == (-300, "y") and got["k301"] == (301, "x" * 20)
    restored.close()
    assert load_task_snapshot(b, h2)["states"]["counts"]["k500"] == (-500, "y")


@pytest.mark.parametrize("damage", ["garbled", "missing"])
def test_damaged_sst_file_is_named(env: Env, tmp_path: Path, damage: str  # noqa: F811
                                   ) -> None:
    b = env.backend
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    counts.update({i: i for i in range(3000)})
    handle, _ = checkpoint(b, store, {"counts": counts}, 1)
    store.close()
    name, key, _size = pickle.loads(b.get_snapshot(handle))["rocksdb"]["sst"][0]
    if damage == "missing":
        b.delete_objects(key)
    else:
        raw = b.get_object(key)
        b.put_object(key, raw[:-5] + bytes(x ^ 0x5A for x in raw[-5:]))
    error = MissingSegmentError if damage == "missing" else CorruptSnapshotError
    with pytest.raises(error, match=f"SST file {name}"):
        load_task_snapshot(b, handle)


def test_retention_keeps_referenced_sst_files(env: Env, tmp_path: Path  # noqa: F811
                                              ) -> None:
    b = env.backend
    store = native_store(tmp_path / "db")
    counts = store.open("counts", None, None)
    handles = []
    for cid in range(1, 5):
        counts.update({(cid, i): i for i in range(2000)})
        store.families["counts"].compact_range(None, None)
        handles.append(checkpoint(b, store, {"counts": counts}, cid)[0])
        b.garbage_collect(keep=2)
    store.close()
    left = set(b.list_objects(SHARED_PREFIX))
    needed = set()
    for handle in handles[-2:]:
        needed |= {k for _n, k, _s in pickle.loads(b.get_snapshot(handle))["rocksdb"]["sst"]}
    assert left == needed
    assert len(load_task_snapshot(b, handles[-2])["states"]["counts"]) == 3 * 2000
