"""A rescale's commit point in the Topology Master (issue 23, hole 8).

The rescale wrote checkpoint ``m``'s metadata (its commit point) and then deleted every
older checkpoint while holding ``core.lock``: a state backend that hung during the commit
hung ``jstorm status``, heartbeats and control messages with it, and the pre-rescale
checkpoint was gone before the new layout had restored anything. Real MasterCore, real
file backend, real run directory; the workers are control-stream sessions driven by hand.
"""

from __future__ import annotations

import pickle
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, Config, Spout, TopologyBuilder, pickling
from jstormpy.api.errors import CheckpointError, JStormError
from jstormpy.api.topology import Topology
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.master.quiescent_cut import QuiescentCut
from jstormpy.master.rescale import RESIZABLE_ENV
from jstormpy.master.rescale_steps import RescaleSteps
from jstormpy.master.rescale_steps import perform as perform_rescale
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends.file import FileBackend
from tests.unit.test_launch_attempts import next_message


class Src(Spout):
    outputs = ("word",)


class Count(Bolt):
    outputs = ("word", "n")


def topo() -> Topology:
    b = TopologyBuilder("rc")
    b.set_spout("src", Src, parallelism=1)
    b.set_bolt("count", Count, parallelism=2).fields_grouping("src", ["word"])
    return b.build()


class GatedBackend(FileBackend):
    """A file backend whose metadata write of one checkpoint waits for ``release``."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.gate_id: int | None = None
        self.entered = threading.Event()
        self.release = threading.Event()

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        if checkpoint_id == self.gate_id:
            self.entered.set()
            assert self.release.wait(30), "the test never released the backend"
        super().create_metadata(checkpoint_id, metadata)


def wait_until(pred: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"not reached in time: {what}"
        time.sleep(0.01)  # polling interval of a condition


def setup(tmp_path: Path, backend_cls: type[GatedBackend] = GatedBackend,
          ) -> tuple[MasterCore, GatedBackend, list[WorkerSession]]:
    run = tmp_path / "run"
    run.mkdir()
    topology = topo()
    (run / "topology.pkl").write_bytes(pickling.dumps(topology))
    backend = backend_cls(f"file://{tmp_path / 'ckpt'}")
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000, checkpoints_retained=3)
    core = MasterCore("rc", config, topology.descriptor(), backend)
    core.rescale.attach_run_dir(run)
    core.upgrade.attach_run_dir(run)
    sessions = [register(core, w) for w in (0, 1)]
    start(core, sessions)
    return core, backend, sessions


def register(core: MasterCore, wid: int, generation: int = 0) -> WorkerSession:
    session = WorkerSession(wid, 100 + wid, "127.0.0.1", 0, "v1")
    core.register(session, generation)
    return session


def start(core: MasterCore, sessions: list[WorkerSession]) -> dict[int, str]:
    """Prepare every worker; returns the handles the tasks were told to restore."""
    handles = {}
    for s in sessions:
        prepare = next_message(s, "prepare").prepare
        handles.update({r.task_id: r.handle for r in prepare.restores})
        core.on_ready(pb.Ready(worker_id=s.worker_id, generation=prepare.generation, ok=True))
    assert core.state == "running"
    return handles


def ack_all(core: MasterCore, cid: int) -> None:
    """Every task snapshots ``cid`` for real (a pickled snapshot in the backend)."""
    for task in core.all_tasks:
        snap = {"max_parallelism": 128, "states": {}}
        handle = core.backend.put_snapshot(cid, task, pickle.dumps(snap))
        core.on_checkpoint_ack(pb.CheckpointAck(checkpoint_id=cid, generation=core.generation,
                                                task_id=task, handle=handle))


def rescale_to_commit(core: MasterCore, backend: GatedBackend) -> int:
    """Start a rescale of count 2 -> 3 and complete its quiescent checkpoint; returns it."""
    core.rescale.request({"count": 3})
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "quiescing", "quiescing")
    quiescent = core.rescale.checkpoint_id
    assert quiescent is not None
    backend.gate_id = core.checkpoints.next_id  # the rescaled checkpoint m
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    return quiescent


def test_status_answers_while_the_backend_hangs_in_the_rescales_commit(
        tmp_path: Path) -> None:
    core, backend, _ = setup(tmp_path)
    quiescent = rescale_to_commit(core, backend)
    core.tick()  # the quiescent checkpoint completed: redistribution starts
    assert backend.entered.wait(15), "the rescale never wrote its commit point"
    answered: list[dict[str, Any]] = []
    asker = threading.Thread(target=lambda: answered.append(core.status()), daemon=True)
    asker.start()
    asker.join(3)
    hung = not answered
    backend.release.set()
    asker.join(10)
    assert not hung, "jstorm status hung while the backend wrote the rescale's commit point"
    assert answered[0]["rescale"]["phase"] == "committing"
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "restarting", "committed")
    assert core.rescale.restored_id == backend.gate_id
    assert quiescent in backend.list_completed()


def test_the_pre_rescale_checkpoint_stays_until_the_new_layout_completed_one(
        tmp_path: Path) -> None:
    core, backend, sessions = setup(tmp_path)
    backend.release.set()
    quiescent = rescale_to_commit(core, backend)
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "restarting", "committed")
    rescaled = core.rescale.restored_id
    assert rescaled is not None
    assert core.backend_io.wait_idle(10)
    # after the commit point, before the new layout restored anything: a failure here
    # still finds the last checkpoint of the old layout
    assert backend.list_completed() == [quiescent, rescaled]
    for s in sessions:
        assert next_message(s, "shutdown").shutdown.exit_code == 75
    new = [register(core, w, core.generation) for w in (0, 1)]
    handles = start(core, new)
    assert set(handles) == {1, 2, 3, 4} and all(f"chk-{rescaled:010d}" in h
                                                 for h in handles.values())
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "idle", "rescale finished")
    assert core.backend_io.wait_idle(10)
    assert quiescent in backend.list_completed(), "deleted before the new layout checkpointed"
    cid = core.trigger_checkpoint(force=True)
    assert cid is not None
    ack_all(core, cid)
    assert core.backend_io.wait_idle(10)
    core.tick()
    assert core.backend_io.wait_idle(10)
    assert backend.list_completed() == [rescaled, cid]  # the old layout's are gone


def test_a_checkpoint_of_the_old_layout_never_restores_into_the_new_one() -> None:
    """The pre-rescale checkpoint is kept, so a recovery that finds the rescaled one
    unusable must not fall back to it: its snapshots are the old layout's tasks."""
    from master.restore_plan import LATEST, ReadMetadata, RestorePlan, RetryLater

    plan = RestorePlan(4, LATEST, stateful=True, persisted_generation=4, completed_floor=3,
                       layout_floor=5)
    assert plan.listed([3, 5]) == [ReadMetadata(5)]
    plan = RestorePlan(4, LATEST, stateful=True, persisted_generation=4, completed_floor=3,
                       bad={5}, layout_floor=5)
    [action] = plan.listed([3, 5])
    assert isinstance(action, RetryLater) and "[3] hold the layout before the rescale" \
        in action.reason


class FailingCommit(GatedBackend):
    """Its metadata write of the gated checkpoint lands, then reports an error (a write
    that timed out on the client but reached the store)."""

    def create_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        FileBackend.create_metadata(self, checkpoint_id, metadata)
        if checkpoint_id == self.gate_id:
            from jstormpy.api.errors import BackendTimeoutError

            raise BackendTimeoutError("metadata write timed out")


def test_a_failed_commit_point_keeps_the_old_layout_and_no_trace_of_the_new(
        tmp_path: Path) -> None:
    core, backend, sessions = setup(tmp_path, FailingCommit)
    run = tmp_path / "run"
    before = (run / "topology.pkl").read_bytes()
    quiescent = rescale_to_commit(core, backend)
    rescaled = backend.gate_id
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "idle", "aborted")
    assert core.backend_io.wait_idle(10)
    assert "cannot commit the rescaled checkpoint" in core.rescale.error
    assert backend.list_completed() == [quiescent]  # the landed write was discarded
    assert rescaled in core.checkpoints.bad
    assert (run / "topology.pkl").read_bytes() == before
    assert not (run / "rescale-pending.json").exists() and not (run / "rescale.json").exists()
    assert core.state == "running" and core.checkpoints.layout_floor == 0
    for s in sessions:
        assert next_message(s, "resume").resume.generation == core.generation


def test_a_rescale_is_done_once_the_new_layout_runs_and_its_history_times_its_steps(
        tmp_path: Path) -> None:
    """``jstorm rescale`` reports the rescale done only when the new layout's generation
    runs (not at its commit point), and its history entry's step times (ms) cover what
    the test saw of each step: the quiescent checkpoint from its trigger to its
    completion, the restart from the commit point to the new layout running."""
    core, backend, sessions = setup(tmp_path)
    backend.release.set()
    old_generation = core.generation
    core.rescale.request({"count": 3})
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "quiescing", "quiescing")
    quiesce_from = time.monotonic()
    quiescent = core.rescale.checkpoint_id
    assert quiescent is not None
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    quiesce_to = time.monotonic()
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "restarting", "committed")
    restart_from = time.monotonic()
    core.tick()
    assert core.status()["rescale"]["phase"] == "restarting", \
        "done before the new layout's workers even registered"
    for s in sessions:
        assert next_message(s, "shutdown").shutdown.exit_code == 75
    # a worker still on the old layout (it missed the shutdown) is restarted, not prepared
    stale = register(core, 0, old_generation)
    assert next_message(stale, "shutdown").shutdown.exit_code == 75
    start(core, [register(core, w, core.generation) for w in (0, 1)])
    restart_to = time.monotonic()
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "idle", "rescale finished")
    record = core.status()["rescale"]["history"][-1]
    assert record["error"] == "" and record["restored_checkpoint"] == core.rescale.restored_id
    # each at least what the test saw (rounded to 0.1 ms)
    assert record["quiesce_ms"] >= (quiesce_to - quiesce_from) * 1000 - 0.05, record
    assert record["restart_ms"] >= (restart_to - restart_from) * 1000 - 0.05, record
    assert record["total_ms"] >= (restart_to - quiesce_from) * 1000 - 0.05, record
    assert record["total_ms"] >= record["quiesce_ms"] + record["restart_ms"] - 0.1, record


def test_after_a_rescale_to_fewer_workers_a_transport_failure_still_starts_a_recovery(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's transport failure starts a recovery unless the TM already knows a worker
    is dead (that report adds nothing). A worker a rescale stopped for good is gone, not
    dead: once the new layout (one worker of two) runs, a transport failure it reports
    restarts the topology."""
    monkeypatch.setenv(RESIZABLE_ENV, "1")
    core, backend, sessions = setup(tmp_path)
    backend.release.set()
    core.rescale.request({}, workers=1)
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "quiescing", "quiescing")
    quiescent = core.rescale.checkpoint_id
    assert quiescent is not None
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "restarting", "committed")
    assert next_message(sessions[0], "shutdown").shutdown.exit_code == 75
    assert next_message(sessions[1], "shutdown").shutdown.exit_code == 0  # for good
    start(core, [register(core, 0, core.generation)])
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "idle", "rescale finished")
    assert core.state == "running"
    core.on_task_error(pb.TaskError(task_id=-1, component="transport",
                                    message="ConnectionError: a connection was lost",
                                    generation=core.generation))
    assert core.state == "recovering"


class Sink(Bolt):
    commits_in_two_phases = True  # as TwoPhaseCommitSink marks its subclasses


def test_a_rescale_waits_for_each_sink_to_commit_its_quiescent_checkpoint(
        tmp_path: Path) -> None:
    """Step "sinks": the staged output of the quiescent checkpoint belongs to the sink's
    old task id, so the rescale goes on only once every sink committed that checkpoint;
    a commit of an earlier checkpoint in the same generation does not count, the
    quiescent one's does."""
    run = tmp_path / "run"
    run.mkdir()
    b = TopologyBuilder("rc")
    b.set_spout("src", Src, parallelism=1)
    b.set_bolt("count", Count, parallelism=2).fields_grouping("src", ["word"])
    b.set_bolt("out", Sink, parallelism=1).shuffle_grouping("count")
    topology = b.build()
    (run / "topology.pkl").write_bytes(pickling.dumps(topology))
    backend = GatedBackend(f"file://{tmp_path / 'ckpt'}")
    backend.release.set()
    core = MasterCore("rc", Config(workers=2, checkpoint_interval_ms=3_600_000),
                      topology.descriptor(), backend)
    core.rescale.attach_run_dir(run)
    core.upgrade.attach_run_dir(run)
    start(core, [register(core, w) for w in (0, 1)])
    (sink,) = core.sink_tasks

    def committed(cid: int) -> None:
        core.on_sink_committed(pb.SinkCommitted(checkpoint_id=cid, task_id=sink,
                                                generation=core.generation))

    earlier = core.trigger_checkpoint(force=True)
    assert earlier is not None
    ack_all(core, earlier)
    assert core.backend_io.wait_idle(10)
    core.tick()
    committed(earlier)
    quiescent = rescale_to_commit(core, backend)
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "sinks", "waiting for sinks")
    core.tick()
    assert core.rescale.phase == "sinks"  # the sink has not committed the quiescent one
    committed(quiescent)
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "restarting",
               "the sink's commit of the quiescent checkpoint let the rescale go on")


def test_after_a_recovery_the_status_counts_the_sinks_re_commit_of_the_restored_checkpoint(
        tmp_path: Path) -> None:
    """``status()["rescale"]["sinks_committed"]`` is the newest checkpoint every sink task
    committed in this generation. A recovery restoring checkpoint ``n`` starts a new one
    where nothing is committed yet; the restored sink re-commits ``n`` and reports it in
    the new generation, and from then on the status names ``n`` again, though the sink
    had reported ``n`` in the generation before."""
    b = TopologyBuilder("rc")
    b.set_spout("src", Src, parallelism=1)
    b.set_bolt("out", Sink, parallelism=1).shuffle_grouping("src")
    topology = b.build()
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000)
    core = MasterCore("rc", config, topology.descriptor(),
                      FileBackend(f"file://{tmp_path / 'ckpt'}"))
    sessions = [register(core, w) for w in (0, 1)]
    start(core, sessions)
    (sink,) = core.sink_tasks

    def committed(cid: int) -> None:
        core.on_sink_committed(pb.SinkCommitted(checkpoint_id=cid, task_id=sink,
                                                generation=core.generation))

    cid = core.trigger_checkpoint(force=True)
    assert cid is not None
    ack_all(core, cid)
    assert core.backend_io.wait_idle(10)
    core.tick()
    committed(cid)
    assert core.rescale.status()["sinks_committed"] == cid
    core.worker_lost(sessions[0], "killed")
    restored = start(core, [register(core, 0), sessions[1]])
    assert restored, "the recovery restored no checkpoint"
    assert core.rescale.status()["sinks_committed"] == 0  # nothing reported in this one
    committed(cid)  # the restored sink's re-commit of its restored checkpoint
    assert core.rescale.status()["sinks_committed"] == cid


def test_a_fenced_rescale_whose_staged_layout_a_newer_master_dropped_ends_aborted(
        tmp_path: Path) -> None:
    """The TM's lease runs out while it writes the rescaled checkpoint's commit point: it
    is fenced, and drops the staged layout from the run directory. A newer TM of the
    same run directory may have dropped it first (it found the rescale staged and not
    committed); the fenced TM's rescale still ends aborted with the reason, not with an
    error about a file that is already gone."""
    from jstormpy.leader_lease import LeaderLease
    from jstormpy.master.rescale import PENDING

    core, backend, _ = setup(tmp_path)
    core.lease = LeaderLease(tmp_path / "lease")
    core.lease.renew(time.monotonic(), 60.0)
    rescale_to_commit(core, backend)
    wait_until(lambda: (core.tick(), backend.entered.is_set())[1],
               "the rescaled checkpoint's commit point is being written")
    core.lease.revoke()  # its launcher lost ZooKeeper; a standby leads
    (tmp_path / "run" / PENDING).unlink()  # the newer TM dropped the staged layout
    backend.release.set()
    wait_until(lambda: core.rescale.phase == "idle", "the fenced rescale ended")
    assert "fenced" in core.rescale.status()["error"]
    assert not list((tmp_path / "run").glob("*.rescale"))


def test_a_rescale_to_the_running_parallelism_is_refused_naming_it(tmp_path: Path) -> None:
    """``jstorm rescale`` to what already runs changes nothing: it is refused with the
    parallelism the components already run at, with or without a worker count."""
    core, _, _ = setup(tmp_path)
    with pytest.raises(JStormError, match="nothing to change: .*'count': 2"):
        core.rescale.request({"count": 2})
    with pytest.raises(JStormError, match="nothing to change: .* on 2 workers"):
        core.rescale.request({"count": 2}, workers=2)
    assert core.rescale.status()["requested"] == 0


class GatedRead(GatedBackend):
    """Also holds the reads of checkpoint ``read_gate``'s metadata until ``read_release``."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.read_gate: int | None = None
        self.read_entered = threading.Event()
        self.read_release = threading.Event()

    def read_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        if checkpoint_id == self.read_gate:
            self.read_entered.set()
            assert self.read_release.wait(30), "the test never released the read"
        return super().read_metadata(checkpoint_id)


def test_a_rescale_aborted_while_it_redistributes_is_aborted_once(tmp_path: Path) -> None:
    """A recovery starts while the rescale's thread reads the quiescent checkpoint: the
    rescale is aborted then, with the recovery as its reason; the thread, when its read
    returns, finds it aborted and ends without a second abort (one history entry, the
    first reason kept)."""
    core, backend, sessions = setup(tmp_path, GatedRead)
    backend.release.set()
    core.rescale.request({"count": 3})
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "quiescing", "quiescing")
    quiescent = core.rescale.checkpoint_id
    assert quiescent is not None
    backend.read_gate = quiescent
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    core.tick()
    assert backend.read_entered.wait(15), "the rescale never read its quiescent checkpoint"
    assert core.rescale.phase == "redistributing"
    core.worker_lost(sessions[0], "killed")
    assert core.rescale.phase == "idle"
    backend.read_release.set()
    for thread in [t for t in threading.enumerate() if t.name == "rescale"]:
        thread.join(15)
        assert not thread.is_alive()
    status = core.status()["rescale"]
    mine = [h for h in status["history"] if h["request"] == status["requested"]]
    assert len(mine) == 1 and "recovery during the rescale" in mine[0]["error"], mine
    assert "recovery during the rescale" in status["error"]


class _NoIdsPort:
    """A rescale port (``master/rescale_steps.py``) whose checkpoint ids ran out: no
    reservation of the ids record is stored. It records the steps the driver asks for."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def await_sinks(self, quiescent: int, then: Any) -> None:
        self.calls.append(("await_sinks", quiescent))
        then()

    def allocate_id(self) -> int:
        self.calls.append(("allocate_id",))
        raise CheckpointError("no reservation of checkpoint ids is stored")

    def write_rescaled(self, quiescent: int, target: int, then: Any) -> None:
        self.calls.append(("write_rescaled", quiescent, target))

    def stage(self, target: int, then: Any) -> None:
        self.calls.append(("stage", target))

    def commit(self, target: int, then: Any) -> None:
        self.calls.append(("commit", target))

    def mark_bad(self, target: int, outcome: Any, then: Any) -> None:
        self.calls.append(("mark_bad", target))

    def adopt_layout(self, target: int) -> None:
        self.calls.append(("adopt_layout", target))

    def abort(self, reason: str, resume: bool, staged: bool) -> None:
        self.calls.append(("abort", reason, resume, staged))


def test_a_rescale_that_gets_no_checkpoint_id_resumes_the_spouts() -> None:
    """With no checkpoint id to give the rescaled checkpoint (the ids record's
    reservation not stored), the rescale ends before it wrote anything: the old layout
    runs on, and its spouts, paused for the quiescent cut, go on emitting; nothing was
    staged, so nothing is dropped."""
    port = _NoIdsPort()
    perform_rescale(RescaleSteps(7), port)
    assert port.calls[-1] == ("abort", "no reservation of checkpoint ids is stored",
                              True, False), port.calls
    assert [c[0] for c in port.calls].count("write_rescaled") == 0


def test_the_quiescent_checkpoint_starts_alone_and_only_when_a_checkpoint_may_start() -> None:
    """``master/quiescent_cut.py``, the rescale's and the gray release's way to their cut:
    the quiescent checkpoint is not started beside a checkpoint still collecting acks,
    nor while no checkpoint may start (the concurrency limit, the ids reservation), even
    with none in flight."""
    cut = QuiescentCut(wait_for_commits=False)
    assert not cut.may_quiesce(running=True, in_flight=1, committing=0, may_start=True)
    assert not cut.may_quiesce(running=True, in_flight=0, committing=0, may_start=False)
    assert cut.may_quiesce(running=True, in_flight=0, committing=0, may_start=True)
