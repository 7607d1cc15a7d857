"""A deposed leader's late commit point never counts (issue 27, docs/cluster.md "Fencing").

An ``--ha`` leader checks its lease, then writes a checkpoint's ``_metadata``. When that
write is slower than the rest of the lease, a standby takes the run over in between: it
stores the next epoch, lists the checkpoints (not that one yet) and restores an older
one, rolling its sinks back past everything above it. The old leader's write lands
afterwards. It tells no sink to commit it (fenced), but before the fix the new leader
listed it at its next recovery and restored it, although its sinks had discarded that
checkpoint's staged output: the output was lost. And when the new leader handed out the
same checkpoint id itself, the late write replaced its commit point with the old one
(now it never does: the old leader's snapshots of that id are listed and its ids record
reserved it, issue 23).

Now every commit point names the epoch that wrote it, the ids record keeps the checkpoint
each epoch restored first, and a restore refuses a checkpoint of an older epoch above it;
a commit point is created, never replaced. These are the real ``MasterCore`` and
``RestorePlan`` on a file backend, two Topology Masters sharing one store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import BackendError, CheckpointError
from jstormpy.leader_lease import LeaderLease
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.run_identity import take_over_run
from jstormpy.state_backends.base import CHECKPOINT_IDS_META
from jstormpy.state_backends.file import FileBackend
from jstormpy.state_backends.shared_files import refs_key
from tests.unit.test_checkpoint_ids_record import checkpoint, new_core, prepare_all, recover


class SlowCommitPoint(FileBackend):
    """The old leader's store: its ``_metadata`` write of checkpoint ``slow`` waits for
    ``gate`` (the storage is slow) and then lands."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.slow: int | None = None
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.outcome: BaseException | None = None

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        if checkpoint_id != self.slow:
            super().create_metadata(checkpoint_id, metadata)
            return
        self.entered.set()
        assert self.gate.wait(30), "the test never let the write land"
        try:
            super().create_metadata(checkpoint_id, metadata)
        except BaseException as exc:
            self.outcome = exc
            raise


def leader(backend: FileBackend, lease_path: Path, resume: bool) -> MasterCore:
    """A TM as an ``--ha`` launcher starts it: a valid lease, the run taken over."""
    core = new_core(backend, resume=resume)  # type: ignore[arg-type]
    core.lease = LeaderLease(lease_path)
    core.lease.renew(time.monotonic(), 60.0)
    core.run = take_over_run(backend, resume)
    return core


def old_leader_deposed_mid_commit(tmp_path: Path, skipped: int = 0, revoke: bool = True
                                  ) -> tuple[MasterCore, SlowCommitPoint, MasterCore,
                                             FileBackend, list[WorkerSession], int, int]:
    """The old leader (epoch 1) completed one checkpoint; its next commit point is being
    written when its lease runs out (``skipped`` ids after the completed one, handed out
    but never stored nor listed; ``revoke=False``: its lease still holds on its own
    clock); the new leader (epoch 2) takes the run over and restores. Returns both, the
    new leader's sessions, the restored and the late id."""
    old_store = SlowCommitPoint(f"file://{tmp_path / 'store'}")
    old = leader(old_store, tmp_path / "old.lease", resume=False)
    prepare_all(old)
    first = checkpoint(old)
    assert old.backend_io.wait_idle(10)
    old_store.slow = first + 1 + skipped
    for _ in range(skipped):  # handed out (a rescale's, say), never stored nor listed
        old.checkpoints.allocate_id()
    late = checkpoint(old)
    assert old_store.entered.wait(10), "the old leader never started its commit point"
    assert old.lease is not None
    if revoke:
        old.lease.revoke()  # its launcher lost ZooKeeper; the standby leads

    new_store = FileBackend(f"file://{tmp_path / 'store'}")
    new = leader(new_store, tmp_path / "new.lease", resume=True)
    assert new.run is not None and new.run.epoch == 2
    sessions, restored = prepare_all(new, old.generation)
    assert restored == first, "the late commit point has not landed: it is not listed"
    return old, old_store, new, new_store, sessions, first, late


def test_a_late_commit_point_of_a_deposed_leader_is_never_restored(tmp_path: Path) -> None:
    old, old_store, new, new_store, sessions, first, late = old_leader_deposed_mid_commit(
        tmp_path)
    old_store.gate.set()  # the old leader's commit point lands now
    assert old.backend_io.wait_idle(10)
    assert old.fenced, "the old leader told its sinks to commit after its lease ran out"
    assert late in new_store.list_completed()
    assert new_store.read_metadata(late)["run"]["epoch"] == 1

    _, restored = recover(new, sessions)
    assert restored == first, (
        f"the new leader restored checkpoint {restored}, the old leader's late commit point: "
        f"its sinks were rolled back to {first} when it took over")
    assert late in new.checkpoints.bad

    # and a third leader, after a restart, knows it too
    third = leader(FileBackend(f"file://{tmp_path / 'store'}"), tmp_path / "third.lease",
                   resume=True)
    _, restored = prepare_all(third, new.generation)
    assert restored == first
    assert checkpoint(third) > late  # its id is never handed out again


def test_a_leader_whose_lease_still_holds_is_fenced_by_the_newer_epoch_after_its_write(
        tmp_path: Path) -> None:
    """A standby can take the run over (its epoch stored) before the old leader's lease has
    run out on the old leader's own clock. The check after a commit point landed reads the
    stored epoch too, so the old leader still commits nothing: fenced, naming the newer
    Topology Master, and the checkpoint is no completed checkpoint of its run."""
    old, old_store, new, new_store, sessions, first, late = old_leader_deposed_mid_commit(
        tmp_path, revoke=False)
    assert old.lease is not None and old.lease.valid()
    old_store.gate.set()  # the old leader's commit point lands now
    assert old.backend_io.wait_idle(10)
    assert old_store.outcome is None and late in new_store.list_completed()
    assert "a newer Topology Master" in old.fenced, (
        f"the old leader went on after its write with epoch 2 stored: {old.fenced!r}")
    completed = [e["id"] for e in old.checkpoints.history if e["status"] == "completed"]
    assert completed == [first], completed
    _, restored = recover(new, sessions)
    assert restored == first


class StoreDown(FileBackend):
    """A leader's store that, while ``down``, refuses commit points and meta reads (its
    snapshots were written before it went down)."""

    down = False

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        if self.down:
            raise BackendError("the store is down")
        super().create_metadata(checkpoint_id, metadata)

    def get_meta(self, name: str) -> bytes | None:
        if self.down:
            raise BackendError("the store is down")
        return super().get_meta(name)


def test_a_leader_whose_commit_point_fails_with_its_store_down_fails_it_and_goes_on(
        tmp_path: Path) -> None:
    """After a failed write the fence check is the lease alone: the store that refused
    the commit point may refuse the read of the stored epoch too. The checkpoint fails
    (the leader is not fenced), and the next one completes once the store answers."""
    store = StoreDown(f"file://{tmp_path / 'store'}")
    core = leader(store, tmp_path / "lease", resume=False)
    prepare_all(core)
    store.down = True
    failed = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    assert not core.fenced, core.fenced
    statuses = {e["id"]: e["status"] for e in core.checkpoints.history}
    assert statuses.get(failed) == "failed", (
        f"checkpoint {failed} whose commit point failed is {statuses.get(failed)!r}")
    store.down = False
    after = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    statuses = {e["id"]: e["status"] for e in core.checkpoints.history}
    assert statuses.get(after) == "completed", statuses


def test_a_late_commit_point_never_replaces_the_new_leaders_own(tmp_path: Path) -> None:
    old, old_store, new, new_store, sessions, first, late = old_leader_deposed_mid_commit(
        tmp_path)
    own = checkpoint(new)
    assert new.backend_io.wait_idle(10)
    # it never hands out the late id: the old leader's snapshots of it are listed and its
    # ids record reserved it (were both missed, the commit point is still created only
    # once: test_a_commit_point_is_created_never_replaced)
    assert own > late and new_store.read_metadata(own)["run"]["epoch"] == 2
    old_store.gate.set()
    assert old.backend_io.wait_idle(10)
    assert new_store.read_metadata(late)["run"]["epoch"] == 1
    assert new_store.read_metadata(own)["run"]["epoch"] == 2, (
        "the deposed leader's late write replaced the new leader's commit point")
    assert old.fenced
    record = json.loads(new_store.get_meta(CHECKPOINT_IDS_META) or b"{}")
    assert record["epochs"] == {"1": 0, "2": first}, (
        f"the deposed leader wrote its ids record over the new leader's: {record}")

    _, restored = recover(new, sessions)
    assert restored == own


def test_a_commit_point_is_created_never_replaced(tmp_path: Path) -> None:
    from jstormpy.api.errors import ObjectExistsError
    from jstormpy.state_backends.deadline import DeadlineBackend
    from jstormpy.state_backends.memory import MemoryBackend

    for backend in (FileBackend(f"file://{tmp_path}"), MemoryBackend("memory://deposed"),
                    DeadlineBackend(FileBackend(f"file://{tmp_path / 'd'}"), 5000)):
        backend.create_metadata(7, {"run": {"job_id": "a", "epoch": 2}, "tasks": {}})
        try:
            backend.create_metadata(7, {"run": {"job_id": "a", "epoch": 1}, "tasks": {}})
        except ObjectExistsError:
            pass
        else:
            raise AssertionError(f"{backend.uri}: a second commit point replaced the first")
        assert backend.read_metadata(7)["run"]["epoch"] == 2
        assert backend.list_completed() == [7]
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".tmp-")]


def test_retention_never_keeps_a_late_commit_point_in_place_of_the_new_leaders(
        tmp_path: Path) -> None:
    """Simulator seed 2064 (leader_deposed): the old leader had handed out ids far above
    the new leader's; its late commit point counted as the newest checkpoint, so retention
    deleted the new leader's own, and the final checkpoint's state was gone. (Since the ids
    record's reservation, the new leader's ids start above the old leader's anyway.)"""
    old, old_store, new, store, sessions, first, late = old_leader_deposed_mid_commit(
        tmp_path, skipped=4)
    old_store.gate.set()
    assert old.backend_io.wait_idle(10) and old.fenced
    assert late in store.list_completed()
    own = [checkpoint(new) for _ in range(new.config.checkpoints_retained + 1)]
    assert new.backend_io.wait_idle(10)
    kept = store.list_completed()
    assert own[-new.config.checkpoints_retained:] == [c for c in kept if c in own], (
        f"retention kept {kept}: the late checkpoint {late} took the place of the new "
        f"leader's {own}")
    _, restored = recover(new, sessions)
    assert restored == own[-1]


# -- retention's own rules, beside the deposed leader's (issue 37's mutation survivors) --

def _completed(store: FileBackend, cid: int, shared: list[str]) -> str:
    """Checkpoint ``cid`` of one task whose snapshot references the shared files
    ``shared`` (its ``.refs``), with its commit point; returns the snapshot's handle."""
    for key in shared:
        if not store.list_objects(key):
            store.put_object(key, b"state")
    handle = store.put_snapshot(cid, 1, b"snap", generation=1,
                                refs=json.dumps(sorted(shared)).encode())
    store.create_metadata(cid, {"tasks": {"1": {"handle": handle}}})
    return handle


def test_retention_keeps_the_newest_and_deletes_every_older_checkpoint(
        tmp_path: Path) -> None:
    """keep=1 over checkpoints 1-3: only 3 is left, 1 and 2 both go (not only the
    oldest), and a shared file only 1 and 2 referenced goes with them."""
    store = FileBackend(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, ["inc/seg-0000000001-a"])
    _completed(store, 3, ["inc/seg-0000000003-b"])
    assert sorted(store.garbage_collect(keep=1)) == [1, 2]
    assert store.list_completed() == [3]
    assert store.list_objects("inc/") == ["inc/seg-0000000003-b"]


def test_retention_keeping_no_checkpoint_deletes_every_completed_one(tmp_path: Path) -> None:
    """``garbage_collect(keep=0)`` deletes all but the newest 0: every completed
    checkpoint goes, the newest too, with the shared files they referenced."""
    store = FileBackend(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, ["inc/seg-0000000002-b"])
    assert sorted(store.garbage_collect(keep=0)) == [1, 2]
    assert store.list_completed() == []
    assert store.list_objects("inc/") == []



def test_status_no_longer_offers_the_checkpoints_retention_deleted(tmp_path: Path) -> None:
    """Retention's last step (``master/retention_steps.py``): the TM forgets what the
    backend deleted, so its status (``jstorm status``, the web UI) shows those
    checkpoints as no longer retained, not as restorable ones."""
    core = new_core(FileBackend(f"file://{tmp_path}"))  # type: ignore[arg-type]
    prepare_all(core)
    keep = core.config.checkpoints_retained
    done = [checkpoint(core) for _ in range(keep + 1)]
    assert core.backend_io.wait_idle(10)
    assert core.backend.list_completed() == done[1:]
    listed = {c["id"]: c for c in core.status()["checkpoints"]}
    assert [listed[c]["status"] for c in done] == ["completed"] * (keep + 1)
    assert [listed[c]["retained"] for c in done] == [False] + [True] * keep, listed


def test_retention_refuses_to_keep_a_negative_number_of_checkpoints(tmp_path: Path) -> None:
    """``garbage_collect(keep=-1)`` is a caller's mistake: it is refused naming ``keep``,
    and nothing is deleted (it used to delete every completed checkpoint)."""
    store = FileBackend(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, ["inc/seg-0000000002-b"])
    with pytest.raises(CheckpointError, match="keep=-1"):
        store.garbage_collect(keep=-1)
    assert store.list_completed() == [1, 2]
    assert len(store.list_objects("inc/")) == 2

def test_an_armed_crash_during_shared_file_deletion_strikes_with_one_file_to_delete(
        tmp_path: Path) -> None:
    """The chaos tests' ``master_during_segment_gc`` point (``JSTORM_FAULTS``) kills the
    process halfway through retention's deletion of shared files: with one file to
    delete, before it, so the file is still there; a point that never fired would let a
    chaos test pass without the crash it asked for."""
    store = FileBackend(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, ["inc/seg-0000000002-b"])
    script = ("import sys\n"
              "from jstormpy.state_backends.file import FileBackend\n"
              "FileBackend(sys.argv[1]).garbage_collect(keep=1)\n")
    env = dict(os.environ, JSTORM_FAULTS="master_during_segment_gc@2")
    env.pop("JSTORM_FAULT_DIR", None)
    done = subprocess.run([sys.executable, "-c", script, f"file://{tmp_path}"], env=env,
                          check=False,
                          capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])
    assert store.list_objects("inc/") == ["inc/seg-0000000001-a", "inc/seg-0000000002-b"]


def test_an_armed_crash_after_a_commit_point_strikes_once_it_is_written(
        tmp_path: Path) -> None:
    """The chaos tests' ``master_after_metadata`` point (``JSTORM_FAULTS``) kills the TM
    right after checkpoint n's commit point is written, before any sink hears of it: the
    commit point is in storage, and the process died by ``SIGKILL``. A point that never
    fired would let a chaos test pass without the crash it asked for."""
    script = ("import sys\n"
              "from jstormpy.state_backends.file import FileBackend\n"
              "from tests.unit.test_checkpoint_ids_record import checkpoint, new_core, "
              "prepare_all\n"
              "core = new_core(FileBackend(sys.argv[1]))\n"
              "prepare_all(core)\n"
              "checkpoint(core)\n"
              "assert core.backend_io.wait_idle(10)\n")
    env = dict(os.environ, JSTORM_FAULTS="master_after_metadata@1")
    env.pop("JSTORM_FAULT_DIR", None)
    done = subprocess.run([sys.executable, "-c", script, f"file://{tmp_path}"], env=env,
                          cwd=Path(__file__).resolve().parents[2], check=False,
                          capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])
    assert FileBackend(f"file://{tmp_path}").list_completed() == [1]


def test_retention_keeps_the_shared_files_a_retained_checkpoint_references(
        tmp_path: Path) -> None:
    """A file written for checkpoint 1 and still referenced by the retained checkpoint 2
    (an incremental segment both reference) is kept when 1 is deleted: it is found
    through the ``.refs`` object beside 2's snapshot, and restoring 2 needs it."""
    store = FileBackend(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a", "inc/seg-0000000001-b"])
    handle = _completed(store, 2, ["inc/seg-0000000001-a"])
    assert store.garbage_collect(keep=1) == [1]
    assert store.list_objects("inc/") == ["inc/seg-0000000001-a"], (
        f"the refs of {handle} were not read: retention deleted what checkpoint 2 needs")


def test_retention_leaves_a_file_in_the_shared_directory_it_did_not_name_alone(
        tmp_path: Path) -> None:
    """An object under ``inc/`` whose name carries no checkpoint id (``seg-`` without
    digits: put there by hand or by another tool) neither stops retention nor is
    deleted by it."""
    store = FileBackend(f"file://{tmp_path}")
    store.put_object("inc/seg-notes.txt", b"operator's notes")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, [])
    assert store.garbage_collect(keep=1) == [1]
    assert store.list_objects("inc/") == ["inc/seg-notes.txt"]


def test_retention_counts_no_checkpoint_above_the_floor_among_the_newest(
        tmp_path: Path) -> None:
    """``garbage_collect(keep, upto=f)``: a completed checkpoint above the TM's id floor
    (a deposed TM's late commit point) is not the newest: keep=1 keeps the TM's own
    newest, 2, deletes 1, and leaves 5 and its shared file alone."""
    store = FileBackend(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, ["inc/seg-0000000002-a"])
    _completed(store, 5, ["inc/seg-0000000005-a"])
    assert store.garbage_collect(keep=1, upto=2) == [1]
    assert store.list_completed() == [2, 5]
    assert sorted(store.list_objects("inc/")) == ["inc/seg-0000000002-a",
                                                  "inc/seg-0000000005-a"]


class CountingRefs(FileBackend):
    """A file backend that records which ``.refs`` objects are read."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.refs_read: list[str] = []

    def get_object(self, key: str) -> bytes:
        if key.endswith(".refs"):
            self.refs_read.append(key)
        return super().get_object(key)


def test_retention_reads_each_snapshots_refs_once(tmp_path: Path) -> None:
    """Retention runs after every completed checkpoint and needs the ``.refs`` of every
    retained task snapshot; a snapshot's references never change, so the backend reads
    each ``.refs`` once and remembers it: a later round reads only the new checkpoint's
    (on HDFS or S3 each read is a round trip, and a job keeps several checkpoints of
    every task)."""
    store = CountingRefs(f"file://{tmp_path}")
    _completed(store, 1, ["inc/seg-0000000001-a"])
    _completed(store, 2, ["inc/seg-0000000001-a"])
    assert store.garbage_collect(keep=2) == []
    first = len(store.refs_read)
    assert first == 2
    newest = _completed(store, 3, ["inc/seg-0000000003-b"])
    assert store.garbage_collect(keep=2) == [1]
    assert store.refs_read[first:] == [refs_key(newest)]
    assert sorted(store.list_objects("inc/")) == ["inc/seg-0000000001-a",
                                                  "inc/seg-0000000003-b"]
