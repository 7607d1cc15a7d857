"""The key filter of a RocksDB state (``jstormpy/key_filter.py``, ``jstormpy/state_keys.py``):
a read of a key never written skips RocksDB, and no read ever misses a key RocksDB holds —
through write caches, a barrier's sealed writes, growth while writes go on, a reopen after
a write error, a native restore whose filter is still being filled, and a failed fill."""

from __future__ import annotations

import importlib.util
import pickle
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jstormpy import key_filter, state_keys
from jstormpy.key_filter import KeyFilter
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.rocksdb_files import download_checkpoint
from jstormpy.state_store import RocksDBStore
from tests.unit.test_rocksdb_files import checkpoint, native_store

MAX_P = 128
ROOT = Path(__file__).resolve().parents[2]


def _source_module() -> Any:
    """The filter's module run as source (what ``JSTORM_PURE_PYTHON=1`` runs)."""
    spec = importlib.util.spec_from_file_location("key_filter_source",
                                                  ROOT / "jstormpy" / "key_filter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gets(store: RocksDBStore) -> float:
    return store.figures()["gets_total"]


def test_no_false_negative_and_few_false_maybes_at_and_past_capacity() -> None:
    keys = [b"\x00\x07s" + str(i).encode() for i in range(60_000)]
    strangers = [b"\x00\x07s-" + str(i).encode() for i in range(20_000)]
    f = KeyFilter(20_000)
    for k in keys[:20_000]:
        f.add(k)
    assert all(k in f for k in keys[:20_000])
    assert not f.full and 19_600 <= f.count <= 20_000  # short by its own false maybes
    at_capacity = sum(k in f for k in strangers) / len(strangers)
    assert at_capacity < 0.03
    f.add_all(keys[20_000:])  # three times its capacity: still no false negative
    assert f.full and all(k in f for k in keys)
    assert sum(k in f for k in strangers) / len(strangers) > at_capacity
    with pytest.raises(ValueError, match="capacity must be positive"):
        KeyFilter(0)


def test_the_source_gives_the_compiled_answers() -> None:
    """Compiled or run as source, the same keys set the same bits (the same 64- and
    32-bit arithmetic): every answer is the same."""
    source = _source_module()
    assert not source.COMPILED
    keys = [f"key-{i}".encode() for i in range(3_000)]
    a, b = KeyFilter(1_000), source.KeyFilter(1_000)
    assert [a.add(k) for k in keys] == [b.add(k) for k in keys]
    probes = [f"other-{i}".encode() for i in range(5_000)] + keys
    assert [k in a for k in probes] == [k in b for k in probes]
    assert a.count == b.count and a.nbytes == b.nbytes


def test_reads_of_keys_never_written_skip_rocksdb(tmp_path: Path) -> None:
    st = RocksDBStore(tmp_path / "t", MAX_P, key_filter=True)
    d: Any = st.open("kv", None, None)
    for i in range(5_000):
        d[f"k{i}"] = i
    st.flush()
    before = _gets(st)
    assert all(d.get(f"absent{i}") is None for i in range(5_000))
    absent_gets = _gets(st) - before
    assert absent_gets < 5_000 * 0.03  # only the filter's false maybes read RocksDB
    assert all(d[f"k{i}"] == i for i in range(5_000))  # present: read from RocksDB
    assert _gets(st) - before - absent_gets == 5_000
    assert st.figures()["key_filter_bytes"] > 0
    st.close()

    off = RocksDBStore(tmp_path / "u", MAX_P, key_filter=False)
    e: Any = off.open("kv", None, None)
    e["a"] = 1
    off.flush()
    assert e.get("b") is None and _gets(off) == 1 and not off.state_keys
    assert off.figures()["key_filter_bytes"] == 0
    off.close()


def test_the_last_level_keeps_no_bloom_filter_behind_a_key_filter(tmp_path: Path) -> None:
    """Behind a key filter RocksDB sees almost only keys it holds, so its last level (most
    of the keys) builds no bloom filter: the table readers' memory is a fraction of what
    the same keys take without one, and every read still finds what was written."""
    memory = {}
    for on in (True, False):
        st = RocksDBStore(tmp_path / str(on), MAX_P, key_filter=on)
        d: Any = st.open("kv", None, None)
        for i in range(40_000):
            d[f"k{i}"] = i
        st.flush()
        st.families["kv"].compact_range(None, None)  # one sorted run, in the last level
        memory[on] = st.figures()["table_readers_bytes"]
        assert all(d[f"k{i}"] == i for i in range(0, 40_000, 3))
        assert all(d.get(f"absent{i}") is None for i in range(2_000))
        st.close()
    # 16 bits a key of filter without the key filter (80 KB); with it the index alone
    assert memory[True] < memory[False] / 3, memory


def test_the_environment_turns_it_off_or_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(state_keys.ENV, "0")
    assert not state_keys.enabled()
    monkeypatch.setenv(state_keys.ENV, "1")
    assert state_keys.enabled()
    monkeypatch.delenv(state_keys.ENV)
    assert state_keys.enabled() is key_filter.COMPILED


def tiny(path: Path) -> RocksDBStore:
    """A store whose filters start at 64 keys: a few thousand writes grow them several
    times."""
    return RocksDBStore(path, MAX_P, key_filter=True, key_filter_capacity=64)


def written(st: RocksDBStore, keys: range) -> Any:
    """State ``kv`` of ``st`` with ``key -> key`` for every key of ``keys``, flushed to
    RocksDB."""
    d: Any = st.open("kv", None, None)
    for i in keys:
        d[i] = i
    st.flush()
    return d


def test_a_fill_reads_every_key_across_its_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill reads its scan in chunks, an iterator each, from the last key read on: every
    key is added, also where a chunk's last key was deleted before the next chunk."""
    monkeypatch.setattr(state_keys, "FILL_CHUNK", 3)
    stored = sorted(f"k{i:03d}".encode() for i in range(100))
    opened: list[bytes | None] = []

    def scan(after: bytes | None) -> list[bytes]:
        opened.append(after)
        if len(opened) == 3:
            assert after is not None
            stored.remove(after)  # deleted meanwhile: this chunk starts past it
        return [k for k in stored if after is None or k >= after]

    keys = state_keys.StateKeys("kv", scan, restored_keys=100)
    assert keys.wait_filled(30) and keys.trusted is not None and keys.fills == 1
    assert len(stored) == 99 and all(k in keys.trusted for k in stored)
    assert len(opened) > 30 and opened[0] is None  # chunks of 3, an iterator each


def test_growth_while_writes_go_on_loses_no_key(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Random writes, deletes, flushes, barriers (sealed writes applied on another thread)
    and reads against a dict: the filter grows from 64 keys while the writes go on (its
    fills read 7 keys an iterator), and no read misses what the dict holds."""
    monkeypatch.setattr(state_keys, "FILL_CHUNK", 7)
    st = tiny(tmp_path / "t")
    d: Any = st.open("kv", None, None)
    model: dict[Any, int] = {}
    rng = random.Random(34)
    appliers: list[threading.Thread] = []
    for step in range(40_000):
        op = rng.random()
        key: Any = rng.choice((rng.randrange(6_000), f"s{rng.randrange(6_000)}",
                               (rng.randrange(50), "t")))
        if op < 0.55:
            model[key] = d[key] = step
        elif op < 0.65:
            model.pop(key, None)
            d.discard(key)
        elif op < 0.999:
            assert d.get(key) == model.get(key), (step, key)
        elif rng.random() < 0.5:
            st.flush()
        else:  # a barrier: the snapshot thread applies its sealed writes meanwhile
            sealed = st.freeze().sealed
            t = threading.Thread(target=st.apply, args=(sealed, None))
            t.start()
            appliers.append(t)
    for t in appliers:
        t.join()
    keys = st.state_keys["kv"]
    assert keys.wait_filled(30)
    assert keys.fills >= 3 and keys.trusted is not None and keys.trusted.capacity >= 64 * 64
    assert all(d.get(k) == v for k, v in model.items())
    st.flush()
    assert sorted(map(repr, d)) == sorted(map(repr, model))
    assert sorted(map(repr, d.keys())) == sorted(map(repr, model.keys()))  # still a mapping
    st.close()


def test_a_reopen_after_a_write_error_keeps_every_key(tmp_path: Path) -> None:
    st = tiny(tmp_path / "t")
    d = written(st, range(3_000))
    st.reopen()  # stops a running fill, resumes it on the new handle
    for i in range(3_000, 6_000):
        d[i] = i
    st.flush()
    assert st.state_keys["kv"].wait_filled(30)
    assert all(d[i] == i for i in range(6_000))
    st.close()


def test_a_fill_that_fails_leaves_reads_correct(tmp_path: Path) -> None:
    st = tiny(tmp_path / "t")
    d: Any = st.open("kv", None, None)
    keys = st.state_keys["kv"]

    def broken(after: bytes | None) -> Any:
        raise OSError("the scan broke")

    keys.scan = broken
    for i in range(2_000):
        d[i] = i
    st.flush()
    assert keys.wait_filled(30)
    assert keys.fills == 0 and keys.trusted is not None and keys.trusted.full
    assert all(d[i] == i for i in range(2_000)) and d.get(-1) is None
    st.close()


def test_a_native_restore_reads_rocksdb_until_its_filter_is_filled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = open_backend(f"file://{tmp_path / 'ckpt'}")
    store = native_store(tmp_path / "db")
    counts: Any = store.open("counts", None, None)
    for i in range(20_000):
        counts[f"k{i}"] = i
    handle, _ = checkpoint(backend, store, {"counts": counts}, 1)
    store.close()
    entry = pickle.loads(backend.get_snapshot(handle))["rocksdb"]

    gate = threading.Event()  # holds the fill's scan back until the test lets it go
    real = RocksDBStore._scanner

    def gated(self: RocksDBStore, name: str) -> Any:
        scan = real(self, name)

        def held(after: bytes | None) -> Iterator[bytes]:
            gate.wait(30)
            yield from scan(after)
        return held
    monkeypatch.setattr(RocksDBStore, "_scanner", gated)
    monkeypatch.setenv(state_keys.ENV, "1")  # on even where it runs as source

    restored = native_store(tmp_path / "db2")
    assert restored.key_filter
    got = download_checkpoint(backend, entry, restored.path, "test")
    states = restored.open_restored(entry["states"], got.files, entry["crc32"])
    keys = restored.state_keys["counts"]
    r: Any = states["counts"]
    # before the fill is through, reads go to RocksDB and find every key
    assert keys.trusted is None and keys.filling is not None
    assert all(r[f"k{i}"] == i for i in range(0, 20_000, 7))
    r["new"] = -1  # a write meanwhile goes into the filter being filled
    restored.flush()
    gate.set()
    assert keys.wait_filled(30) and keys.trusted is not None and keys.fills == 1
    assert keys.trusted.capacity >= 2 * 20_000 * 0.9  # sized from RocksDB's estimate
    before = _gets(restored)
    assert all(r.get(f"absent{i}") is None for i in range(2_000))
    assert _gets(restored) - before < 2_000 * 0.03
    assert all(r[f"k{i}"] == i for i in range(20_000)) and r["new"] == -1
    restored.close()
    backend.close()


def test_close_stops_a_running_fill(tmp_path: Path) -> None:
    st = tiny(tmp_path / "t")
    written(st, range(50_000))
    keys = st.state_keys["kv"]
    st.close()  # with or without a fill running: it returns, and the fill is over
    assert keys.thread is None or not keys.thread.is_alive()
    assert keys.filling is None
