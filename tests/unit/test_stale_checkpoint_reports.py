"""A report of an older generation never touches the current generation's checkpoints
(issue 23, hole 6): a stale CheckpointFailed used to void the in-flight checkpoint of the
same id before its generation was even looked at."""

from __future__ import annotations

from pathlib import Path

from jstormpy.proto import jstorm_pb2 as pb
from tests.unit.test_launch_attempts import core_for, register, start


def test_a_stale_failure_report_does_not_void_the_new_generations_checkpoint(
        tmp_path: Path) -> None:
    core = core_for(tmp_path)
    sessions = [register(core, w, 0) for w in (0, 1)]
    start(core, sessions)
    generation = core.generation
    cid = core.trigger_checkpoint(force=True)
    assert cid is not None and cid in core.checkpoints.inflight
    core.on_checkpoint_failed(pb.CheckpointFailed(
        checkpoint_id=cid, generation=generation - 1, task_id=3, reason="late, stale"))
    assert cid in core.checkpoints.inflight, "a stale report voided the current checkpoint"
    for task in core.all_tasks:
        core.on_checkpoint_ack(pb.CheckpointAck(checkpoint_id=cid, generation=generation,
                                                task_id=task, handle=f"h{task}"))
    assert core.backend_io.wait_idle(10)
    assert core.checkpoints.last_completed is not None and core.checkpoints.last_completed["id"] == cid


def test_status_marks_checkpoints_that_retention_deleted(tmp_path: Path) -> None:
    """Issue 28 item 20: status listed checkpoints retention had deleted as completed,
    with nothing to tell them from restorable ones."""
    from jstormpy import Config
    from jstormpy.master.core import MasterCore
    from jstormpy.state_backends import open_backend
    from tests.unit.test_launch_attempts import DESCRIPTOR

    core = MasterCore("la", Config(workers=2, checkpoints_retained=1), DESCRIPTOR,
                      open_backend(f"file://{tmp_path}"))
    start(core, [register(core, w, 0) for w in (0, 1)])
    done = []
    for _ in range(2):
        cid = core.trigger_checkpoint(force=True)
        for task in core.all_tasks:
            core.on_checkpoint_ack(pb.CheckpointAck(checkpoint_id=cid,
                                                    generation=core.generation,
                                                    task_id=task, handle=f"h{task}"))
        assert core.backend_io.wait_idle(10)
        done.append(cid)
    listed = {c["id"]: c for c in core.status()["checkpoints"]}
    assert core.backend.list_completed() == [done[1]]
    assert [listed[c]["status"] for c in done] == ["completed", "completed"]
    assert [listed[c]["retained"] for c in done] == [False, True]
