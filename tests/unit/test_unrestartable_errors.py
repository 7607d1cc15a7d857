"""Errors no restart can fix fail the topology at once (docs/errors.md).

A sink that refuses the restored checkpoint (``RestoreRefusedError``: a savepoint restored
into output from which its run discarded a pending transaction, docs/checkpointing.md)
would refuse again at every restore of it; a broker that did not answer within its wait
(``UnavailableError``) would only be waited for again. The Topology Master fails the job
with the error and says why, instead of running the restart strategy to its end (minutes
of identical failures with the default exponential delay).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jstormpy.master.core import MasterCore
from jstormpy.master.restart import unrestartable_reason
from jstormpy.proto import jstorm_pb2 as pb
from tests.unit.test_launch_attempts import core_for, next_message, register, start

REFUSAL = ("RestoreRefusedError: RedisStreamSink task 3: the savepoint of checkpoint 4 "
           "lists transaction 4 as pending, but the run it was taken from (ab12) discarded "
           "it ...; Restore the savepoint into fresh output")


@pytest.mark.parametrize(("message", "why"), [
    (REFUSAL, "every restore of it would refuse again"),
    ("UnavailableError: KafkaSpout: no answer within connect_timeout_ms=1500",
     "restarting would only wait again"),
    ("SinkError: RedisStreamSink failed staging txn 4: connection reset", None),
    ("RuntimeError: RestoreRefusedError: quoted by user code", None),
    ("RestoreRefusedError", None),  # not the "<type>: <message>" of a worker's report
])
def test_which_errors_a_restart_cannot_fix(message: str, why: str | None) -> None:
    reason = unrestartable_reason(message)
    assert (reason is None) if why is None else (why in (reason or "")), reason


def failed_prepare(core: MasterCore, error: str) -> None:
    """Both workers register; worker 0's Prepare fails with ``error``."""
    sessions = [register(core, w, 1) for w in (0, 1)]
    prepare = next_message(sessions[0], "prepare").prepare
    core.on_ready(pb.Ready(worker_id=0, generation=prepare.generation, ok=False,
                           error=error, failed_task=3))


def test_a_restore_a_sink_refuses_fails_the_topology_at_once(tmp_path: Path) -> None:
    core = core_for(tmp_path)
    failed_prepare(core, REFUSAL)
    assert core.state == "failed" and core.restarts == 0
    assert core.failure is not None
    assert core.failure["reason"] == ("worker 0 could not open its tasks: a sink refused the "
                                      "restored checkpoint; every restore of it would "
                                      "refuse again")
    assert core.failure["error"]["message"] == REFUSAL  # what to do, for the console
    assert core.failure["error"]["component"] == "count"


def test_any_other_failed_restore_is_restarted(tmp_path: Path) -> None:
    core = core_for(tmp_path)
    failed_prepare(core, "SinkError: RedisStreamSink failed staging txn 4: connection reset")
    assert core.state == "recovering" and core.restarts == 1 and core.failure is None


def test_a_refusal_raised_by_a_running_task_fails_the_topology_at_once(
        tmp_path: Path) -> None:
    core = core_for(tmp_path)
    start(core, [register(core, w, 1) for w in (0, 1)])
    core.on_task_error(pb.TaskError(task_id=3, component="count", message=REFUSAL,
                                    generation=core.generation))
    assert core.state == "failed" and core.restarts == 0
    assert core.failure is not None and "refuse again" in core.failure["reason"]
