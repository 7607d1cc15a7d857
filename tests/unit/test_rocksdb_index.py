"""The index blocks of a task database's SST files (``INDEX_RESTART_INTERVAL`` in
jstormpy/state_store.py; issue 34): the database writes them with one restart point per
16 keys, which takes a fraction of the memory of RocksDB's default (every entry a restart
point), and a checkpoint written before the change (files with the old index layout)
restores, reads and goes on taking writes and compactions under the new one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import jstormpy.state_store as ss
from jstormpy.state_backends import open_backend
from tests.unit.rocksdb_options import options_section
from tests.unit.test_rocksdb_files import checkpoint, native_store, restore

N = 60_000


def table_options(db_dir: Path, family: str) -> dict[str, str]:
    """The ``[TableOptions/BlockBasedTable "<family>"]`` section of the newest OPTIONS file
    RocksDB wrote in ``db_dir``."""
    return options_section(db_dir, "TableOptions/BlockBasedTable", family)


def index_bytes(path: Path) -> int:
    """What the table readers hold for the index blocks (their memory less the bloom
    filters', which the files' properties give), for ``N`` keys of ~300 bytes written
    and flushed by the store."""
    st = ss.RocksDBStore(path, 128)
    d: Any = st.open("kv", None, None)
    for i in range(N):
        d[i] = "v" * 300
    st.flush()
    st.families["kv"].flush(True)
    assert table_options(path, "s:kv")["index_block_restart_interval"] == str(
        ss.INDEX_RESTART_INTERVAL)
    held = int(st.families["kv"].property_int_value("rocksdb.estimate-table-readers-mem"))
    props = st.families["kv"].property_value("rocksdb.aggregated-table-properties")
    filters = int(re.search(r"filter block size=(\d+)", props).group(1))
    st.close()
    return held - filters


def test_index_blocks_take_less_memory_than_rocksdbs_default(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    assert ss.INDEX_RESTART_INTERVAL == 16
    sparse = index_bytes(tmp_path / "sparse")
    monkeypatch.setattr(ss, "INDEX_RESTART_INTERVAL", 1)  # RocksDB's default
    dense = index_bytes(tmp_path / "dense")
    assert sparse < 0.4 * dense, (sparse, dense)


def test_a_checkpoint_written_with_the_old_index_restores(tmp_path: Path,
                                                           monkeypatch: Any) -> None:
    backend = open_backend(f"file://{tmp_path / 'ckpt'}")
    try:
        monkeypatch.setattr(ss, "INDEX_RESTART_INTERVAL", 1)  # as before the change
        old = native_store(tmp_path / "old")
        counts = old.open("counts", None, None)
        for i in range(N):
            counts[f"k{i}"] = i
        handle, _ = checkpoint(backend, old, {"counts": counts}, 1)
        assert table_options(old.path, "s:counts")["index_block_restart_interval"] == "1"
        old.close()
        monkeypatch.undo()

        new, states = restore(backend, handle, tmp_path / "new")
        kv: Any = states["counts"]
        assert len(kv) == N and kv["k0"] == 0 and kv[f"k{N - 1}"] == N - 1
        for i in range(0, N, 3):  # overwrite a third: new files beside the old ones
            kv[f"k{i}"] = -i
        checkpoint(backend, new, states, 2)
        new.families["counts"].compact_range(None, None)  # old and new layouts merged
        assert table_options(new.path, "s:counts")["index_block_restart_interval"] == "16"
        assert len(kv) == N
        assert all(kv[f"k{i}"] == (-i if i % 3 == 0 else i) for i in range(0, N, 7))
        assert kv.get("absent") is None
        new.close()
    finally:
        backend.close()


@pytest.mark.parametrize("interval", [1, 16])
def test_lookups_find_every_key_with_either_index(tmp_path: Path, monkeypatch: Any,
                                                  interval: int) -> None:
    """Present keys are found and absent ones (between and beyond them) are not, whatever
    the index's restart interval (a restart point every 16 keys is searched then scanned)."""
    monkeypatch.setattr(ss, "INDEX_RESTART_INTERVAL", interval)
    st = ss.RocksDBStore(tmp_path / "db", 128)
    d: Any = st.open("kv", None, None)
    for i in range(0, 2 * N, 2):
        d[i] = i
    st.flush()
    st.families["kv"].flush(True)
    assert all(d.get(i) == i for i in range(0, 2 * N, 2))
    assert all(d.get(i) is None for i in range(1, 2 * N, 2))
    assert d.get(2 * N + 1) is None and d.get(-1) is None
    st.close()
