"""The quiescent-operation steps rescale and gray release share (master/quiescent.py):
a quiescent checkpoint that never completes times its step out, the operation aborts
naming the step, and the paused spouts resume. Real MasterCore and file backend."""

from __future__ import annotations

import time
from pathlib import Path

from jstormpy.master.rescale import RescalePhase
from tests.unit.test_launch_attempts import next_message
from tests.unit.test_rescale_commit import setup, wait_until


def test_a_quiescent_step_that_times_out_aborts_naming_it_and_resumes_the_spouts(
        tmp_path: Path) -> None:
    core, _, sessions = setup(tmp_path)
    core.config = core.config.replace(upgrade_step_timeout_ms=200)
    core.rescale.request({"count": 3})
    core.tick()
    assert core.rescale.phase == RescalePhase.QUIESCING
    assert core.status()["rescale"]["phase"] == "quiescing"
    for s in sessions:
        assert next_message(s, "trigger").trigger.pause
    started = time.monotonic()
    # no task acks: the quiescent checkpoint never completes
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == RescalePhase.IDLE, "aborted")
    assert time.monotonic() - started >= 0.2
    assert core.rescale.error == ("aborted: rescale step 'quiescing' took longer than "
                                  "upgrade_step_timeout_ms=200")
    assert core.errors[-1]["component"] == "rescale"
    for s in sessions:
        assert next_message(s, "resume").resume.generation == core.generation
    assert core.trigger_checkpoint(force=True) is not None  # checkpoints are held no more
