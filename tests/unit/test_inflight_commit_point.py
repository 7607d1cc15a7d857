"""A restarted TM never reuses the id of a checkpoint whose commit point its predecessor
was still writing (issue 23; found by the deterministic simulator, seed 291464).

A TM dies while checkpoint ``n``'s ``_metadata`` write is with the backend (a stalled
NameNode or region server: the request was sent, the answer never heard). Nothing records
``n``: the ids record is written at recoveries and after a failed commit point, the
completed floor after a commit point. So the successor restored the newest checkpoint its
listing showed, below ``n``, and handed ``n`` out again. When the predecessor's write
landed after the successor's own commit point of ``n``, it replaced it: the checkpoint
the sinks committed now named the dead generation's snapshots, a different cut (its
shared files already deleted by retention, which had read the successor's metadata).

Every task snapshot of ``n`` is stored before its commit point is written, so the listing
a recovery makes shows ``n``'s objects: the recovery's ids stay above every checkpoint
with objects in storage, complete or not.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import BackendError, CorruptSnapshotError
from jstormpy.state_backends.base import METADATA_NAME, checkpoint_prefix, seal_blob
from jstormpy.state_backends.file import FileBackend
from tests.unit.test_checkpoint_ids_record import checkpoint, drain, new_core, prepare_all


class DyingMaster(FileBackend):
    """The backend as the TM that dies sees it: the ``_metadata`` write of ``late`` waits
    for ``gate`` and then lands; by then the process is dead, so it hears nothing and
    writes nothing more."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.late: int | None = None
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.dead = False

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        if checkpoint_id == self.late:
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
            super().create_metadata(checkpoint_id, metadata)
            self.dead = True
            raise BackendError("the TM process is dead")
        super().create_metadata(checkpoint_id, metadata)

    def put_object(self, key: str, data: bytes) -> None:
        if self.dead:
            raise BackendError("the TM process is dead")
        super().put_object(key, data)


def test_a_restarted_master_never_reuses_an_id_whose_commit_point_may_still_land(
        tmp_path: Path) -> None:
    dying = DyingMaster(f"file://{tmp_path}")
    core = new_core(dying)  # type: ignore[arg-type]
    prepare_all(core)
    first = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    dying.late = first + 1
    late = checkpoint(core)  # every task's snapshot stored; the commit point is written...
    assert dying.entered.wait(10)  # ... and the TM dies before it answers

    backend = FileBackend(f"file://{tmp_path}")
    successor = new_core(backend, resume=True)  # type: ignore[arg-type]
    _, restored = prepare_all(successor, successor.generation)
    assert restored == first  # the listing does not show `late` yet
    own = checkpoint(successor)
    assert successor.backend_io.wait_idle(10)
    assert own > late, f"the restarted TM handed out checkpoint {own} again"

    dying.gate.set()  # the dead TM's write lands
    assert core.backend_io.wait_idle(10)
    assert backend.read_metadata(own)["generation"] == successor.generation, (
        f"checkpoint {own}, which the restarted TM completed, now names the dead "
        "generation's snapshots")


def test_the_listing_of_checkpoint_ids_names_incomplete_checkpoints_too(
        tmp_path: Path) -> None:
    """``list_checkpoint_ids``, the listing the fix reads: a checkpoint with only task
    snapshots (its commit point still in flight) counts as well as a completed one;
    objects outside ``chk-<id>/`` do not."""
    backend = FileBackend(f"file://{tmp_path}")
    backend.put_snapshot(3, 1, b"in flight", generation=1)
    handle = backend.put_snapshot(5, 1, b"done", generation=1)
    backend.create_metadata(5, {"tasks": {"1": {"handle": handle}}})
    backend.put_object("chk-notanid/stray", b"x")
    assert backend.list_completed() == [5]
    assert backend.list_checkpoint_ids() == [3, 5]


def test_checkpoint_ids_of_ten_digits_and_more_are_listed_as_themselves(
        tmp_path: Path) -> None:
    """A checkpoint's objects are under ``chk-`` and its id, at least ten digits: ids from
    10**9 on have no leading zero to spare, and from 10**10 on take more digits. Both
    listings read every digit."""
    backend = FileBackend(f"file://{tmp_path}")
    for cid in (7, 1_234_567_890, 98_765_432_100):
        handle = backend.put_snapshot(cid, 1, b"state", generation=1)
        backend.create_metadata(cid, {"tasks": {"1": {"handle": handle}}})
    assert backend.list_completed() == [7, 1_234_567_890, 98_765_432_100]
    assert backend.list_checkpoint_ids() == [7, 1_234_567_890, 98_765_432_100]


def test_a_commit_point_that_is_not_json_is_a_corrupt_checkpoint_named_by_its_id(
        tmp_path: Path) -> None:
    """A commit point whose checksum holds but whose body is not JSON (written by another
    tool, or by a bug) is refused as a corrupt checkpoint naming it: what a recovery
    falls back past, and what ``jstorm savepoint`` of that checkpoint reports, not a bare
    JSON decoding error from deep inside the backend."""
    backend = FileBackend(f"file://{tmp_path}")
    backend.put_object(checkpoint_prefix(4) + METADATA_NAME, seal_blob(b"{not json"))
    assert backend.list_completed() == [4]
    with pytest.raises(CorruptSnapshotError, match="metadata of checkpoint 4 is not JSON"):
        backend.read_metadata(4)


class SlowCommitPoint(FileBackend):
    """A file backend whose ``_metadata`` writes from checkpoint ``hold`` on wait for
    ``gate``, then land and succeed."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.hold: int | None = None
        self.gate = threading.Event()
        self.entered = threading.Event()

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        if self.hold is not None and checkpoint_id >= self.hold:
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
        super().create_metadata(checkpoint_id, metadata)


def test_a_commit_point_that_lands_after_a_kill_is_no_completed_checkpoint_of_the_run(
        tmp_path: Path) -> None:
    """``jstorm kill`` while a checkpoint's commit point is being written: the write lands
    after the kill, but the killed topology tells no sink to commit it, nor counts it
    among its completed checkpoints (it is complete on storage: a later run lists it)."""
    backend = SlowCommitPoint(f"file://{tmp_path}")
    core = new_core(backend)  # type: ignore[arg-type]  # any FileBackend
    sessions, _ = prepare_all(core)
    first = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    drain(sessions)
    backend.hold = first + 1
    second = checkpoint(core)
    assert backend.entered.wait(10)
    core.kill("killed by the test")
    backend.gate.set()
    assert core.backend_io.wait_idle(10)
    told = drain(sessions)
    completed = {m.complete.checkpoint_id for m in told if m.WhichOneof("body") == "complete"}
    assert second not in completed, "a sink of the killed topology was told to commit"
    statuses = {e["id"]: e["status"] for e in core.checkpoints.history}
    assert statuses.get(second) != "completed", statuses
    assert backend.list_completed() == [first, second]  # on storage all the same


def test_a_checkpoint_whose_floor_is_not_stored_is_aborted_and_the_next_one_completes(
        tmp_path: Path) -> None:
    """The TM's commit path reports every outcome but a fenced one to the coordinator:
    a commit point stored whose completed floor's write failed is aborted (no sink
    commits what the stored floor misses), and checkpoints go on once the floor can be
    stored again."""
    from tests.unit.test_checkpoint_ids_record import FloorOutage

    backend = FloorOutage(f"file://{tmp_path}")
    core = new_core(backend)
    sessions, _ = prepare_all(core)
    checkpoint(core)
    assert core.backend_io.wait_idle(10)
    drain(sessions)
    backend.floor_down = True
    second = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    told = drain(sessions)
    assert {m.abort.checkpoint_id for m in told if m.WhichOneof("body") == "abort"} \
        == {second}, told
    assert not core.checkpoints.committing
    backend.floor_down = False
    third = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    told = drain(sessions)
    assert third in {m.complete.checkpoint_id for m in told
                     if m.WhichOneof("body") == "complete"}, told


def test_each_completed_checkpoint_is_stored_as_the_floor_a_resumed_master_starts_from(
        tmp_path: Path) -> None:
    """The commit path's last step stores each completed checkpoint as the completed floor
    (``meta/completed_checkpoint``) before a sink is told to commit it, so a resumed TM
    refuses a listing that lacks it: the floor follows every checkpoint, not only a
    recovery's restore."""
    from jstormpy.state_backends.base import COMPLETED_META

    backend = FileBackend(f"file://{tmp_path}")
    core = new_core(backend)  # type: ignore[arg-type]  # any FileBackend
    sessions, _ = prepare_all(core)
    for _ in range(2):
        cid = checkpoint(core)
        assert core.backend_io.wait_idle(10)
        assert cid in {m.complete.checkpoint_id for m in drain(sessions)
                       if m.WhichOneof("body") == "complete"}
        assert backend.get_meta(COMPLETED_META) == str(cid).encode(), (
            f"checkpoint {cid} completed, but the stored floor is "
            f"{backend.get_meta(COMPLETED_META)!r}")
    resumed = new_core(FileBackend(f"file://{tmp_path}"), resume=True)  # type: ignore[arg-type]
    assert resumed.checkpoints.completed_floor == cid
