"""State stores (jstormpy/state_store.py): the memory and RocksDB stores behave alike behind
``self.state(name)``, pickle to the same checkpoint format, and honour a TTL."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from jstormpy import Bolt, Config
from jstormpy.api.errors import CheckpointError, ConfigError
from jstormpy.keygroups import key_group
from jstormpy.state_store import (
    MemoryStore,
    RocksDBStore,
    RocksState,
    Stamped,
    decode,
    decode_entry,
    encode,
    encode_stamped,
    open_store,
)
from tests.manual_clock import Clock

MAX_P = 128


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: Any, tmp_path: Any) -> Any:
    s = open_store(request.param, tmp_path / "db", MAX_P)
    yield s
    s.close()


def test_config_validates_state_store() -> None:
    assert Config().state_store == "memory"
    assert Config(state_store="rocksdb", state_store_dir="/x").state_store == "rocksdb"
    with pytest.raises(ConfigError, match="state_store.*'memory', 'rocksdb'"):
        Config(state_store="leveldb")
    with pytest.raises(ConfigError, match="state_store_dir"):
        Config(state_store_dir=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("obj", ["", "wörd", b"\x00\xff", 0, -1, 2**63 - 1, 2**70, 1.5,
                                 float("inf"), None, True, (1, "a"), [1, 2], {"a": 1}])
def test_codec_round_trips(obj: Any) -> None:
    back = decode(encode(obj))
    assert back == obj and type(back) is type(obj)
    assert decode_entry(encode_stamped(12.5, obj)) == Stamped(12.5, obj)


def test_same_mapping_behaviour_in_both_stores(store: Any) -> None:
    d = store.open("counts", None, None)
    assert not d and len(d) == 0 and "a" not in d and d.get("a") is None and d.get("a", 7) == 7
    with pytest.raises(KeyError):
        _ = d["a"]
    with pytest.raises(KeyError):
        del d["a"]
    d["a"] = 1
    assert d
    d[("k", 2)] = {"nested": [1, 2]}
    d[3] = "three"
    d["a"] = d["a"] + 1
    assert d["a"] == 2 and d[("k", 2)] == {"nested": [1, 2]} and d[3] == "three"
    assert "a" in d and 3 in d and len(d) == 3
    assert set(d) == {"a", ("k", 2), 3}
    assert dict(d.items()) == {"a": 2, ("k", 2): {"nested": [1, 2]}, 3: "three"}
    assert sorted(map(str, d.values())) == ["2", "three", "{'nested': [1, 2]}"]
    assert ("a", 2) in d.items() and ("a", 3) not in d.items() and len(d.items()) == 3
    del d[3]
    assert 3 not in d and len(d) == 2
    assert d.pop("a") == 2 and d.setdefault("b", 5) == 5 and d["b"] == 5
    d.update({"c": 1.5})
    assert sorted(map(str, d)) == ["('k', 2)", "b", "c"]
    # two named states do not see each other's keys
    other = store.open("other", None, None)
    other["b"] = "x"
    assert d["b"] == 5 and other["b"] == "x" and len(other) == 1


def test_equal_keys_are_one_key(store: Any) -> None:
    d = store.open("s", None, None)
    d[1] = "int"
    d[1.0] = "float"
    d[True] = "bool"
    assert len(d) == 1 and d[1] == "bool"


def test_pickles_as_the_plain_dict_a_checkpoint_stores(store: Any) -> None:
    d = store.open("s", None, None)
    for i in range(1000):
        d[f"k{i}"] = i
    restored = pickle.loads(pickle.dumps({"states": {"s": d}}))
    assert type(restored["states"]["s"]) is dict
    assert restored["states"]["s"] == {f"k{i}": i for i in range(1000)}


def test_rocksdb_discard_deletes_without_a_read(tmp_path: Any) -> None:
    st = RocksDBStore(tmp_path / "t", MAX_P)
    d = st.open("s", None, None)
    assert isinstance(d, RocksState)
    for i in range(10):
        d[i] = i
    st.flush()
    d.discard(3)  # in the database
    d[11] = 11
    d.discard(11)  # in the write cache only
    d.discard(99)  # absent: no KeyError
    st.flush()
    assert sorted(d) == [0, 1, 2, 4, 5, 6, 7, 8, 9] and 3 not in d and 11 not in d
    st.close()


def test_rocksdb_restore_writes_a_fresh_database(tmp_path: Any) -> None:
    first = RocksDBStore(tmp_path / "t", MAX_P)
    d = first.open("s", None, None)
    d["stale"] = 1
    first.close()
    # a restore: the old files are gone, the checkpoint's entries are in
    second = RocksDBStore(tmp_path / "t", MAX_P)
    states: dict[str, Any] = {"s": {f"k{i}": i for i in range(25_000)}, "t": {}}
    second.adopt(states)
    s = states["s"]
    assert "stale" not in s and len(s) == 25_000 and s["k24999"] == 24999
    assert len(states["t"]) == 0
    second.close()


def test_rocksdb_keys_are_key_group_major(tmp_path: Any) -> None:
    st = RocksDBStore(tmp_path / "t", MAX_P)
    d: Any = st.open("s", None, None)
    keys = [f"user-{i}" for i in range(500)]
    for k in keys:
        d[k] = 1
    d.flush()  # out of the write cache
    groups = [int.from_bytes(raw[:2], "big") for raw in d.cf.keys()]
    assert groups == sorted(groups)  # a task's key groups are contiguous ranges
    assert sorted(groups) == sorted(key_group(k, MAX_P) for k in keys)
    st.close()


def test_a_read_finds_every_kind_of_key_the_write_path_stored(tmp_path: Any) -> None:
    """A read builds its key inline for int and str keys (db_key) and a write cache's
    flush in batches (key_groups_of): both must name the same bytes, or a read misses."""
    st = RocksDBStore(tmp_path / "t", MAX_P)
    d: Any = st.open("s", None, None)
    keys: list[Any] = [0, -1, 2**63 - 1, -2**63, 2**63, 2**70, "", "é", "\ud800", "x" * 300,
                       b"raw", 1.5, (1, "a"), None]
    for i, k in enumerate(keys):
        d[k] = i
    d.flush()  # out of the write cache: the reads below go to RocksDB
    assert [d.get(k) for k in keys] == list(range(len(keys)))
    d[1] = "one"
    d.flush()
    assert d.get(True) == d.get(1.0) == "one"  # keys equal in a dict: one entry
    st.close()


def test_component_state_uses_the_installed_store(tmp_path: Any) -> None:
    bolt = Bolt()
    plain = bolt.state("s")
    assert type(plain) is dict and bolt.state("s") is plain
    rb = Bolt()
    st = RocksDBStore(tmp_path / "t", MAX_P)
    rb.__dict__["_jstorm_state_store"] = st
    s = rb.state("s")
    s["k"] = 1
    assert rb.state("s") is s and rb.state("s")["k"] == 1
    with pytest.raises(ConfigError, match="ttl_ms"):
        rb.state("s", ttl_ms=0)
    st.close()


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_ttl_entries_expire_at_once_and_are_swept(kind: str, tmp_path: Any) -> None:
    clock = Clock(1_000_000.0)
    st = MemoryStore(clock=clock) if kind == "memory" else \
        RocksDBStore(tmp_path / "t", MAX_P, clock=clock)
    d: Any = st.open("s", 1000, None)
    d["old"] = 1
    clock.now += 600
    d["new"] = 2
    clock.now += 500  # "old" written 1100 ms ago: gone at once; "new" 500 ms ago
    assert "old" not in d and d.get("old") is None and d["new"] == 2
    with pytest.raises(KeyError):
        _ = d["old"]
    assert set(d) == {"new"} and len(d) == 1
    d["old"] = 3  # a write restarts its life
    clock.now += 700
    assert d["old"] == 3 and "new" not in d
    # the sweep removed the expired entries from storage, not only from view
    clock.now += 2000
    assert not d and len(d) == 0
    raw = d.entries if kind == "memory" else list(d.cf.keys())
    assert len(raw) == 0
    st.close()


@pytest.mark.parametrize("src,dst", [("memory", "rocksdb"), ("rocksdb", "memory"),
                                     ("rocksdb", "rocksdb"), ("memory", "memory")])
def test_ttl_survives_a_restore_without_resurrection(src: str, dst: str, tmp_path: Any) -> None:
    clock = Clock(1_000_000.0)

    def make(kind: str, name: str) -> Any:
        return MemoryStore(clock=clock) if kind == "memory" else \
            RocksDBStore(tmp_path / name, MAX_P, clock=clock)

    a = make(src, "a")
    d = a.open("s", 1000, None)
    d["early"] = "e"
    clock.now += 800
    d["late"] = "l"
    snap = pickle.loads(pickle.dumps({"s": d}))  # the checkpoint's form
    assert set(snap["s"]) == {"early", "late"}
    assert all(type(v) is Stamped for v in snap["s"].values())
    a.close()
    clock.now += 300  # "early" expired while the job was down
    b = make(dst, "b")
    b.adopt(snap)
    restored = b.open("s", 1000, snap["s"])
    assert "early" not in restored and restored["late"] == "l" and len(restored) == 1
    b.close()


@pytest.mark.parametrize("incremental", [False, True])
def test_ttl_state_through_a_task_snapshot_and_restore(incremental: bool) -> None:
    """The worker's path: capture + serialise at the barrier, restore_component (and the
    incremental keeper) on the new task, then ``state(name, ttl_ms)`` again."""
    from jstormpy.runtime.incremental import make_incremental
    from jstormpy.runtime.snapshots import capture, serialise
    from jstormpy.runtime.task_wiring import restore_component

    clock = Clock(1_000_000.0)
    conf = Config(incremental_checkpoints=incremental)
    bolt = Bolt()
    bolt.__dict__["_jstorm_state_store"] = MemoryStore(clock=clock)
    make_incremental(bolt, 1, range(0, MAX_P), MAX_P, conf, None)
    s = bolt.state("s", ttl_ms=1000)
    for i in range(10_000):
        s[i] = ("v", i)
    clock.now += 900
    s["late"] = 1
    snap = {"states": bolt.__dict__["_jstorm_states"], "max_parallelism": MAX_P}
    data = serialise(capture(snap))
    clock.now += 200  # the 10 000 early entries expire while the job is down
    fresh = Bolt()
    restore_component(fresh, pickle.loads(data), MAX_P, "test")
    make_incremental(fresh, 1, range(0, MAX_P), MAX_P, conf, None)
    fresh.__dict__["_jstorm_state_store"] = MemoryStore(clock=clock)
    restored: Any = fresh.state("s", ttl_ms=1000)
    assert dict(restored.items()) == {"late": 1}
    assert len(restored.entries) == 1  # swept, not only hidden
    assert type(restored.entries) is dict


def test_barrier_snapshot_of_rocksdb_state_is_a_native_checkpoint(tmp_path: Any) -> None:
    """capture() seals the write caches on the task thread; the snapshot thread's
    serialise applies them and takes the RocksDB checkpoint; writes after the barrier do
    not reach the snapshot, which loads as the plain dicts; release deletes the copy."""
    from jstormpy.runtime.snapshots import capture, release, serialise

    clock = Clock(1_000_000.0)
    st = RocksDBStore(tmp_path / "task-1", MAX_P, clock=clock)
    counts: Any = st.open("counts", None, None)
    ttl: Any = st.open("recent", 1000, None)
    for i in range(30_000):
        counts[f"k{i}"] = i
    ttl["old"] = 1
    clock.now += 999
    ttl["new"] = 2
    clock.now += 1  # "old" expires at the barrier
    view = capture({"states": {"counts": counts, "recent": ttl, "plain": {"a": 1}}})
    assert view.frozen is not None and not view.frozen.path.exists()  # not taken yet
    counts["k0"] = "after the barrier"
    del counts["k1"]
    counts["extra"] = 1
    snap = pickle.loads(serialise(view))
    assert view.frozen.path.is_dir()
    release(view)
    assert not view.frozen and not list((tmp_path / "task-1.frozen").iterdir())
    assert snap["states"]["counts"] == {f"k{i}": i for i in range(30_000)}
    assert snap["states"]["recent"] == {"new": Stamped(clock.now - 1, 2)}
    assert snap["states"]["plain"] == {"a": 1}
    st.close()


def test_failed_native_checkpoint_fails_the_snapshot_and_loses_nothing(tmp_path: Any) -> None:
    """A native checkpoint that cannot be written (here: its directory is a file, as a
    full disk would fail it) fails that snapshot on the snapshot thread; the sealed writes
    stay readable and are in the next checkpoint."""
    from jstormpy.runtime.snapshots import capture, release, serialise

    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("s", None, None)
    d["a"] = 1
    (tmp_path / "task-1.frozen").write_text("in the way")
    view = capture({"states": {"s": d, "t": st.open("t", None, None)}})
    with pytest.raises(CheckpointError, match="native RocksDB checkpoint failed"):
        serialise(view)
    release(view)
    assert d["a"] == 1
    d["b"] = 2
    (tmp_path / "task-1.frozen").unlink()
    view = capture({"states": {"s": d}})
    assert pickle.loads(serialise(view))["states"] == {"s": {"a": 1, "b": 2}}
    release(view)
    st.close()


def test_rocksdb_write_cache_is_bounded_and_reads_through(tmp_path: Any,
                                                          monkeypatch: Any) -> None:
    import jstormpy.state_store as ss

    monkeypatch.setattr(ss, "WRITE_CACHE_ENTRIES", 100)
    st = RocksDBStore(tmp_path / "t", MAX_P)
    d: Any = st.open("s", None, None)
    for i in range(250):
        d[i] = i
        assert len(d.cache) < 100  # flushed in batches as it fills
    on_disk = sum(1 for _ in d.cf.keys())
    assert on_disk >= 200 and on_disk + len(d.cache) >= 250
    del d[0]  # on disk only: the deletion is cached
    d[249] = "new"  # maybe cached, maybe on disk
    assert 0 not in d and d[249] == "new" and d[1] == 1 and len(d) == 249
    again: Any = st.open("s", None, d)  # another view of the state shares the cache
    assert again.cache is d.cache and 0 not in again
    st.flush()
    assert not d.cache and sum(1 for _ in d.cf.keys()) == 249
    st.close()


@pytest.mark.slow
def test_state_store_bench_runs_small() -> None:
    """bench/state_store_bench.py works at a small size (figures: docs/performance.md)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "bench" / "state_store_bench.py"
    done = subprocess.run([sys.executable, str(script), "--keys", "3000", "--updates", "5000",
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON "))
    stores = json.loads(line[len("BENCH_JSON "):])["stores"]
    assert set(stores) == {"memory", "rocksdb"}
    assert stores["rocksdb"]["disk_bytes"] > 0 and stores["memory"]["disk_bytes"] == 0
    assert all(r["update_ops_s"] > 0 and r["snapshot_bytes"] > 3000 for r in stores.values())
