"""A task database's own RocksDB figures (``RocksDBStore.figures``): what the worker's
heartbeat sends with the task's metrics and ``bench/rmw_state_bench.py`` prints per tenth
(issue 34: what grows with the state in the engine). They must be RocksDB's real counts
for this database: its level-0 files, the gets it served, the SST files its bloom
filters let a get skip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jstormpy import state_store as ss
from jstormpy.state_store import RocksDBStore

MAX_P = 128


def test_figures_count_the_databases_files_and_gets(tmp_path: Path) -> None:
    # no key filter: the absent keys' gets must reach RocksDB (tests/unit/test_key_filter.py)
    st = RocksDBStore(tmp_path / "task-1", MAX_P, key_filter=False)
    assert st.figures() == {}  # no state opened: no database
    d: Any = st.open("kv", None, None)
    for flushes in range(3):  # three memtable flushes: three level-0 files
        for i in range(2000):
            d[(flushes, i)] = "v" * 300
        st.flush()
        st.families["kv"].flush(True)
    before = st.figures()
    assert before["l0_files"] == 3 == st.families["kv"].property_int_value(
        "rocksdb.num-files-at-level0")
    assert sum(before[f"l{n}_files"] for n in range(1, 7)) == 0
    assert before["sst_bytes"] > 0 and before["table_readers_bytes"] > 0
    assert before["flush_write_bytes_total"] >= before["sst_bytes"]
    for i in range(500):
        assert d.get((1, i)) == "v" * 300  # present: in the second file
        assert d.get((9, i)) is None  # absent: every file's filter says no (~1 % maybe)
    after = st.figures()
    assert after["gets_total"] - before["gets_total"] == 1000
    assert after["bloom_useful_total"] - before["bloom_useful_total"] >= 0.9 * (500 * 3 + 500)
    assert after["bloom_true_positive_total"] - before["bloom_true_positive_total"] == 500
    assert after["l0_hits_total"] - before["l0_hits_total"] == 500
    assert after["get_micros_total"] > before["get_micros_total"]
    assert set(after) == {*ss.ROCKSDB_FIGURES, *ss.ROCKSDB_DB_FIGURES, *ss.ROCKSDB_TICKERS,
                          "key_filter_bytes"}
    assert after["key_filter_bytes"] == 0
    st.close()
    assert st.figures() == {}  # closed: nothing to read (a heartbeat after the task ended)


def test_figures_survive_a_reopen(tmp_path: Path) -> None:
    """After a write error the store reopens its database: the figures are the new
    handle's (its statistics start over), not an error."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("kv", None, None)
    d["a"] = 1
    st.flush()
    st.reopen()
    assert d.get("a") == 1
    assert st.figures()["gets_total"] == 1


def test_parse_statistics_reads_tickers_and_histogram_sums() -> None:
    text = ("rocksdb.block.cache.miss COUNT : 17\n"
            "rocksdb.number.keys.read COUNT : 42\n"
            "rocksdb.db.get.micros P50 : 1.5 P95 : 3.0 P99 : 5.0 P100 : 9.0 "
            "COUNT : 42 SUM : 120\n"
            "rocksdb.not.asked COUNT : 9\n")
    assert ss.parse_statistics(text) == {
        "rocksdb.block.cache.miss": 17.0, "rocksdb.number.keys.read": 42.0,
        "rocksdb.db.get.micros": 42.0, "rocksdb.db.get.micros.sum": 120.0}
