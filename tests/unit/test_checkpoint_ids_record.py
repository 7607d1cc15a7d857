"""A commit point that times out but lands later never comes back to haunt a recovery
(issue 23; found by the deterministic simulator, seeds 911 and 22619).

A ``_metadata`` write the backend did not answer in time may still land: the TM marks
that checkpoint bad and never restores it, because a recovery rolls the sinks back past
it. Two ways around that rule lost or duplicated output:

* the recovery's restore decision was made while the write's outcome was unknown, so it
  restored the checkpoint (landed), and the timeout reported after it marked it bad: the
  next recovery fell below it and the sinks committed its output a second time;
* a restarted TM forgot which checkpoints were bad and which ids were handed out: it
  reused ids and restored the late-landing checkpoint the first recovery had rolled the
  sinks back past, so that checkpoint's output was lost.

Now a recovery waits for every commit point's outcome, and the ids record
(``meta/checkpoint_ids``: the id floor and the bad checkpoints) is stored before any
worker is prepared; a resumed TM starts from it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from jstormpy import Config
from jstormpy.api.errors import BackendError, BackendTimeoutError
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends.base import CHECKPOINT_IDS_META, COMPLETED_META
from jstormpy.state_backends.file import FileBackend
from tests.unit.test_launch_attempts import DESCRIPTOR, next_message
from tests.unit.test_rescale_commit import wait_until


class LateLanding(FileBackend):
    """A file backend whose ``_metadata`` write of checkpoint ``late`` reports a timeout:
    at once with nothing written (:meth:`land` writes it later), or, with ``gate`` set,
    after waiting for the gate and landing first."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.late: int | None = None
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.held: tuple[int, dict[str, Any]] | None = None

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        if checkpoint_id != self.late:
            super().create_metadata(checkpoint_id, metadata)
            return
        if self.gate is not None:
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
            super().create_metadata(checkpoint_id, metadata)  # landed, answer lost
        else:
            self.held = (checkpoint_id, metadata)
        raise BackendTimeoutError(f"chk-{checkpoint_id}/_metadata: no answer in 20 s")

    def land(self) -> None:
        assert self.held is not None
        super().create_metadata(*self.held)


def new_core(backend: LateLanding, resume: bool = False) -> MasterCore:
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000, tolerable_failed_checkpoints=10)
    return MasterCore("ids", config, DESCRIPTOR, backend, resume=resume)


def prepare_all(core: MasterCore, generation: int = 0) -> tuple[list[WorkerSession], int]:
    """Register both workers and start them; returns the sessions and the checkpoint the
    Prepares restored."""
    sessions = [WorkerSession(w, 100 + w, "127.0.0.1", 0, "v1") for w in (0, 1)]
    for s in sessions:
        core.register(s, generation)
    restored = set()
    for s in sessions:
        prepare = next_message(s, "prepare").prepare
        restored.add(prepare.restored_checkpoint_id)
        core.on_ready(pb.Ready(worker_id=s.worker_id, generation=prepare.generation, ok=True))
    assert core.state == "running" and len(restored) == 1
    return sessions, restored.pop()


def checkpoint(core: MasterCore) -> int:
    cid = core.trigger_checkpoint(force=True)
    assert cid is not None
    for task in core.all_tasks:
        handle = core.backend.put_snapshot(cid, task, b"snapshot")
        core.on_checkpoint_ack(pb.CheckpointAck(checkpoint_id=cid, generation=core.generation,
                                                task_id=task, handle=handle))
    return cid


def one_checkpoint_done(backend: LateLanding) -> tuple[MasterCore, list[WorkerSession], int]:
    """A running TM whose first checkpoint completed."""
    core = new_core(backend)
    sessions, _ = prepare_all(core)
    first = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    return core, sessions, first


def recover(core: MasterCore, sessions: list[WorkerSession]) -> tuple[list[WorkerSession], int]:
    """Worker 0 dies; both workers register again for the recovery."""
    core.worker_lost(sessions[0], "killed by the test")
    return prepare_all(core, core.generation)


def test_a_recovery_waits_for_the_commit_point_and_never_goes_below_what_it_restored(
        tmp_path: Path) -> None:
    backend = LateLanding(f"file://{tmp_path}")
    core, sessions, first = one_checkpoint_done(backend)
    backend.late, backend.gate = first + 1, threading.Event()
    late = checkpoint(core)
    assert backend.entered.wait(10)
    core.worker_lost(sessions[0], "killed while the commit point is written")
    fresh = [WorkerSession(w, 200 + w, "127.0.0.1", 0, "v1") for w in (0, 1)]
    for s in fresh:
        core.register(s, core.generation)
    assert all(s.outq.empty() for s in fresh), "prepared before the commit point's outcome"
    backend.gate.set()  # it lands, and the TM hears a timeout
    restored = set()
    for s in fresh:
        prepare = next_message(s, "prepare").prepare
        restored.add(prepare.restored_checkpoint_id)
        core.on_ready(pb.Ready(worker_id=s.worker_id, generation=prepare.generation, ok=True))
    assert restored == {first}, f"restored {restored}: {late} is bad whatever storage lists"
    assert late in backend.list_completed() and late in core.checkpoints.bad
    _, again = recover(core, fresh)
    assert again == first  # not below what the sinks committed again at the first restore


def test_a_restarted_master_keeps_the_bad_checkpoints_and_the_ids_it_handed_out(
        tmp_path: Path) -> None:
    backend = LateLanding(f"file://{tmp_path}")
    core, sessions, first = one_checkpoint_done(backend)
    backend.late = first + 1
    late = checkpoint(core)
    wait_until(lambda: late in core.checkpoints.bad, "the timeout reported")
    _, restored = recover(core, sessions)  # rolls the sinks back to `first`
    assert restored == first
    assert backend.get_meta(CHECKPOINT_IDS_META) is not None

    backend.land()  # the timed-out write lands after the recovery, the TM is restarted
    restarted = new_core(backend, resume=True)
    assert late in restarted.checkpoints.bad and restarted.checkpoints.id_floor >= late
    sessions, restored = prepare_all(restarted, restarted.generation)
    assert restored == first, (f"the restarted TM restored {restored}, a checkpoint the "
                               f"sinks were rolled back past")
    assert checkpoint(restarted) > late  # its id is never handed out again


def test_a_fresh_run_forgets_an_earlier_runs_ids(tmp_path: Path) -> None:
    backend = LateLanding(f"file://{tmp_path}")
    backend.put_meta(CHECKPOINT_IDS_META, b'{"id_floor": 40, "bad": [40]}')
    core = new_core(backend)
    assert core.checkpoints.bad == set() and core.checkpoints.id_floor == 0
    assert backend.get_meta(CHECKPOINT_IDS_META) is None


class FloorOutage(LateLanding):
    """The completed floor's writes fail while ``floor_down`` (a TM that died between a
    commit point and its floor leaves the same store behind); ``hide`` drops checkpoints
    from the listing (a short listing)."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.floor_down = False
        self.hide: set[int] = set()

    def put_meta(self, name: str, data: bytes) -> None:
        if self.floor_down and name == COMPLETED_META:
            raise BackendError(f"meta/{name}: connection refused")
        super().put_meta(name, data)

    def list_completed(self) -> list[int]:
        return [c for c in super().list_completed() if c not in self.hide]


def test_a_restored_checkpoint_is_stored_as_the_floor_before_the_sinks_commit_it(
        tmp_path: Path) -> None:
    """Simulator seed 36835: the floor only in memory let a second restarted TM, reading
    the older stored floor and a short listing, restore below what the sinks committed."""
    backend = FloorOutage(f"file://{tmp_path}")
    core = new_core(backend)
    prepare_all(core)
    first = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    backend.floor_down = True
    second = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    assert backend.get_meta(COMPLETED_META) == str(first).encode()
    backend.floor_down = False

    restarted = new_core(backend, resume=True)  # the TM died; its successor restores
    _, restored = prepare_all(restarted, restarted.generation)
    assert restored == second
    assert backend.get_meta(COMPLETED_META) == str(second).encode()

    backend.hide = {second}  # and its successor gets a listing without it
    again = new_core(backend, resume=True)
    sessions = [WorkerSession(w, 300 + w, "127.0.0.1", 0, "v1") for w in (0, 1)]
    for s in sessions:
        again.register(s, again.generation)
    assert again.backend_io.wait_idle(10)
    assert all(s.outq.empty() for s in sessions), "restored below a recommitted checkpoint"
    assert any(f"checkpoint {second} completed" in e["message"] for e in again.errors)


def drain(sessions: list[WorkerSession]) -> list[Any]:
    """Every message the TM queued for ``sessions`` so far."""
    messages = []
    for s in sessions:
        while not s.outq.empty():
            messages.append(s.outq.get_nowait())
    return messages


def test_no_sink_commits_a_checkpoint_whose_floor_is_not_stored(tmp_path: Path) -> None:
    """Simulator seeds 167056, 249419, ... (a TM restart and a short listing): the floor
    was stored best effort, so the sinks were told to commit a checkpoint that the stored
    floor did not cover; a restarted TM, reading the older floor and a listing missing
    that checkpoint, restored below output the sinks had committed."""
    backend = FloorOutage(f"file://{tmp_path}")
    core = new_core(backend)
    sessions, _ = prepare_all(core)
    first = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    backend.floor_down = True
    second = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    told = drain(sessions)
    completed = {m.complete.checkpoint_id for m in told if m.WhichOneof("body") == "complete"}
    aborted = {m.abort.checkpoint_id for m in told if m.WhichOneof("body") == "abort"}
    assert completed == {first} and aborted == {second}, (
        f"sinks told to commit {sorted(completed)} with the stored floor at {first}")
    assert core.checkpoints.completed_floor == second  # its metadata is on storage

    backend.floor_down = False  # the running TM goes on: the next checkpoint completes
    third = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    assert next_message(sessions[0], "complete").complete.checkpoint_id == third
    assert backend.get_meta(COMPLETED_META) == str(third).encode()


def test_a_restarted_master_never_restores_below_what_the_sinks_were_told_to_commit(
        tmp_path: Path) -> None:
    backend = FloorOutage(f"file://{tmp_path}")
    core = new_core(backend)
    sessions, _ = prepare_all(core)
    checkpoint(core)
    assert core.backend_io.wait_idle(10)
    backend.floor_down = True
    newest = checkpoint(core)
    assert core.backend_io.wait_idle(10)
    committed = max([m.complete.checkpoint_id for m in drain(sessions)
                     if m.WhichOneof("body") == "complete"])

    backend.floor_down = False  # the TM dies; its successor's listing misses the newest
    backend.hide = {newest}
    restarted = new_core(backend, resume=True)
    _, restored = prepare_all(restarted, restarted.generation)
    assert restored >= committed, (f"restored checkpoint {restored} below checkpoint "
                                   f"{committed}, whose output the sinks committed")


def test_a_restarted_master_never_reuses_an_id_whose_commit_point_may_land_late(
        tmp_path: Path) -> None:
    """Simulator seed 5646: a TM died with checkpoint 1's ``_metadata`` write in flight;
    its successor handed out id 1 again and its sinks committed that checkpoint; the dead
    TM's write then landed over it, and a recovery restored the dead TM's snapshots."""
    backend = LateLanding(f"file://{tmp_path}")
    dead = new_core(backend)
    prepare_all(dead)
    backend.late, backend.gate = 1, threading.Event()
    in_flight = checkpoint(dead)
    assert backend.entered.wait(10)  # the TM dies here, its write still on its way

    restarted = new_core(backend, resume=True)
    sessions, _ = prepare_all(restarted, restarted.generation)
    own = checkpoint(restarted)
    assert restarted.backend_io.wait_idle(10)
    assert next_message(sessions[0], "complete").complete.checkpoint_id == own
    backend.gate.set()  # the dead TM's write lands now
    assert dead.backend_io.wait_idle(10)
    assert own > in_flight, f"id {own} handed out again"
    _, restored = recover(restarted, sessions)
    assert restored == own
    assert backend.read_metadata(restored)["generation"] != 1, (
        "restored the dead TM's snapshots under the id whose output the sinks committed")
