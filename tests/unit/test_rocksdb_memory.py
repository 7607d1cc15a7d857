"""A worker's RocksDB memory budget (``Config.rocksdb_memory_mb``, ``RocksDBMemory`` in
jstormpy/state_store.py; issue 34): the task databases really open with a block cache of
the capacity the budget gives, the worker's task databases share that one cache, their
memtables are charged to it, and a bad budget is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import jstormpy.state_store as ss
from jstormpy import Config
from jstormpy.api.errors import ConfigError
from jstormpy.state_store import RocksDBMemory, RocksDBStore, open_store

MAX_P = 128


def capacity(st: RocksDBStore) -> int:
    return int(st.db.property_int_value("rocksdb.block-cache-capacity"))


def usage(st: RocksDBStore) -> int:
    return int(st.db.property_int_value("rocksdb.block-cache-usage"))


def fill(st: RocksDBStore, n: int) -> Any:
    """``n`` entries of ~300 bytes in state "kv", flushed to an SST file."""
    d: Any = st.open("kv", None, None)
    for i in range(n):
        d[i] = "v" * 300
    st.flush()
    st.families["kv"].flush(True)
    return d


def test_the_database_opens_with_the_budgets_cache(tmp_path: Path) -> None:
    mem = RocksDBMemory(96)
    st: Any = open_store("rocksdb", tmp_path / "task-1", MAX_P, memory=mem)
    fill(st, 10)
    # 5/6 of the budget is the cache, the memtables may hold a third of it (Flink's split)
    assert capacity(st) == mem.cache_bytes == 80 << 20
    assert mem.write_buffer_bytes == 32 << 20
    assert st.figures()["block_cache_capacity_bytes"] == 80 << 20
    st.close()
    # a store opened on its own (tools, tests) keeps a cache of its own
    alone = RocksDBStore(tmp_path / "task-2", MAX_P)
    fill(alone, 10)
    assert capacity(alone) == ss.BLOCK_CACHE_BYTES
    alone.close()


def test_tasks_of_one_worker_share_the_cache(tmp_path: Path) -> None:
    """Blocks one task's reads bring in take room in the other's cache: one cache."""
    mem = RocksDBMemory(64)
    a = RocksDBStore(tmp_path / "task-1", MAX_P, memory=mem)
    b = RocksDBStore(tmp_path / "task-2", MAX_P, memory=mem)
    da, _ = fill(a, 20_000), fill(b, 10)
    before = usage(b)
    for i in range(20_000):
        assert da.get(i) == "v" * 300
    assert usage(a) == usage(b) >= before + (2 << 20)  # ~6 MB of a's data blocks
    # separate caches: the other database's use does not move
    c, d = RocksDBStore(tmp_path / "task-3", MAX_P), RocksDBStore(tmp_path / "task-4", MAX_P)
    dc, _ = fill(c, 20_000), fill(d, 10)
    before = usage(d)
    for i in range(20_000):
        assert dc.get(i) == "v" * 300
    assert usage(d) == before < usage(c)
    for st in (a, b, c, d):
        st.close()


def test_memtables_are_charged_to_the_cache(tmp_path: Path) -> None:
    """Writes that stay in the memtable (no flush, no read) take room in the budget's
    cache: the cache and the memtables share one limit."""
    mem = RocksDBMemory(64)
    st = RocksDBStore(tmp_path / "task-1", MAX_P, memory=mem)
    d: Any = st.open("kv", None, None)
    empty = usage(st)
    for i in range(20_000):
        d[i] = "v" * 300
    st.flush()  # the write cache into RocksDB's memtable, not to disk
    assert st.families["kv"].property_int_value("rocksdb.num-files-at-level0") == 0
    assert usage(st) >= empty + (4 << 20)  # ~6 MB of memtable reserved in the cache
    st.close()


def test_config_validates_the_budget() -> None:
    assert Config().rocksdb_memory_mb is None  # no budget unless asked for
    assert Config(rocksdb_memory_mb=32).rocksdb_memory_mb == 32
    assert Config(rocksdb_memory_mb=ss.SUGGESTED_MEMORY_MB).rocksdb_memory_mb == 128
    bad: Any
    for bad in (31, 0, -1, 256.0, "256", True):
        with pytest.raises(ConfigError, match="rocksdb_memory_mb"):
            Config(rocksdb_memory_mb=bad)
        with pytest.raises(ConfigError, match="rocksdb_memory_mb"):
            RocksDBMemory(bad)
    with pytest.raises(ConfigError, match="rocksdb_memory_mb"):
        RocksDBMemory(None)  # type: ignore[arg-type]
