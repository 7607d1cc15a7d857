"""A gray release reads its quiescent checkpoint's metadata off the TM's lock.

When the switched batch of workers registered again, the upgrade read checkpoint ``n``'s
metadata (the batch's snapshot handles) while holding ``core.lock``: a state backend that
hung there hung ``jstorm status``, heartbeats and control messages (the rescale's commit had
the same fault, issue 23 hole 8). Real MasterCore, file backend, code packages loaded in a
child process; workers are control-stream sessions driven by hand.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Config, pickling
from jstormpy.api.errors import JStormError
from jstormpy.cli.main import load_topology_file
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.operations.codepkg import build_package
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends.base import METADATA_NAME, checkpoint_prefix, seal_blob
from jstormpy.state_backends.file import FileBackend
from tests.unit.test_launch_attempts import next_message
from tests.unit.test_rescale_commit import ack_all, start, topo, wait_until

CODE = '''
from jstormpy import Bolt, Spout, TopologyBuilder


class Src(Spout):
    outputs = ("word",)


class Count(Bolt):
    outputs = ("word", "n")
    VERSION = {version!r}


b = TopologyBuilder("gray")
b.set_spout("src", Src, parallelism=2)
b.set_bolt("count", Count, parallelism=2).fields_grouping("src", ["word"])
topology = b.build()
'''


class GatedReads(FileBackend):
    """A file backend whose metadata reads of one checkpoint wait for ``release``."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.gate_id: int | None = None
        self.entered = threading.Event()
        self.release = threading.Event()

    def read_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        if checkpoint_id == self.gate_id:
            self.entered.set()
            assert self.release.wait(30), "the test never released the backend"
        return super().read_metadata(checkpoint_id)


def register(core: MasterCore, wid: int, version: str, generation: int = 0) -> WorkerSession:
    session = WorkerSession(wid, 100 + wid, "127.0.0.1", 0, version)
    core.register(session, generation)
    return session


def test_status_answers_while_the_backend_hangs_in_the_switchs_restore(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    v1, v2 = tmp_path / "v1" / "topo.py", tmp_path / "v2" / "topo.py"
    for path, version in ((v1, "v1"), (v2, "v2")):
        path.parent.mkdir()
        path.write_text(CODE.format(version=version))
    topology = load_topology_file(str(v1)).topology
    (run / "topology.pkl").write_bytes(pickling.dumps(topology))
    backend = GatedReads(f"file://{tmp_path / 'ckpt'}")
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000)
    core = MasterCore("gray", config, topology.descriptor(), backend)
    core.upgrade.attach_run_dir(run)
    core.rescale.attach_run_dir(run)
    sessions = [register(core, w, "v1") for w in (0, 1)]
    start(core, sessions)

    package, entry = build_package(v2)
    core.upgrade.request("start", package, entry, workers=[1])
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "quiescing", "quiescing")
    quiescent = core.upgrade.checkpoint_id
    assert quiescent is not None
    backend.gate_id = quiescent
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "stopping", "stopping")
    assert next_message(sessions[1], "shutdown").shutdown.exit_code == 75
    label = core.upgrade.version_of(1)
    assert label != "v1"

    # the batch worker comes back on the new code: the upgrade reads n's metadata
    registered = threading.Thread(target=lambda: register(core, 1, label, core.generation),
                                  daemon=True)
    registered.start()
    assert backend.entered.wait(15), "the switch never read its quiescent checkpoint"
    answered: list[dict[str, Any]] = []
    asker = threading.Thread(target=lambda: answered.append(core.status()), daemon=True)
    asker.start()
    asker.join(3)
    hung = not answered
    backend.release.set()
    asker.join(10)
    registered.join(10)
    assert not hung, "jstorm status hung while the backend read the quiescent checkpoint"

    # the switch goes on as before: the batch restores n, then everyone resumes
    batch = core.sessions[1]
    prepare = next_message(batch, "prepare").prepare
    assert prepare.partial and prepare.checkpoint_id == quiescent
    assert {r.task_id for r in prepare.restores} == set(prepare.task_ids) and all(
        f"chk-{quiescent:010d}" in r.handle for r in prepare.restores)
    core.on_ready(pb.Ready(worker_id=1, generation=core.generation, ok=True))
    assert core.upgrade.phase == "upgrading"
    assert next_message(sessions[0], "resume").resume.generation == core.generation


# -- a Topology Master resumed in the middle of a gray release (issue 37's mutation survivors)

def resumed_mid_upgrade(tmp_path: Path, stable: str, target: str,
                        ) -> tuple[MasterCore, dict[int, WorkerSession]]:
    """A TM resumed while worker 1 of three runs ``target`` and workers 0 and 2 the stable
    code (``code/assignment.json``, as the TM before it stored it); its workers registered
    on their assigned code and running."""
    run = tmp_path / "run"
    (run / "code").mkdir(parents=True)
    (run / "code" / "assignment.json").write_text(json.dumps(
        {"stable": stable, "target": target, "assigned": {"1": target}}))
    topology = topo()
    (run / "topology.pkl").write_bytes(pickling.dumps(topology))
    config = Config(workers=3, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000)
    core = MasterCore("gray", config, topology.descriptor(),
                      FileBackend(f"file://{tmp_path / 'ckpt'}"), resume=True)
    core.upgrade.attach_run_dir(run)
    core.rescale.attach_run_dir(run)
    sessions = {w: register(core, w, core.upgrade.version_of(w)) for w in (0, 1, 2)}
    start(core, list(sessions.values()))
    return core, sessions


# the tenth package is "v10", below "v9" as a string: versions are compared for equality
@pytest.mark.parametrize(("stable", "target"), [("v1", "v2"), ("v9", "v10")])
def test_a_resumed_master_goes_on_with_the_upgrade_its_predecessor_left(
        tmp_path: Path, stable: str, target: str) -> None:
    core, _ = resumed_mid_upgrade(tmp_path, stable, target)
    status = core.upgrade.status()
    assert status["phase"] == "upgrading" and status["target_version"] == target
    assert core.upgrade.version_of(1) == target and core.upgrade.version_of(0) == stable


@pytest.mark.parametrize(("stable", "target"), [("v1", "v2"), ("v9", "v10")])
def test_a_stable_worker_failing_leaves_the_upgrade_an_upgraded_one_rolls_it_back(
        tmp_path: Path, stable: str, target: str) -> None:
    """Between switches, the failure of a worker on the stable code is an ordinary
    recovery: the upgrade stays, with no error. The failure of a worker on the new code
    rolls the whole upgrade back (the new code is suspect)."""
    core, sessions = resumed_mid_upgrade(tmp_path, stable, target)
    core.worker_lost(sessions[0], "killed")
    status = core.upgrade.status()
    assert (status["phase"], status["error"]) == ("upgrading", ""), status
    assert core.upgrade.version_of(1) == target
    core.worker_lost(sessions[1], "killed")
    status = core.upgrade.status()
    assert status["phase"] == "rolled_back" and "worker 1 failed" in status["error"]
    assert core.upgrade.version_of(1) == stable


def test_an_upgraded_worker_lost_starts_one_recovery_named_after_the_loss(
        tmp_path: Path) -> None:
    """The upgrade rolled back by the loss of a worker on the new code starts no recovery
    of its own: the core's recovery of the lost worker is the one, a single new
    generation counted once against the restart strategy, its reason the loss."""
    core, sessions = resumed_mid_upgrade(tmp_path, "v1", "v2")
    generation = core.generation
    core.worker_lost(sessions[1], "killed")
    assert core.upgrade.status()["phase"] == "rolled_back"
    assert core.generation == generation + 1
    assert core.recovery_reason.startswith("worker 1 lost: killed"), core.recovery_reason


def test_complete_switches_the_workers_left_on_the_stable_code_before_it_completes(
        tmp_path: Path) -> None:
    """``upgrade --complete`` while workers 0 and 2 still run the stable code: one switch
    of both to the new code, and the upgrade is completed only after it (not at once,
    with the new code declared stable while two workers run the old)."""
    core, _ = resumed_mid_upgrade(tmp_path, "v1", "v2")
    status = core.upgrade.request("complete")
    assert status["phase"] in ("holding", "quiescing"), status
    assert status["stable_version"] == "v1"
    assert [core.upgrade.version_of(w) for w in (0, 1, 2)] == ["v1", "v2", "v1"]


def test_an_unknown_upgrade_action_is_refused_naming_it(tmp_path: Path) -> None:
    """gRPC hands ``upgrade`` any action string: one the TM does not know is refused with
    its name, not answered with the status as if it had been done."""
    core, _ = resumed_mid_upgrade(tmp_path, "v1", "v2")
    for action in ("undo", "switch", "stop"):
        with pytest.raises(JStormError, match=f"unknown upgrade action '{action}'"):
            core.upgrade.request(action)
    assert core.upgrade.status()["phase"] == "upgrading"


@pytest.mark.parametrize(("stable", "target"), [("v1", "v2"), ("v9", "v10")])
def test_a_switch_given_up_keeps_the_workers_an_earlier_switch_upgraded(
        tmp_path: Path, stable: str, target: str) -> None:
    """``upgrade --continue`` of worker 0 is given up when worker 2 (stable, not in the
    batch) fails during the switch: worker 0 stays on the stable code, worker 1 on the
    new one, and the upgrade waits for the user again."""
    core, sessions = resumed_mid_upgrade(tmp_path, stable, target)
    core.upgrade.request("continue", workers=[0])
    assert core.upgrade.phase in ("holding", "quiescing")
    core.worker_lost(sessions[2], "killed")
    status = core.upgrade.status()
    assert status["phase"] == "upgrading" and "worker 2 failed" in status["error"], status
    assert status["target_version"] == target
    assert [core.upgrade.version_of(w) for w in (0, 1, 2)] == [stable, target, stable]


# -- a whole gray release, as the CLI drives it through gRPC (issue 37's mutation survivors)

def grpc(action: str) -> str:
    """``action`` as the gRPC server hands it to the controller: a string made at run time,
    not the interned literal of this source (``is`` would tell them apart)."""
    return "".join(list(action))


@dataclass(frozen=True)
class SwitchSeen:
    """When the test saw a switch's steps (``time.monotonic``): its quiescent checkpoint
    triggered and acked, the batch told to stop, the last of the batch registering (before
    and after the call) and its last Ready (before and after)."""

    triggered: float
    acked: float
    stopping: float
    registering: float
    registered: float
    readying: float
    ready: float


def switch(core: MasterCore, sessions: dict[int, WorkerSession], batch: list[int]
           ) -> SwitchSeen:
    """Drive the switch of ``batch`` the controller started: its quiescent checkpoint
    acked, the batch restarting on its assigned code, restoring, resuming. Returns when
    the test saw each step."""
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "quiescing", "quiescing")
    triggered = time.monotonic()
    quiescent = core.upgrade.checkpoint_id
    assert quiescent is not None
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    acked = time.monotonic()
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "stopping", "stopping")
    stopping = time.monotonic()
    registering = registered = readying = ready = 0.0
    for w in batch:
        assert next_message(sessions[w], "shutdown").shutdown.exit_code == 75
        registering = time.monotonic()
        sessions[w] = register(core, w, core.upgrade.version_of(w), core.generation)
        registered = time.monotonic()
    for w in batch:
        prepare = next_message(sessions[w], "prepare").prepare
        assert prepare.partial
        readying = time.monotonic()
        core.on_ready(pb.Ready(worker_id=w, generation=core.generation, ok=True))
        ready = time.monotonic()
    for w in sorted(set(sessions) - set(batch)):
        assert next_message(sessions[w], "resume").resume.generation == core.generation
    return SwitchSeen(triggered, acked, stopping, registering, registered, readying, ready)


def gray_master(tmp_path: Path, guarantee: str = "exactly_once",
                ) -> tuple[MasterCore, dict[int, WorkerSession], Path]:
    """A TM running CODE's v1 on two workers; returns it, the sessions and v2's file."""
    run = tmp_path / "run"
    run.mkdir()
    v1, v2 = tmp_path / "v1" / "topo.py", tmp_path / "v2" / "topo.py"
    for path, version in ((v1, "v1"), (v2, "v2")):
        path.parent.mkdir()
        path.write_text(CODE.format(version=version))
    topology = load_topology_file(str(v1)).topology
    (run / "topology.pkl").write_bytes(pickling.dumps(topology))
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000, upgrade_expiry_ms=600_000,
                    guarantee=guarantee)
    core = MasterCore("gray", config, topology.descriptor(),
                      FileBackend(f"file://{tmp_path / 'ckpt'}"))
    core.upgrade.attach_run_dir(run)
    core.rescale.attach_run_dir(run)
    sessions = {w: register(core, w, "v1") for w in (0, 1)}
    start(core, list(sessions.values()))
    return core, sessions, v2


def test_a_gray_release_from_start_to_complete(tmp_path: Path) -> None:
    """``jstorm upgrade``: --status, start on worker 1, --continue on worker 0, --complete;
    each switch's history times its quiescent checkpoint; while upgrading, the status
    says when the upgrade expires."""
    core, sessions, v2 = gray_master(tmp_path)
    idle = core.upgrade.request(grpc("status"))
    assert (idle["phase"], idle["expires_in_s"]) == ("idle", None)

    package, entry = build_package(v2)
    core.upgrade.request(grpc("start"), package, entry, workers=[1])
    switch(core, sessions, [1])
    status = core.upgrade.request(grpc("status"))
    assert status["phase"] == "upgrading" and status["versions"] == {"0": "v1", "1": "v2"}
    assert status["expires_in_s"] is not None and 0 < status["expires_in_s"] <= 600
    core.tick()  # long before upgrade_expiry_ms: the upgrade holds, not rolled back
    assert core.upgrade.phase == "upgrading", core.upgrade.error
    # GetTopology serves the upgraded worker its package, the other the topology it runs
    version, code, served_entry, digest = core.upgrade.package_for(1)
    assert (version, served_entry) == ("v2", entry) and code and digest
    assert core.upgrade.package_for(0) == ("v1", b"", "", "")

    before = time.monotonic()
    core.upgrade.request(grpc("continue"), workers=[0])
    seen = switch(core, sessions, [0])
    after = time.monotonic()
    record = core.upgrade.status()["switches"][-1]
    assert record["kind"] == "upgrade" and record["workers"] == [0]
    # the quiescent checkpoint's time covers what the test saw of it, and no more than
    # from the request to the stop (rounded to 0.1 ms)
    assert (seen.acked - seen.triggered) * 1000 - 0.05 <= record["quiesce_ms"] \
        <= (seen.stopping - before) * 1000 + 0.05, record
    # the switch's whole time covers its trigger to its stop, and no more than the request
    assert (seen.stopping - seen.triggered) * 1000 - 0.05 <= record["total_ms"] \
        <= (after - before) * 1000 + 0.05, record
    # the restore, from the batch registered to its Ready, is the time between the calls
    assert (seen.readying - seen.registered) * 1000 - 0.05 <= record["restore_ms"] \
        <= (seen.ready - seen.registering) * 1000 + 0.05, record
    # every step time of the switch is in milliseconds to 0.1 ms, as the history shows it
    times = ("pause_ms", "total_ms", "quiesce_ms", "restart_ms", "restore_ms")
    assert all(record[k] == round(record[k], 1) for k in times), record

    done = core.upgrade.request(grpc("complete"))
    assert done["phase"] == "completed" and done["stable_version"] == "v2", done
    assert done["expires_in_s"] is None


def test_an_upgrade_to_incompatible_code_is_refused_naming_the_problem(tmp_path: Path) -> None:
    """New code whose wiring differs (here a bolt's parallelism) is refused at ``start``
    with the problems and, for a parallelism change, the hint to rescale; nothing
    changed: no switch, every worker on the running code, the refused package not kept."""
    core, sessions, _ = gray_master(tmp_path)
    before = core.upgrade.status()
    wider = tmp_path / "wider" / "topo.py"
    wider.parent.mkdir()
    wider.write_text(CODE.format(version="v3").replace(
        'set_bolt("count", Count, parallelism=2)', 'set_bolt("count", Count, parallelism=3)'))
    with pytest.raises(JStormError, match=r"(?s)not compatible.*"
                       r"component 'count': parallelism 2 -> 3.*upgrade with --rescale"):
        core.upgrade.request(grpc("start"), *build_package(wider), workers=[1])
    after = core.upgrade.status()
    assert after["phase"] == "idle" and after["versions"] == {"0": "v1", "1": "v1"}
    assert after["packages"] == before["packages"]


def test_a_switch_whose_quiescent_checkpoint_fails_resumes_the_spouts(tmp_path: Path) -> None:
    """A switch's quiescent checkpoint pauses every spout. A task failing that checkpoint
    gives the switch up (back to idle, every worker on the running code, the reason in
    the errors) and the spouts emit again: the topology is not left paused."""
    core, sessions, v2 = gray_master(tmp_path)
    core.upgrade.request(grpc("start"), *build_package(v2), workers=[1])
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "quiescing", "quiescing")
    quiescent = core.upgrade.checkpoint_id
    assert quiescent is not None
    for session in sessions.values():  # what was sent before: not what is asserted
        while not session.outq.empty():
            session.outq.get_nowait()
    core.on_checkpoint_failed(pb.CheckpointFailed(
        checkpoint_id=quiescent, generation=core.generation, task_id=min(core.all_tasks),
        reason="disk full"))
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "idle", "the switch given up")
    for w, session in sessions.items():
        assert next_message(session, "resume").resume.generation == core.generation, w
    status = core.upgrade.status()
    assert status["versions"] == {"0": "v1", "1": "v1"} and "disk full" in status["error"]


def test_a_switch_whose_quiescent_commit_point_is_malformed_rolls_back_with_the_reason(
        tmp_path: Path) -> None:
    """The quiescent checkpoint's commit point, damaged after it was written (a task id
    that is not a number, as another tool might leave it), cannot give the switch its
    snapshot handles: the upgrade is rolled back at once with the reason, not left
    restoring until its step times out (``upgrade_step_timeout_ms``, two minutes here)."""
    core, sessions, v2 = gray_master(tmp_path)
    core.upgrade.request(grpc("start"), *build_package(v2), workers=[1])
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "quiescing", "quiescing")
    quiescent = core.upgrade.checkpoint_id
    assert quiescent is not None
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "stopping", "stopping")
    meta = core.backend.read_metadata(quiescent)
    meta["tasks"] = {f"task-{t}": entry for t, entry in meta["tasks"].items()}
    core.backend.put_object(checkpoint_prefix(quiescent) + METADATA_NAME,
                            seal_blob(json.dumps(meta).encode()))
    assert next_message(sessions[1], "shutdown").shutdown.exit_code == 75
    generation = core.generation
    sessions[1] = register(core, 1, core.upgrade.version_of(1), core.generation)
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "rolled_back",
               "the upgrade rolled back")
    status = core.upgrade.status()
    assert status["versions"] == {"0": "v1", "1": "v1"}
    assert f"quiescent checkpoint {quiescent} unreadable" in status["error"], status["error"]
    assert "'task-" in status["error"], status["error"]
    # the restarted worker got no restore: a recovery restores every worker, named after
    # the rollback (else worker 1 waits for a Prepare for ever). Its restore is resolved
    # while worker 1 restarts: it finds the same malformed commit point and falls back,
    # one generation later, past it
    assert core.generation in (generation + 1, generation + 2)
    assert core.recovery_reason.startswith(
        ("upgrade aborted: ", f"checkpoint {quiescent} unusable")), core.recovery_reason


def test_of_two_upgrades_started_together_the_second_to_load_is_refused(
        tmp_path: Path) -> None:
    """An upgrade's new code is checked outside the TM's lock (it runs user code in a
    child process). One started while another's code loads, and switched first, wins:
    the slower one is refused when its check ends, and the first upgrade is untouched."""
    core, sessions, v2 = gray_master(tmp_path)
    gate = tmp_path / "gate"
    slow = tmp_path / "slow" / "topo.py"
    slow.parent.mkdir()
    slow.write_text(f"""
import os, time
deadline = time.monotonic() + 60
while not os.path.exists({str(gate)!r}) and time.monotonic() < deadline:
    time.sleep(0.01)  # the test holds this code's check until the other upgrade switched
""" + CODE.format(version="slow"))
    outcome: list[BaseException | dict[str, Any]] = []

    def start_slow() -> None:
        try:
            outcome.append(core.upgrade.request("start", *build_package(slow), workers=[0]))
        except BaseException as exc:  # noqa: BLE001 - the outcome is what is asserted
            outcome.append(exc)

    slow_start = threading.Thread(target=start_slow, daemon=True)
    slow_start.start()
    wait_until(lambda: len(core.upgrade.status()["packages"]) == 1, "the slow package stored")
    core.upgrade.request("start", *build_package(v2), workers=[1])
    switch(core, sessions, [1])
    first = core.upgrade.status()["target_version"]
    gate.touch()
    slow_start.join(60)
    assert not slow_start.is_alive()
    assert isinstance(outcome[0], JStormError) and "another upgrade started meanwhile" \
        in str(outcome[0]), outcome
    status = core.upgrade.status()
    assert (status["phase"], status["target_version"]) == ("upgrading", first)
    assert status["versions"] == {"0": "v1", "1": first}


def test_a_worker_restarted_by_a_switch_is_prepared_once_at_most_once_too(
        tmp_path: Path) -> None:
    """Under ``at_most_once`` a worker registering while the topology runs is prepared on
    its own at once; a worker the switch restarted is the switch's: it gets the switch's
    one Prepare, not a second one of the core's."""
    core, sessions, v2 = gray_master(tmp_path, guarantee="at_most_once")
    core.upgrade.request("start", *build_package(v2), workers=[1])
    switch(core, sessions, [1])
    assert core.upgrade.phase == "upgrading"
    left = []
    while not sessions[1].outq.empty():
        left.append(sessions[1].outq.get_nowait().WhichOneof("body"))
    assert "prepare" not in left, f"worker 1 was prepared twice: then {left}"


def test_a_rescaling_upgrade_after_a_completed_gray_release_loads_the_running_code(
        tmp_path: Path) -> None:
    """Once every worker runs v2 (``--complete``), v2 is the stable code: ``upgrade
    --rescale`` to v3 (count at parallelism 3) redistributes the state written by v2's
    classes, which the TM loads from v2's package (unpacked in the run directory), and
    goes on to its quiescent checkpoint."""
    core, sessions, v2 = gray_master(tmp_path)
    core.upgrade.request("start", *build_package(v2), workers=[0, 1])
    switch(core, sessions, [0, 1])
    assert core.upgrade.request("complete")["stable_version"] == "v2"
    v3 = tmp_path / "v3" / "topo.py"
    v3.parent.mkdir()
    v3.write_text(CODE.format(version="v3").replace(
        'set_bolt("count", Count, parallelism=2)', 'set_bolt("count", Count, parallelism=3)'))
    core.upgrade.request("rescale", *build_package(v3))
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "quiescing", "quiescing")
    assert core.rescale.status()["error"] == ""
    assert (tmp_path / "run" / "code" / "unpacked").is_dir()


def test_a_killed_topology_takes_no_quiescent_checkpoint(tmp_path: Path) -> None:
    """``upgrade --continue`` while a checkpoint is in flight holds (step 1) until that one
    ends; when the topology is killed meanwhile, its end (late acks) does not make the
    TM trigger the switch's quiescent checkpoint: its workers were told to shut down."""
    core, sessions = resumed_mid_upgrade(tmp_path, "v1", "v2")
    cid = core.trigger_checkpoint(force=True)
    assert cid is not None
    core.upgrade.request("continue", workers=[0])
    assert core.upgrade.phase == "holding"
    core.kill("killed by the test")
    ack_all(core, cid)
    assert core.backend_io.wait_idle(10)
    core.tick()
    for s in sessions.values():
        sent = []
        while not s.outq.empty():
            sent.append(s.outq.get_nowait().WhichOneof("body"))
        after_kill = sent[sent.index("shutdown"):]
        assert "trigger" not in after_kill, f"worker {s.worker_id} got {after_kill}"


@pytest.mark.parametrize("end", ["killed", "drained"])
def test_a_switch_held_when_the_topology_ends_ends_with_the_reason(
        tmp_path: Path, end: str) -> None:
    """``upgrade --continue`` while a checkpoint is in flight holds (step 1); if the
    topology ends meanwhile (``jstorm kill``, or that checkpoint was a bounded job's final
    one and it drained), the switch cannot proceed: it ends with the reason, as a rescale
    does, so ``jstorm upgrade`` returns instead of waiting on a phase that never moves.
    No worker is told to restart on other code."""
    core, sessions = resumed_mid_upgrade(tmp_path, "v1", "v2")
    cid = core.trigger_checkpoint(force=True)
    assert cid is not None
    core.upgrade.request("continue", workers=[0])
    assert core.upgrade.phase == "holding"
    if end == "killed":
        core.kill("killed by the test")
    for task in core.all_tasks:  # every spout's end of stream precedes the barrier
        handle = core.backend.put_snapshot(cid, task, b"")
        core.on_checkpoint_ack(pb.CheckpointAck(
            checkpoint_id=cid, generation=core.generation, task_id=task, handle=handle,
            finished=end == "drained"))
    assert core.backend_io.wait_idle(10)
    core.tick()
    assert core.state == end
    status = core.upgrade.status()
    assert status["phase"] == "upgrading", status  # worker 1 still runs v2: not switching
    assert status["error"] == f"the topology is {end}", status
    assert [core.upgrade.version_of(w) for w in (0, 1, 2)] == ["v1", "v2", "v1"]
    for s in sessions.values():
        while not s.outq.empty():
            msg = s.outq.get_nowait()
            assert not (msg.WhichOneof("body") == "shutdown" and msg.shutdown.exit_code == 75)


def test_a_switch_whose_topology_is_killed_while_it_restores_restarts_no_worker(
        tmp_path: Path) -> None:
    """Killed in step 4 (the batch registered on the new code, the quiescent checkpoint
    being read): the switch ends with the reason, and its abort does not send the batch a
    restart back to the stable code (exit 75, which its launcher would obey) after the
    kill told every worker to stop; nor is the batch prepared when the read returns."""
    core, sessions, v2 = gray_master(tmp_path)
    gated = GatedReads(core.backend.uri)
    core.backend = gated
    core.upgrade.request("start", *build_package(v2), workers=[1])
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "quiescing", "quiescing")
    quiescent = core.upgrade.checkpoint_id
    assert quiescent is not None
    gated.gate_id = quiescent
    ack_all(core, quiescent)
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "stopping", "stopping")
    assert next_message(sessions[1], "shutdown").shutdown.exit_code == 75
    sessions[1] = register(core, 1, "v2", core.generation)
    assert gated.entered.wait(10) and core.upgrade.phase == "restoring"
    core.kill("killed by the test")
    core.tick()
    gated.release.set()
    assert core.backend_io.wait_idle(10)
    status = core.upgrade.status()
    assert (status["phase"], status["error"]) == ("idle", "the topology is killed"), status
    sent = []
    while not sessions[1].outq.empty():
        msg = sessions[1].outq.get_nowait()
        sent.append((msg.WhichOneof("body"), msg.shutdown.exit_code))
    assert [body for body, _ in sent] == ["shutdown"] and sent[0][1] != 75, sent
