"""How a task database serves a state's point reads (issue 34: a read of a big state
costs what RocksDB must do, not what a cache that cannot help adds to it):

- only about one read in 16 (``READ_CACHE_ADMISSION``) adds the data block it read to the
  block cache, so one pass over cold keys does not churn the cache, while a key read
  often is still served from it;
- the SST files' bloom filters have ``BLOOM_BITS_PER_KEY`` bits a key, as the files'
  own properties report, so an absent key is rarely searched for in a file.

The counts are RocksDB's own (its statistics, through ``RocksDBStore.figures``)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import jstormpy.state_store as ss
from jstormpy.state_store import RocksDBStore
from tests.unit.rocksdb_options import options_section

MAX_P = 128
KEYS = 40_000


def flushed_store(path: Path) -> tuple[RocksDBStore, Any]:
    """A store whose state ``kv`` holds ``KEYS`` keys of ~300 bytes in SST files (none in
    the write cache or the memtables: every read goes to the files; no key filter in front
    of them: tests/unit/test_key_filter.py has that)."""
    st = RocksDBStore(path, MAX_P, key_filter=False)
    d: Any = st.open("kv", None, None)
    for i in range(KEYS):
        d[i] = f"{i:08d}" + "v" * 292
    st.flush()
    st.families["kv"].flush(True)
    return st, d


def delta(after: dict[str, float], before: dict[str, float], figure: str) -> float:
    return after[figure] - before[figure]


def test_one_pass_over_cold_keys_adds_few_blocks_to_the_cache(tmp_path: Path) -> None:
    st, d = flushed_store(tmp_path / "db")
    try:
        order = list(range(KEYS))
        random.Random(5).shuffle(order)
        before = st.figures()
        for i in order[:12_000]:
            assert d.get(i) == f"{i:08d}" + "v" * 292  # every read answered right
        after = st.figures()
        misses = delta(after, before, "block_cache_data_misses_total")
        adds = delta(after, before, "block_cache_data_adds_total")
        # ~3,300 blocks of 12 keys, each added to the cache by its first read when every
        # read added its block (then misses == adds, ~3,300); now a sixteenth of the
        # misses may add theirs
        assert misses > 1_000, (misses, adds)
        assert adds < 0.15 * misses, (misses, adds)
        assert adds > 0, (misses, adds)  # the cache is still filled, just not by all
    finally:
        st.close()


def test_a_key_read_often_is_served_from_the_cache(tmp_path: Path) -> None:
    st, d = flushed_store(tmp_path / "db")
    try:
        rng = random.Random(6)
        hot = rng.sample(range(KEYS), 20)
        for _ in range(100):  # warm: each hot key read 100 times, among cold reads
            for i in hot:
                assert d.get(i) == f"{i:08d}" + "v" * 292
            d.get(rng.randrange(KEYS))
        before = st.figures()
        for _ in range(50):
            for i in hot:
                d.get(i)
        after = st.figures()
        hits = delta(after, before, "block_cache_data_hits_total")
        misses = delta(after, before, "block_cache_data_misses_total")
        assert hits + misses >= 1_000 and hits >= 0.95 * (hits + misses), (hits, misses)
    finally:
        st.close()


def test_the_files_bloom_filters_have_the_stores_bits_a_key(tmp_path: Path) -> None:
    assert ss.BLOOM_BITS_PER_KEY == 16
    st, d = flushed_store(tmp_path / "db")
    try:
        assert options_section(st.path, "TableOptions/BlockBasedTable",
                               "s:kv")["filter_policy"] == "bloomfilter"
        # the files' own properties: the filter's bytes for the keys it was built over
        props = st.families["kv"].property_value("rocksdb.aggregated-table-properties")
        size = int(re.search(r"filter block size=(\d+)", props).group(1))
        entries = int(re.search(r"# entries for filter=(\d+)", props).group(1))
        assert entries == KEYS and 15.5 <= 8 * size / entries <= 16.5, props
        before = st.figures()
        for i in range(KEYS, KEYS + 20_000):
            assert d.get(i) is None
        after = st.figures()
        # an absent key's get probes the one file's filter: at 16 bits a key ~0.05 % say
        # "maybe" (at 10 bits ~1 %: ~200 of these 20,000)
        positives = delta(after, before, "bloom_positive_total")
        assert delta(after, before, "bloom_useful_total") + positives >= 20_000
        assert positives < 60, positives
    finally:
        st.close()


def test_state_reads_leave_the_users_random_numbers_alone(tmp_path: Path) -> None:
    """The admission's draw comes from the store's own generator: a bolt that seeds
    ``random`` gets the same numbers whether or not it reads state between them."""
    st, d = flushed_store(tmp_path / "db")
    try:
        random.seed(42)
        expected = [random.random() for _ in range(50)]
        random.seed(42)
        got = []
        for i in range(50):
            assert d.get(i * 7) is not None  # a read served from the files
            got.append(random.random())
        assert got == expected
    finally:
        st.close()
