"""One contract suite for every state backend: memory, file, hdfs (WebHDFS), hbase, and
the file backend on the simulator's filesystem (``jstorm simulate`` runs the real backend
on it: it must be the same backend there)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import (
    BackendError,
    CorruptSnapshotError,
    ObjectExistsError,
    SnapshotNotFoundError,
)
from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.state_backends.base import seal_blob
from jstormpy.state_backends.file import FileBackend
from jstormpy.testing.simulation.filesystem import SimDisk, SimFilesystem
from jstormpy.testing.simulation.world import World

RETRIES = 2
BACKOFF = 0.05


@dataclass
class Env:
    backend: StateBackend
    server: Any | None  # has stop()/start() when the backend is remote
    reopen: Callable[[], StateBackend]  # another client of the same store (own connection)


@pytest.fixture(params=["memory", "file", "hdfs", "hbase", "file-simulated"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    kind = request.param
    server: Any | None = None
    options: dict[str, Any] = {}
    if kind == "memory":
        uri = f"memory://contract-{uuid.uuid4().hex}"
    elif kind == "file":
        uri = f"file://{tmp_path}/ckpt"
    elif kind == "file-simulated":  # no faults: the port must behave as the real one
        disk = SimDisk()
        world = World(0)

        def reopen() -> StateBackend:
            return FileBackend("file:///ckpt", SimFilesystem(disk, world, None, "/ckpt"))
        backend = reopen()
        yield Env(backend, None, reopen)
        return
    elif kind == "hdfs":
        server = request.getfixturevalue("webhdfs_server")
        uri = f"hdfs://127.0.0.1:{server.port}/jstorm/ckpt"
        options = {"retries": RETRIES, "backoff_s": BACKOFF, "timeout_s": 5}
    else:
        server = request.getfixturevalue("hbase_server")
        uri = f"hbase://127.0.0.1:{server.port}/jstorm_ckpt"
        options = {"retries": RETRIES, "backoff_s": BACKOFF, "timeout_ms": 5000,
                   "chunk_bytes": 256 * 1024}
    backend = open_backend(uri, **options)
    yield Env(backend, server, lambda: open_backend(uri, **options))
    backend.close()


def test_put_get_snapshot(env: Env) -> None:
    b = env.backend
    h1 = b.put_snapshot(1, 0, b"state-0")
    h2 = b.put_snapshot(1, 1, b"")
    assert b.get_snapshot(h1) == b"state-0"
    assert b.get_snapshot(h2) == b""
    assert sorted(b.list_objects("chk-0000000001/")) == sorted([h1, h2])


def test_a_zombie_of_the_same_generation_cannot_overwrite_a_snapshot(env: Env) -> None:
    # issue 13 hole 6: snapshot keys carry the fencing token (generation + attempt)
    b = env.backend
    live = b.put_snapshot(4, 2, b"live", generation=3, attempt="200-aa")
    zombie = b.put_snapshot(4, 2, b"zombie", generation=3, attempt="100-bb")
    assert live != zombie
    assert b.get_snapshot(live) == b"live"
    assert b.get_snapshot(zombie) == b"zombie"


def test_large_snapshot_is_chunked_and_round_trips(env: Env) -> None:
    data = os.urandom(5 * 1024 * 1024 + 123)
    h = env.backend.put_snapshot(7, 3, data)
    assert env.backend.get_snapshot(h) == data
    assert env.backend.list_objects("chk-0000000007/") == [h]  # chunk rows are not keys


class Pieces:
    """A re-iterable stream of pieces (a retried write starts it over), optionally failing
    after ``fail_after`` pieces."""

    def __init__(self, pieces: list[bytes], fail_after: int | None = None) -> None:
        self.pieces = pieces
        self.fail_after = fail_after

    def __iter__(self) -> Iterator[bytes]:
        for i, piece in enumerate(self.pieces):
            if i == self.fail_after:
                raise OSError("reading the state failed")
            yield piece


def test_streamed_snapshot_round_trips(env: Env) -> None:
    pieces = [os.urandom(300 * 1024 + i) for i in range(5)] + [b"", b"tail"]
    h = env.backend.put_snapshot(8, 1, Pieces(pieces), generation=2, attempt="9-z")
    assert h == "chk-0000000008/task-00001-g2-a9-z.snap"  # the fencing key, as for bytes
    assert env.backend.get_snapshot(h) == b"".join(pieces)
    assert env.backend.list_objects("chk-0000000008/") == [h]
    # a streamed snapshot replaces an older one under its key, and bytes replace it
    env.backend.put_snapshot(8, 1, Pieces([b"second"]), generation=2, attempt="9-z")
    assert env.backend.get_snapshot(h) == b"second"
    env.backend.put_snapshot(8, 1, b"third", generation=2, attempt="9-z")
    assert env.backend.get_snapshot(h) == b"third"


def test_a_stream_that_fails_part_way_stores_nothing(env: Env) -> None:
    b = env.backend
    with pytest.raises(OSError, match="reading the state failed"):
        b.put_snapshot(9, 0, Pieces([os.urandom(200 * 1024)] * 4, fail_after=2))
    assert b.list_objects("chk-") == []
    h = b.put_snapshot(9, 0, b"before")
    with pytest.raises(OSError, match="reading the state failed"):
        b.put_snapshot(9, 0, Pieces([os.urandom(200 * 1024)] * 4, fail_after=3))
    assert b.get_snapshot(h) == b"before"  # the old value, whole
    assert b.list_objects("chk-") == [h]


def test_streamed_full_dump_of_rocksdb_state_restores(env: Env, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot thread's full dump of a RocksDB state (several chunks), streamed,
    restores to the same state on every backend."""
    from jstormpy.runtime import snapshots
    from jstormpy.state_backends.changelog import load_task_snapshot
    from jstormpy.state_store import RocksDBStore

    monkeypatch.setattr(snapshots, "CHUNK_KEYS", 1000)
    store = RocksDBStore(tmp_path / "task-3", 128)
    counts: Any = store.open("counts", None, None)
    want = {f"k{i}": (i, os.urandom(100)) for i in range(3500)}
    counts.update(want)
    empty: Any = store.open("empty", None, None)
    view = snapshots.capture({"states": {"counts": counts, "empty": empty,
                                         "plain": {"a": 1}}, "custom": [1]})
    try:
        view.extra = {"note": "snapshot-thread entry"}
        h = env.backend.put_snapshot(3, 3, snapshots.serialise_stream(view), generation=1,
                                     attempt="7-q")
    finally:
        snapshots.release(view)
    snap = load_task_snapshot(env.reopen(), h)
    assert snap == {"states": {"counts": want, "empty": {}, "plain": {"a": 1}},
                    "custom": [1], "note": "snapshot-thread entry"}
    store.close()


def test_snapshot_overwrite_replaces(env: Env) -> None:
    b = env.backend
    h = b.put_snapshot(2, 0, os.urandom(3 * 1024 * 1024))
    b.put_snapshot(2, 0, b"small now")
    assert b.get_snapshot(h) == b"small now"
    assert b.list_objects("chk-0000000002/") == [h]


def test_metadata_and_list_completed(env: Env) -> None:
    b = env.backend
    b.put_snapshot(1, 0, b"a")
    b.create_metadata(1, {"tasks": 1})
    b.put_snapshot(2, 0, b"b")  # no metadata: incomplete
    b.create_metadata(3, {"tasks": 0})
    assert b.list_completed() == [1, 3]
    assert b.latest_completed() == 3
    assert b.read_metadata(1) == {"tasks": 1, "checkpoint_id": 1}


def test_a_commit_point_is_created_never_replaced(env: Env) -> None:
    # issue 27: a deposed Topology Master's late write never replaces a newer one's
    b = env.backend
    b.create_metadata(3, {"tasks": {}, "run": {"job_id": "j", "epoch": 2}})
    with pytest.raises(ObjectExistsError):
        b.create_metadata(3, {"tasks": {}, "run": {"job_id": "j", "epoch": 1}})
    assert b.read_metadata(3)["run"]["epoch"] == 2 and b.list_completed() == [3]
    assert b.list_objects("chk-0000000003/") == ["chk-0000000003/_metadata"]  # no temp left
    b.discard_checkpoint(3)
    b.create_metadata(3, {"tasks": {}, "run": {"job_id": "j", "epoch": 3}})
    assert b.read_metadata(3)["run"]["epoch"] == 3


def race_to_create(writers: list[StateBackend], cid: int,
                   metadata: Callable[[int], dict[str, Any]]) -> tuple[list[int], list[str]]:
    """Every writer calls create_metadata(cid) at once, each in its own thread; returns the
    indexes of the writers that succeeded and the ObjectExistsError messages of the others
    (any other error fails the test)."""
    start = threading.Barrier(len(writers))
    won: list[int] = []
    refused: list[str] = []
    failed: list[BaseException] = []

    def create(i: int, b: StateBackend) -> None:
        try:
            start.wait(timeout=10)
            b.create_metadata(cid, metadata(i))
            won.append(i)
        except ObjectExistsError as exc:
            refused.append(str(exc))
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failed.append(exc)

    threads = [threading.Thread(target=create, args=(i, b)) for i, b in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not failed, failed
    return won, refused


@pytest.mark.parametrize("size", [200, 700 * 1024], ids=["one-cell", "chunked"])
def test_concurrent_creators_of_one_commit_point_exactly_one_wins(env: Env, size: int) -> None:
    # issue 27: TMs (a deposed one and its successor) racing on one checkpoint id, each with
    # its own client: one commit point is created, every other creator is refused
    writers = [env.reopen() for _ in range(6)]
    pad = "x" * size  # "chunked": bigger than one HBase cell of this suite (256 KiB)
    try:
        for cid in range(1, 9):
            won, refused = race_to_create(
                writers, cid, lambda i: {"tasks": {}, "run": {"epoch": i}, "pad": pad})
            assert len(won) == 1 and len(refused) == len(writers) - 1
            assert all(f"chk-{cid:010d}/_metadata" in msg for msg in refused)
            meta = env.backend.read_metadata(cid)  # the winner's, whole
            assert meta["run"]["epoch"] == won[0] and meta["pad"] == pad
            assert env.backend.list_objects(f"chk-{cid:010d}/") == [f"chk-{cid:010d}/_metadata"]
        assert env.backend.list_completed() == list(range(1, 9))
    finally:
        for b in writers:
            b.close()


def test_garbage_collect_keeps_newest(env: Env) -> None:
    b = env.backend
    for cid in range(1, 6):
        b.put_snapshot(cid, 0, b"x%d" % cid)
        if cid != 4:
            b.create_metadata(cid, {})
    b.put_snapshot(9, 0, b"in progress")  # newer than the newest completed: kept
    deleted = b.garbage_collect(keep=2)
    assert deleted == [1, 2, 4]
    assert b.list_completed() == [3, 5]
    assert b.list_objects("chk-0000000001") == []
    assert b.list_objects("chk-0000000009/") == ["chk-0000000009/task-00000-g0.snap"]


def test_corrupt_and_truncated_objects(env: Env) -> None:
    b = env.backend
    h = b.put_snapshot(4, 0, b"payload" * 100)
    sealed = b.get_object(h)
    b.put_object(h, sealed[:-10])
    with pytest.raises(CorruptSnapshotError):
        b.get_snapshot(h)
    b.put_object(h, sealed[:-1] + bytes([sealed[-1] ^ 0xFF]))
    with pytest.raises(CorruptSnapshotError):
        b.get_snapshot(h)
    b.put_object("chk-0000000004/_metadata", seal_blob(b"{not json"))
    with pytest.raises(CorruptSnapshotError):
        b.read_metadata(4)


def test_missing_objects(env: Env) -> None:
    b = env.backend
    with pytest.raises(SnapshotNotFoundError):
        b.get_snapshot("chk-0000000099/task-00000-g0.snap")
    with pytest.raises(SnapshotNotFoundError):
        b.read_metadata(99)
    assert b.get_meta("never") is None
    assert b.list_objects("chk-") == []
    assert b.list_completed() == []
    b.delete_objects("chk-0000000099/")  # no error


def test_put_meta_overwrites(env: Env) -> None:
    b = env.backend
    for i in range(5):
        b.put_meta("generation", str(i).encode())
        assert b.get_meta("generation") == str(i).encode()
    b.put_meta("big", os.urandom(1024) * 700)  # chunked on hbase
    b.put_meta("big", b"tiny")
    assert b.get_meta("big") == b"tiny"
    assert sorted(b.list_objects("meta/")) == ["meta/big", "meta/generation"]


def test_discard_checkpoint(env: Env) -> None:
    b = env.backend
    b.put_snapshot(5, 0, os.urandom(600 * 1024))
    b.create_metadata(5, {})
    b.discard_checkpoint(5)
    assert b.list_objects("chk-") == []
    assert b.list_completed() == []


def test_server_down_raises_backend_error_then_recovers(env: Env) -> None:
    if env.server is None:
        pytest.skip("embedded backend: nothing to stop")
    b = env.backend
    h = b.put_snapshot(1, 0, b"before")
    env.server.stop()
    budget = sum(min(BACKOFF * 2**i, 5.0) for i in range(RETRIES)) + 5.0
    for op in (lambda: b.get_snapshot(h), lambda: b.put_snapshot(2, 0, b"x"),
               b.list_completed):
        t0 = time.monotonic()
        with pytest.raises(BackendError) as info:
            op()
        assert not isinstance(info.value, SnapshotNotFoundError)
        assert time.monotonic() - t0 < budget
        assert "127.0.0.1" in str(info.value)  # names the backend URI
    env.server.start()
    assert b.get_snapshot(h) == b"before"
    h2 = b.put_snapshot(2, 0, b"after")
    assert b.get_snapshot(h2) == b"after"
