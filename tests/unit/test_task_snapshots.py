"""A task's snapshots between barrier and report (barrier/snapshots.py), in isolation; and
the stream a snapshot is written as (runtime/snapshots.py, the backend's sealed envelope)."""

import pickle
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import BackendError, CheckpointError, CorruptSnapshotError
from jstormpy.barrier.snapshots import AckSnapshot, DeclineSnapshot, TaskSnapshots
from jstormpy.runtime import snapshots
from jstormpy.state_backends.base import open_blob, seal_stream
from jstormpy.state_backends.file import FileBackend
from jstormpy.state_store import RocksDBStore


def test_a_snapshot_reports_under_its_barriers_generation():
    snaps = TaskSnapshots(task_id=3)
    ticket = snaps.barrier(7, generation=2)
    assert snaps.uploaded(ticket, "h", 10) == [AckSnapshot(ticket, "h", 10)]
    assert ticket.generation == 2 and ticket.task_id == 3


def test_a_stopped_task_reports_neither_acks_nor_failures():
    snaps = TaskSnapshots(task_id=1)
    done, failing = snaps.barrier(4, 1), snaps.barrier(5, 1)
    snaps.stop()
    assert snaps.uploaded(done, "h", 1) == []
    assert snaps.failed(failing, "slow disk") == []
    assert not snaps.in_flight


def test_a_failure_of_a_running_task_declines_its_checkpoint():
    snaps = TaskSnapshots(task_id=1)
    ticket = snaps.barrier(4, 1)
    assert snaps.failed(ticket, "EIO") == [DeclineSnapshot(ticket, "EIO")]


def test_a_snapshot_written_piece_by_piece_reads_back_whole(tmp_path: Path) -> None:
    """A full dump is stored as a stream of pieces (``seal_stream``: a header, the pieces,
    a trailer with their checksum and length); it reads back as the same bytes, and a
    stream cut short is refused, not read as a smaller snapshot."""
    backend = FileBackend(f"file://{tmp_path}")
    pieces = [b"abc", b"", b"defgh" * 1000]
    handle = backend.put_snapshot(4, 2, pieces, generation=1)
    assert backend.get_snapshot(handle) == b"".join(pieces)
    sealed = b"".join(seal_stream(pieces))
    assert open_blob(sealed, "whole") == b"".join(pieces)
    with pytest.raises(CorruptSnapshotError):
        open_blob(sealed[:-20] + sealed[-16:], "cut")



@pytest.mark.parametrize("damaged", [b"\x00", b"\xff"])
def test_a_stream_whose_trailer_is_damaged_is_refused_naming_its_end(damaged: bytes) -> None:
    """A stored stream whose trailer lost its mark (a byte of storage damaged there, below
    or above the mark's own value) is refused as damaged at its end, even though its
    checksum and length still match the pieces: the envelope is not what was written."""
    sealed = b"".join(seal_stream([b"abc", b"defgh" * 100]))
    broken = sealed[:-16] + damaged + sealed[-15:]
    with pytest.raises(CorruptSnapshotError, match="damaged at its end"):
        open_blob(broken, "piece")

def _big_view() -> snapshots.SnapshotView:
    """A task's state large enough to be dumped in several pieces."""
    counts = {f"k{i}": i for i in range(snapshots.CHUNK_KEYS * 3)}
    return snapshots.capture({"states": {"counts": counts}})


def test_a_given_up_upload_stops_at_its_next_piece() -> None:
    """An upload given up by its deadline (``SnapshotStream.close``) reads no further
    piece: the backend's write of it fails instead of reading state that the task may
    have released meanwhile."""
    stream = snapshots.serialise_stream(_big_view())
    pieces = iter(stream)
    assert next(pieces)
    stream.close()
    with pytest.raises(CheckpointError, match="given up"):
        list(pieces)
    whole = b"".join(snapshots.serialise_stream(_big_view()))
    assert len(pickle.loads(whole)["states"]["counts"]) == snapshots.CHUNK_KEYS * 3


def test_a_task_without_rocksdb_adds_no_stall_to_its_barrier_pause() -> None:
    """The RocksDB apply's wait is part of a barrier's pause (the ack's ``pause_ms``,
    the checkpoint history's); a task whose state is in memory waited for none: it adds
    exactly zero, never a negative amount."""
    assert snapshots.stall_ms(_big_view()) == 0.0


@pytest.mark.parametrize("size", [2, snapshots.CHUNK_KEYS // 4])
def test_a_small_state_that_comes_to_hold_a_list_costs_no_checkpoint(size: int) -> None:
    """Only large states (above a quarter of ``CHUNK_KEYS`` keys) are copied at the
    barrier and type-scanned off the task thread (a mutable value found there declines
    that checkpoint); a small one is pickled at the barrier whatever it holds, so a state
    of a few keys, or of a quarter of a chunk, whose values become lists checkpoints at
    once, with the values it had at the barrier."""
    verified: set[str] = set()
    counts: dict[str, object] = {f"k{i}": i for i in range(size)}
    first = snapshots.capture({"states": {"counts": counts}}, verified)
    assert pickle.loads(snapshots.serialise(first))["states"]["counts"] == {
        f"k{i}": i for i in range(size)}
    value = [1]
    counts["k0"] = value
    second = snapshots.capture({"states": {"counts": counts}}, verified)
    value.append(2)  # after the barrier: not in the snapshot
    assert pickle.loads(snapshots.serialise(second))["states"]["counts"] == {
        **{f"k{i}": i for i in range(size)}, "k0": [1]}


def test_a_large_state_of_tuples_is_copied_at_the_barrier_not_pickled_there() -> None:
    """A large state whose values are tuples of immutable values (a pair of counts, a
    key and a timestamp) is as safe to share as one of ints: the barrier copies the dict
    (``SnapshotView.copies``) and leaves the pickling to the snapshot thread, at this and
    every later checkpoint, instead of pickling every key on the task thread; from the
    second checkpoint on, the type scan too. The snapshot holds the values of the
    barrier."""
    n = snapshots.CHUNK_KEYS
    pairs: dict[str, tuple[int, str]] = {f"k{i}": (i, "x") for i in range(n)}
    verified: set[str] = set()
    for scanned_at_the_barrier in (True, False):  # the next capture trusts the scan
        view = snapshots.capture({"states": {"pairs": pairs}}, verified)
        assert "pairs" in view.copies
        # a trusted state's scan is left to the snapshot thread (SnapshotView.unchecked)
        assert view.unchecked == ([] if scanned_at_the_barrier else ["pairs"])
        assert len(view.rest) < 1000  # the barrier pickled none of the state
        pairs["k0"] = (-1, "after the barrier")
        assert pickle.loads(snapshots.serialise(view))["states"]["pairs"]["k0"] != (
            -1, "after the barrier")
        pairs["k0"] = (0, "x")
    assert verified == {"pairs"}


def test_a_state_that_cannot_be_pickled_fails_its_barrier_with_the_pickling_error() -> None:
    """A state value pickle refuses (a lock) fails the capture at the barrier with
    pickle's own error naming the type, which the task reports, not with an error of
    the cleanup after it."""
    with pytest.raises(TypeError, match="cannot pickle '_thread.lock' object"):
        snapshots.capture({"states": {"locks": {"a": threading.Lock()}}})


class RetryingBackend(FileBackend):
    """A file backend whose every streamed write breaks off after its first piece and is
    retried from the start, as the HDFS backend does when a connection is lost."""

    def put_object_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        first = iter(chunks)  # the first attempt sends the envelope's header and a
        for _ in range(2):    # piece, then its connection is lost
            next(first)
        super().put_object_stream(key, chunks)  # the retry: the stream again, from its start


def test_a_retried_write_of_a_one_shot_stream_fails_rather_than_store_less(
        tmp_path: Path) -> None:
    """A snapshot given as pieces that can start over (a list, a ``SnapshotStream``) is
    written whole by a retry; one given as a one-shot iterator (a generator) cannot start
    over, so the retry is refused instead of storing the pieces left, which would read
    back as a smaller snapshot under a valid checksum."""
    backend = RetryingBackend(f"file://{tmp_path}")
    pieces = [b"first", b"second", b"third"]
    handle = backend.put_snapshot(1, 0, pieces, generation=1)
    assert backend.get_snapshot(handle) == b"".join(pieces)
    with pytest.raises(BackendError, match="cannot be written again"):
        backend.put_snapshot(2, 0, (p for p in pieces), generation=1)
    assert backend.list_objects("chk-0000000002/") == []


def test_a_barrier_failing_to_pickle_leaves_no_rocksdb_write_waiting(tmp_path: Path) -> None:
    """A task with RocksDB state whose barrier fails on another state (one pickle
    refuses): the RocksDB writes sealed at that barrier go to the database all the same,
    none is left waiting for a snapshot that will never be taken."""
    store = RocksDBStore(tmp_path / "task-1", 128)
    try:
        counts: Any = store.open("counts", None, None)
        counts["a"] = 1
        with pytest.raises(TypeError, match="cannot pickle"):
            snapshots.capture({"states": {"counts": counts,
                                          "locks": {"a": threading.Lock()}}})
        assert not store.pending()
        assert counts["a"] == 1
    finally:
        store.close()


def test_a_snapshot_of_small_states_keeps_the_snapshot_threads_entries() -> None:
    """A task whose states are all small (nothing copied at the barrier) may still get an
    entry from the snapshot thread: the native RocksDB checkpoint's ``"rocksdb"`` entry,
    put in ``view.extra`` by ``upload_native``. The written snapshot holds it beside the
    states; without it a restore would find no RocksDB state."""
    view = snapshots.capture({"states": {"counts": {"a": 1}}})
    assert not view.copies
    entry = {"files": ["000012.sst"], "states": {"windows": None}}
    view.extra = {**(view.extra or {}), "rocksdb": entry}
    snap = pickle.loads(snapshots.serialise(view))
    assert snap["rocksdb"] == entry and snap["states"]["counts"] == {"a": 1}


def test_a_large_state_of_lists_or_tuples_holding_lists_is_pickled_at_the_barrier() -> None:
    """A value is shared with the snapshot only if it is immutable all the way down: a
    large state whose values are lists, or tuples that hold a list, is pickled at the
    barrier, so a change to a list after the barrier is not in the snapshot."""
    n = snapshots.CHUNK_KEYS
    lists: dict[str, list[int]] = {f"k{i}": [i] for i in range(n)}
    pairs: dict[str, tuple[int, list[int]]] = {f"k{i}": (i, [i]) for i in range(n)}
    view = snapshots.capture({"states": {"lists": lists, "pairs": pairs}}, set())
    assert not view.copies
    lists["k0"].append(-1)  # after the barrier
    pairs["k0"][1].append(-1)
    states = pickle.loads(snapshots.serialise(view))["states"]
    assert (states["lists"]["k0"], states["pairs"]["k0"]) == ([0], (0, [0]))
