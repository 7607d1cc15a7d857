"""The RocksDB store's barrier split (jstormpy/state_store.py): the task thread only seals its
write caches; the snapshot thread writes them to RocksDB and takes the native checkpoint.
A write after the barrier never reaches that checkpoint; reads see sealed writes; a failed
apply fails the checkpoint and loses nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import jstormpy.state_store as ss
from jstormpy.api.errors import CheckpointError
from jstormpy.state_store import RocksDBStore, SealState, Stamped
from tests.manual_clock import Clock

MAX_P = 128



def checkpointed(frozen: Any, name: str, ttl_ms: int | None = None) -> dict[Any, Any]:
    return dict(frozen.state(name, ttl_ms).items())


def test_writes_after_the_barrier_stay_out_of_its_checkpoint(tmp_path: Path,
                                                             monkeypatch: Any) -> None:
    monkeypatch.setattr(ss, "WRITE_CACHE_ENTRIES", 100)
    clock = Clock(1_000_000.0)
    st = RocksDBStore(tmp_path / "task-1", MAX_P, clock=clock)
    d: Any = st.open("s", None, None)
    ttl: Any = st.open("t", 1000, None)
    for i in range(150):  # 100 on disk, 50 cached
        d[i] = i
    del d[3]  # on disk: the deletion is cached
    ttl["x"] = "stamped"
    frozen = st.freeze()
    assert st.pending() and not frozen.path.exists()
    # sealed, not applied: reads see them, the caches are empty
    assert not d.cache and d[149] == 149 and 3 not in d and ttl["x"] == "stamped"
    d[0] = "after"
    d[149] = "after"
    for i in range(1000, 1500):  # fills the cache past its size: it grows, no write
        d[i] = i
    del d[5]
    assert d.cf.get(ss.db_key(1000, MAX_P)) is None and d.cf.get(ss.db_key(149, MAX_P)) is None
    assert d[0] == "after" and d[149] == "after" and 5 not in d
    worker = threading.Thread(target=frozen.materialise)  # the snapshot thread's part
    worker.start()
    worker.join(60)
    assert frozen.sealed is not None and frozen.sealed.state is SealState.APPLIED
    assert checkpointed(frozen, "s") == {i: i for i in range(150) if i != 3}
    assert checkpointed(frozen, "t", 1000) == {"x": Stamped(clock.now, "stamped")}
    frozen.release()
    assert not st.sealed and not st.pending()
    expected = {i: i for i in range(150) if i not in (3, 5)} | {0: "after", 149: "after"}
    expected |= {i: i for i in range(1000, 1500)}
    assert dict(d.items()) == expected and len(d) == len(expected)
    nxt = st.freeze()  # the next barrier has the writes made after the first one
    nxt.materialise()
    assert checkpointed(nxt, "s") == expected
    nxt.release()
    st.close()


def test_a_full_cache_waits_for_the_pending_apply_and_counts_it(tmp_path: Path,
                                                                monkeypatch: Any) -> None:
    monkeypatch.setattr(ss, "WRITE_CACHE_ENTRIES", 10)
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("s", None, None)
    d["before"] = 1
    frozen = st.freeze()
    assert frozen.sealed is not None
    writer_done = threading.Event()

    def task() -> None:
        for i in range(10 * ss.WRITE_CACHE_GROWTH + 5):  # past the grown bound: waits
            d[i] = i
        writer_done.set()

    t = threading.Thread(target=task, name="task")
    t.start()
    assert not writer_done.wait(0.5)  # stuck until the barrier's apply is done
    frozen.materialise()
    t.join(30)
    assert writer_done.is_set() and frozen.sealed.stall_ms > 0 and st.stall_ms > 0
    assert checkpointed(frozen, "s") == {"before": 1}
    frozen.release()
    assert len(d) == 10 * ss.WRITE_CACHE_GROWTH + 6
    st.close()


def test_a_failed_apply_fails_the_checkpoint_and_loses_no_write(tmp_path: Path) -> None:
    """A full disk (a small tmpfs filled with ballast, the disk_full chaos fault's) while
    the snapshot thread writes a barrier's sealed writes: that checkpoint fails, the writes
    stay readable, and once there is space they are in the next checkpoint."""
    from jstormpy.testing.chaos.disk import FullDisk

    disk = FullDisk(tmp_path / "stores")
    if not disk.mounted:
        pytest.skip("needs root to mount a tmpfs")
    try:
        st = RocksDBStore(tmp_path / "stores" / "task-1", MAX_P)
        d: Any = st.open("s", None, None)
        d["a"] = 1
        first = st.freeze()
        first.materialise()
        first.release()
        payload = "v" * 4096
        for i in range(3000):  # 12 MB: more than the disk holds once it is full
            d[i] = payload
        disk.fill()
        frozen = st.freeze()
        with pytest.raises(CheckpointError, match="native RocksDB checkpoint failed"):
            frozen.materialise()
        frozen.release()
        assert d["a"] == 1 and d[2999] == payload and d[0] == payload  # nothing lost
        d["b"] = 2
        disk.free()
        nxt = st.freeze()  # reopens the database and writes what the failure left
        nxt.materialise()
        assert checkpointed(nxt, "s") == {"a": 1, "b": 2} | {i: payload for i in range(3000)}
        nxt.release()
        st.close()
    finally:
        disk.release()


def test_a_sealed_value_mutated_after_the_barrier_stays_as_it_was(tmp_path: Path) -> None:
    """``v = d[k]; v.append(x); d[k] = v`` after the barrier, on an entry sealed at it:
    the read is a copy, so the checkpoint keeps the barrier's value."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("s", None, None)
    ttl: Any = st.open("t", 60_000, None)
    d["buf"] = [1, 2]
    ttl["buf"] = {"a": 1}
    frozen = st.freeze()
    v = d["buf"]
    v.append(3)
    d["buf"] = v
    w = ttl["buf"]
    w["b"] = 2
    ttl["buf"] = w
    frozen.materialise()
    assert checkpointed(frozen, "s") == {"buf": [1, 2]}
    assert checkpointed(frozen, "t", 60_000)["buf"].value == {"a": 1}
    frozen.release()
    assert d["buf"] == [1, 2, 3] and ttl["buf"] == {"a": 1, "b": 2}
    st.close()


def test_close_lets_a_pending_apply_finish_and_a_later_one_fails(tmp_path: Path,
                                                                  monkeypatch: Any) -> None:
    """Closing the store (a rollback, a shutdown) while the snapshot thread has a barrier
    to apply waits for it; a barrier the snapshot thread had not reached by then fails
    its checkpoint instead of writing to a closed database."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("s", None, None)
    d["a"] = 1
    first = st.freeze()
    snapshot_thread = threading.Thread(target=first.materialise)
    snapshot_thread.start()
    st.close()
    snapshot_thread.join(30)
    assert first.sealed is not None and first.sealed.state is SealState.APPLIED
    assert checkpointed(first, "s") == {"a": 1}
    first.release()

    monkeypatch.setattr(ss, "CLOSE_WAIT_S", 0.1)  # no snapshot thread will come
    st = RocksDBStore(tmp_path / "task-2", MAX_P)
    d = st.open("s", None, None)
    d["b"] = 2
    late = st.freeze()
    st.close()
    with pytest.raises(CheckpointError, match="closed"):
        late.materialise()
    late.release()
