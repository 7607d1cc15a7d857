"""A full dump (savepoints, ``incremental_checkpoints=False``) of a task's state reaches the
state backend as a stream: the snapshot thread holds a few chunks, not the whole dump."""

from __future__ import annotations

import pickle
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt
from jstormpy.api.errors import CorruptSnapshotError
from jstormpy.runtime import snapshots
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.changelog import load_task_snapshot
from jstormpy.state_store import RocksDBStore
from tests.fake_task_host import FakeTaskHost

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "snapshot-v1"
VALUE = b"v" * 320  # the reporter's value size


class BackendHost(FakeTaskHost):
    """The worker's write_snapshot: into a real state backend."""

    def __init__(self, backend: StateBackend) -> None:
        super().__init__()
        self.backend = backend

    def write_snapshot(self, checkpoint_id: int, task_id: int, data: Any,
                       refs: bytes | None = None, *, generation: int | None = None) -> str:
        gen = self.generation if generation is None else generation
        return self.backend.put_snapshot(checkpoint_id, task_id, data, gen, "1-a",
                                         refs=refs)


class Holder(Bolt):
    outputs = ("k",)


def rocksdb_executor(tmp_path: Path, host: FakeTaskHost, keys: int
                     ) -> tuple[TaskExecutor, RocksDBStore]:
    comp = Holder()
    store = RocksDBStore(tmp_path / "task-1", 128)
    comp.__dict__["_jstorm_state_store"] = store
    counts = comp.state("counts")
    for i in range(keys):
        counts[f"key-{i:08d}"] = VALUE
    store.flush()
    coll = OutputCollector(1, "holder", {"default": []}, [], lambda d, i: None)
    ex = TaskExecutor(1, "holder", "bolt", comp, coll, host)  # type: ignore[arg-type]
    return ex, store


@pytest.mark.parametrize("kind", ["file", "hdfs"])
def test_full_dump_of_rocksdb_state_is_uploaded_in_bounded_memory(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    """100k keys x 320 B (a 32 MB dump) in chunks of 2,000 keys (~0.7 MB): the snapshot
    thread's serialise + upload allocates a few chunks' worth, not the dump (twice).
    (hdfs: the WebHDFS server runs in this process; its allocations count too.)"""
    monkeypatch.setattr(snapshots, "CHUNK_KEYS", 2000)
    keys = 100_000
    if kind == "file":
        backend = open_backend(f"file://{tmp_path}/ckpt")
    else:
        server = request.getfixturevalue("webhdfs_server")
        backend = open_backend(f"hdfs://127.0.0.1:{server.port}/jstorm/ckpt")
    host = BackendHost(backend)
    ex, store = rocksdb_executor(tmp_path, host, keys)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        ex._take_snapshot(1, 0.0, emit_barrier=False)
        assert host.acked.wait(120), host.failures
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    ack = host.acks[0]
    extra = peak - base
    assert ack.size > 100_000 * 320
    # a chunk of 2,000 entries is ~0.7 MB pickled, ~1 MB as the dict it is pickled from
    assert extra < 8 << 20, f"the dump ({ack.size >> 20} MB) took {extra >> 20} MB of RAM"
    restored = load_task_snapshot(backend, ack.handle)["states"]["counts"]
    assert len(restored) == keys and restored["key-00000042"] == VALUE
    ex.snapshotter.close()  # type: ignore[union-attr]
    store.close()


def test_a_failed_dump_stores_nothing_and_the_checkpoint_is_declined(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the state fails half-way through the stream: no snapshot object appears
    (not even a partial one) and the task reports the checkpoint failed."""
    monkeypatch.setattr(snapshots, "CHUNK_KEYS", 100)
    backend = open_backend(f"file://{tmp_path}/ckpt")
    host = BackendHost(backend)
    ex, store = rocksdb_executor(tmp_path, host, 1000)
    real = snapshots.pickle.dumps
    calls = [0]

    def fail_on_the_fifth_chunk(obj: Any, protocol: int | None = None) -> bytes:
        calls[0] += 1
        if calls[0] == 5:
            raise OSError("disk read error")
        return real(obj, protocol=protocol)

    monkeypatch.setattr(snapshots.pickle, "dumps", fail_on_the_fifth_chunk)
    ex._take_snapshot(1, 0.0, emit_barrier=False)
    assert ex.snapshotter is not None and ex.snapshotter.wait_idle(30)
    monkeypatch.setattr(snapshots.pickle, "dumps", real)
    assert host.acks == [] and [f.checkpoint_id for f in host.failures] == [1]
    assert "disk read error" in host.failures[0].reason
    assert backend.list_objects("chk-") == []
    assert [p.name for p in (tmp_path / "ckpt").rglob("*") if p.is_file()] == []
    ex.snapshotter.close()
    store.close()


def test_a_truncated_or_corrupted_streamed_snapshot_is_refused_by_name(tmp_path: Path) -> None:
    backend = open_backend(f"file://{tmp_path}/ckpt")
    host = BackendHost(backend)
    ex, store = rocksdb_executor(tmp_path, host, 30_000)
    ex._take_snapshot(1, 0.0, emit_barrier=False)
    assert host.acked.wait(60), host.failures
    handle = host.acks[0].handle
    path = tmp_path / "ckpt" / handle
    whole = path.read_bytes()
    assert len(load_task_snapshot(backend, handle)["states"]["counts"]) == 30_000
    for cut in (len(whole) - 1, len(whole) - 16, len(whole) // 2, 20, 3):
        path.write_bytes(whole[:cut])
        with pytest.raises(CorruptSnapshotError, match=f"{handle}.*truncated"):
            backend.get_snapshot(handle)
    garbled = bytearray(whole)
    garbled[len(whole) // 2] ^= 0xFF
    path.write_bytes(bytes(garbled))
    with pytest.raises(CorruptSnapshotError, match=f"{handle}.*checksum mismatch"):
        backend.get_snapshot(handle)
    ex.snapshotter.close()  # type: ignore[union-attr]
    store.close()


def test_a_streamed_snapshot_loads_as_the_plain_snapshot_dict() -> None:
    """Whatever the states are named, and with or without snapshot-thread entries."""
    big = {f"k{i}": i for i in range(snapshots.CHUNK_KEYS * 2 + 3)}
    other = {i: (i, "x") for i in range(snapshots.CHUNK_KEYS // 2)}
    snap = {"states": {"zählung\udcff": big, 7: other, "empty": {}, "small": {"a": [1]}},
            "custom": {"pos": 3}}
    for extra in (None, {"incremental": {"chain": ["seg"]}}):
        view = snapshots.capture(snap)
        assert set(view.copies) == {"zählung\udcff", 7}
        view.extra = extra
        assert pickle.loads(snapshots.serialise(view)) == {**snap, **(extra or {})}


def test_a_snapshot_written_before_streaming_still_loads(tmp_path: Path) -> None:
    """tests/golden/snapshot-v1: a chunked full dump in the first envelope, written by
    the code before streamed dumps (seal_blob of the pickled ``_Assembled``)."""
    backend = open_backend(f"file://{tmp_path}/ckpt")
    handle = "chk-0000000001/task-00000-g0.snap"
    backend.put_object(handle, (GOLDEN / "task-00000-g0.snap").read_bytes())
    snap = pickle.loads(backend.get_snapshot(handle))
    assert snap == {"states": {"counts": {f"k{i}": i for i in range(50)},
                               "pairs": {i: (i, "x", None) for i in range(45)},
                               "small": {"a": 1}},
                    "custom": [1, 2], "watermark": 5.0,
                    "incremental": {"chain": [], "note": "golden"}}


def test_a_write_given_up_by_its_deadline_reads_no_more_of_the_released_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's backend gives up a call after ``state_backend_timeout_ms`` while the
    call goes on on its own thread: the task releases the RocksDB checkpoint the dump
    reads, so the abandoned write must stop at its next chunk (and store nothing)."""
    import threading
    from collections.abc import Iterable

    from jstormpy.api.errors import BackendTimeoutError, CheckpointError
    from jstormpy.state_backends.deadline import DeadlineBackend
    from jstormpy.state_backends.memory import MemoryBackend

    monkeypatch.setattr(snapshots, "CHUNK_KEYS", 100)
    stalled, resume, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[BaseException] = []

    class StallingBackend(MemoryBackend):
        def put_object_stream(self, key: str, chunks: Iterable[bytes]) -> None:
            try:
                pieces = iter(chunks)
                while len(next(pieces)) < 1000:  # up to the first chunk of entries
                    pass
                stalled.set()
                assert resume.wait(30)
                super().put_object_stream(key, pieces)
            except BaseException as exc:
                seen.append(exc)
                raise
            finally:
                done.set()

    inner = StallingBackend("memory://deadline-stream")
    host = BackendHost(DeadlineBackend(inner, timeout_ms=300))
    ex, store = rocksdb_executor(tmp_path, host, 1000)
    ex._take_snapshot(1, 0.0, emit_barrier=False)
    assert ex.snapshotter is not None and ex.snapshotter.wait_idle(30)
    assert stalled.is_set() and host.acks == []
    assert [f.checkpoint_id for f in host.failures] == [1]
    assert "did not answer" in host.failures[0].reason
    frozen = tmp_path / "task-1.frozen"
    assert not [p for p in frozen.iterdir() if p.is_dir()]  # released meanwhile
    resume.set()
    assert done.wait(30)
    assert len(seen) == 1 and isinstance(seen[0], CheckpointError)
    assert "given up" in str(seen[0])
    assert inner.list_objects("chk-") == []
    assert not isinstance(seen[0], BackendTimeoutError)
    ex.snapshotter.close()
    store.close()
