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
    assert cid is not None and cid in core.inflight
    core.on_checkpoint_failed(pb.CheckpointFailed(
        checkpoint_id=cid, generation=generation - 1, task_id=3, reason="late, stale"))
    assert cid in core.inflight, "a stale report voided the current checkpoint"
    for task in core.all_tasks:
        core.on_checkpoint_ack(pb.CheckpointAck(checkpoint_id=cid, generation=generation,
                                                task_id=task, handle=f"h{task}"))
    assert core.backend_io.wait_idle(10)
    assert core.last_completed is not None and core.last_completed["id"] == cid
