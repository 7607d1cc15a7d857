"""The checkpoint coordinator in isolation (issue 24 item 5): ids, acks, the commit point,
completion, aborts, timeouts and their escalation, the drain. Time is an argument, so
every test is exact."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from jstormpy.master.coordinator import (
    ID_RESERVATION,
    CheckpointCoordinator,
    CollectGarbage,
    Drained,
    SendAbort,
    SendComplete,
    SendTrigger,
    StartRecovery,
    TaskAck,
    TriggerFinal,
    WriteCommitPoint,
)
from jstormpy.master.restore_plan import LATEST, Refuse, RestorePlan

TASKS = {1: "spout", 2: "count", 3: "sink"}


def coordinator(tolerable: int = 1, stateful: bool = True) -> CheckpointCoordinator:
    c = CheckpointCoordinator(stateful=stateful, max_concurrent=1, timeout_s=10.0,
                              tolerable_timeouts=tolerable)
    c.set_layout(TASKS, spout_tasks=[1], sink_tasks=[3])
    c.new_generation(1)
    c.ids_record_stored(c.ids_record())  # as the recovery's PersistGeneration step
    c.resume_after(0, now=0.0)
    return c


def ack_all(c: CheckpointCoordinator, cid: int, now: float, finished: bool = False,
            generation: int = 1) -> list:
    out: list = []
    for task in TASKS:
        out += c.ack(generation, cid, TaskAck(task, f"h{cid}-{task}", 10, finished, 1.5),
                     now, 1000.0 + now)
    return out


def test_the_last_ack_asks_for_the_commit_point_and_only_its_write_completes() -> None:
    c = coordinator()
    cid, actions = c.start(now=1.0, wall=1001.0)
    assert (cid, actions) == (1, [SendTrigger(1, 1)])
    assert not c.may_start()  # one at a time
    out = ack_all(c, cid, now=1.5)
    (write,) = out
    assert isinstance(write, WriteCommitPoint) and write.checkpoint_id == 1
    assert write.metadata["tasks"]["2"] == {"handle": "h1-2", "size": 10}
    assert c.last_completed is None  # not complete before the commit point
    out = c.commit_point_written(1, running=True, now=2.0, wall=1002.0)
    assert out == [SendComplete(1, 1), TriggerFinal(), CollectGarbage()]
    assert c.last_completed is not None and c.last_completed["id"] == 1
    assert c.last_completed["duration_ms"] == 1000.0
    assert c.id_floor == c.completed_floor == 1


def test_acks_of_another_generation_or_checkpoint_are_ignored() -> None:
    c = coordinator()
    cid, _ = c.start(now=0.0, wall=0.0)
    assert ack_all(c, cid, now=1.0, generation=0) == []
    assert ack_all(c, cid, now=1.0, generation=2) == []  # a generation not started yet
    assert ack_all(c, cid + 7, now=1.0) == []
    assert cid in c.inflight


def test_a_failed_metadata_write_marks_the_checkpoint_bad_and_never_reuses_its_id() -> None:
    c = coordinator(tolerable=0)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    out = c.commit_point_failed(cid, "connection refused", timed_out=False, now=2.0)
    assert out == [SendAbort(cid, 1, "metadata write failed: connection refused")]
    assert cid in c.bad and c.id_floor == cid and c.completed_floor == 0
    assert c.last_completed is None


def test_a_timed_out_metadata_write_counts_toward_the_tolerance() -> None:
    c = coordinator(tolerable=0)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    out = c.commit_point_failed(cid, "no answer in 20 s", timed_out=True, now=30.0)
    assert isinstance(out[-1], StartRecovery) and "tolerable_failed_checkpoints=0" in \
        out[-1].reason


def test_timeouts_escalate_to_a_recovery_past_the_tolerance_and_name_stalled_tasks() -> None:
    c = coordinator(tolerable=1)
    first, _ = c.start(now=0.0, wall=0.0)
    c.ack(1, first, TaskAck(1, "h", 1, False, 0.0), 1.0, 1.0)
    assert c.expire(now=5.0) == []  # not yet
    out = c.expire(now=10.5)
    assert out == [SendAbort(first, 1, "timeout")]  # the first is tolerated
    assert c.history[-1]["status"] == "timed_out"
    assert "count[task 2], sink[task 3]" in c.history[-1]["error"]
    second, _ = c.start(now=11.0, wall=11.0)
    out = c.expire(now=22.0)
    assert out[0] == SendAbort(second, 1, "timeout")
    assert isinstance(out[1], StartRecovery) and "2 timeout(s) in a row" in out[1].reason
    assert c.timed_out_in_a_row == 0


def test_a_completed_checkpoint_resets_the_timeout_count() -> None:
    c = coordinator(tolerable=1)
    first, _ = c.start(now=0.0, wall=0.0)
    c.expire(now=11.0)
    second, _ = c.start(now=12.0, wall=12.0)
    ack_all(c, second, now=13.0)
    c.commit_point_written(second, running=True, now=13.5, wall=13.5)
    third, _ = c.start(now=14.0, wall=14.0)
    assert c.expire(now=25.0) == [SendAbort(third, 1, "timeout")]  # tolerated again


def test_a_task_failure_aborts_only_its_own_generations_checkpoint() -> None:
    c = coordinator()
    cid, _ = c.start(now=0.0, wall=0.0)
    assert c.task_failed(0, cid, 2, "late", now=1.0) == []  # stale: ignored
    assert c.task_failed(1, cid, 2, "disk full", now=1.0) == [SendAbort(cid, 1, "disk full")]
    assert cid not in c.inflight and c.history[-1]["error"] == "task 2: disk full"


def test_a_commit_point_reached_during_a_recovery_completes_nothing_here() -> None:
    c = coordinator()
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    c.new_generation(2)  # a worker died while the metadata was being written
    assert c.commit_point_written(cid, running=False, now=2.0, wall=2.0) == []
    assert c.completed_floor == cid  # on storage: the recovery's listing must show it
    assert c.last_completed is None


def test_the_drain_waits_for_every_sink_to_commit_the_final_checkpoint() -> None:
    c = coordinator()
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0, finished=True)
    out = c.commit_point_written(cid, running=True, now=2.0, wall=2.0)
    assert out == [SendComplete(cid, 1), CollectGarbage()]
    assert c.final_checkpoint == cid
    assert c.sink_committed(1, cid - 1, 3) == []  # an older commit does not count
    assert c.sink_committed(1, cid, 3) == [Drained(cid)]



def test_the_drain_counts_the_sinks_commits_after_hundreds_of_recoveries() -> None:
    """Generations are compared by value: past 256 (CPython shares small ints only) the
    generation in a sink's message is another int object than the coordinator's, and its
    commit of the final checkpoint still counts, so a bounded run drains."""
    c = coordinator()
    generation = int("300")  # as decoded from a message: made at run time
    c.new_generation(generation)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0, finished=True, generation=int("300"))
    assert c.commit_point_written(cid, running=True, now=2.0, wall=2.0) \
        == [SendComplete(cid, generation), CollectGarbage()]
    assert c.sink_committed(int("300"), cid, 3) == [Drained(cid)]

def test_at_most_once_completes_without_a_commit_point() -> None:
    c = coordinator(stateful=False)
    cid, _ = c.start(now=0.0, wall=0.0)
    out = ack_all(c, cid, now=1.0)
    assert out == [SendComplete(cid, 1), TriggerFinal()]
    assert not c.committing


def test_ids_resume_above_the_restored_base_after_a_recovery() -> None:
    c = coordinator()
    for _ in range(3):
        cid, _ = c.start(now=0.0, wall=0.0)
        ack_all(c, cid, now=1.0)
        c.commit_point_written(cid, running=True, now=1.0, wall=1.0)
    c.new_generation(2)
    c.resume_after(max(2, c.id_floor), now=5.0)  # restored 2, but 3 completed: above it
    cid, actions = c.start(now=6.0, wall=6.0)
    assert cid == 4 and actions == [SendTrigger(4, 2)]


def test_ids_of_failed_checkpoints_are_never_handed_out_again() -> None:
    """Simulator seed 570163: checkpoints 2-4 fail (their barriers staged a transaction
    in every sink all the same); a recovery restoring 1 must go on above 4, or a sink
    would stage a second transaction under an id it already staged and discarded."""
    c = coordinator()
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    c.commit_point_written(cid, running=True, now=1.0, wall=1.0)
    for t in range(3):
        failed, _ = c.start(now=2.0 + t, wall=2.0 + t)
        c.task_failed(1, failed, 2, "write of snapshot failed (EIO)", now=2.5 + t)
    assert failed == 4
    c.new_generation(2)
    c.resume_after(max(1, c.id_floor), now=9.0)  # as prepare_ids: restored 1
    nxt, _ = c.start(now=10.0, wall=10.0)
    assert nxt == 5, f"checkpoint id {nxt} handed out again after a recovery"


def test_a_restored_checkpoint_is_never_bad_because_its_metadata_write_timed_out() -> None:
    """Issue 23, the simulator's seed 22619: checkpoint 1's _metadata write times out but
    lands late; a recovery begun before the timeout was reported lists 1 and restores it,
    so sinks commit 1 again. Marking 1 bad afterwards made the next recovery fall back
    below it and emit everything after checkpoint 0 a second time."""
    c = coordinator(tolerable=5)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    c.new_generation(2)  # a worker died while the commit point was being written
    c.recovery_resolved([cid], listing_ok=True, restored=cid)  # the write had landed
    c.commit_point_failed(cid, "no answer in 20 s", timed_out=True, now=30.0)
    assert cid not in c.bad and c.completed_floor == cid


def test_a_restore_clears_a_timeout_that_was_reported_before_it() -> None:
    c = coordinator(tolerable=5)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    c.commit_point_failed(cid, "no answer in 20 s", timed_out=True, now=30.0)
    assert cid in c.bad  # not known to have landed: never restored from ...
    c.new_generation(2)
    # ... unless a recovery whose plan was made before the report restored it anyway
    c.recovery_resolved([cid], listing_ok=True, restored=cid)
    assert cid not in c.bad and c.completed_floor == cid


def test_a_checkpoint_whose_metadata_write_failed_outright_stays_bad() -> None:
    c = coordinator(tolerable=5)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=1.0)
    c.recovery_resolved([], listing_ok=True, restored=None)
    c.commit_point_failed(cid, "connection refused", timed_out=False, now=2.0)
    assert cid in c.bad and c.completed_floor == 0


def test_a_resolved_recovery_raises_the_floors_to_its_listing() -> None:
    c = coordinator()
    c.recovery_resolved([3, 5], listing_ok=True, restored=5)
    assert (c.id_floor, c.completed_floor) == (5, 5)
    c.recovery_resolved([9], listing_ok=False, restored=None)  # a failed listing's ids
    assert (c.id_floor, c.completed_floor) == (9, 5)  # are ids, not completions


def test_a_listed_bad_checkpoint_never_becomes_the_completed_floor() -> None:
    """Simulator seed 36483: a timed-out commit point that landed is listed; as the floor
    it made a later short listing (it alone) look complete, and the recovery restored
    nothing under committed output."""
    c = coordinator(tolerable=5)
    c.recovery_resolved([1], listing_ok=True, restored=1)
    c.mark_bad(2)
    c.recovery_resolved([1, 2], listing_ok=True, restored=1)
    assert (c.completed_floor, c.id_floor) == (1, 2)


def test_an_unread_listed_checkpoint_never_becomes_the_floor_when_the_recovery_restores_none(
        ) -> None:
    """Simulator seed 580 (``leader_deposed``): three deposed leaders' late commit points
    4, 104, 204 and 304 are listed; nothing ever completed. A recovery reads 304, finds it
    a late commit point of an older epoch (Unusable) and ends there; the floor rose to 204,
    which nobody had read (another late one), so when 204 turned out unusable too the plan
    refused to restore empty state "under committed output" and the topology failed, with
    no sink having committed anything. A checkpoint the recovery did not read is no
    completion: only a restored one raises the floor."""
    c = coordinator(tolerable=5)
    for cid in (4, 104):
        c.mark_bad(cid)
    c.mark_bad(304)  # the plan read it: a late commit point (Unusable)
    c.recovery_resolved([4, 104, 204, 304], listing_ok=True, restored=None)
    assert c.completed_floor == 0 and c.id_floor == 304
    plan = RestorePlan(2, LATEST, stateful=True, persisted_generation=2,
                       completed_floor=c.completed_floor,
                       bad=c.bad | {204})
    actions = plan.listed([4, 104, 204, 304])
    assert not [a for a in actions if isinstance(a, Refuse)], actions  # restores empty


def test_a_floor_not_stored_aborts_a_landed_checkpoint_yet_no_recovery_goes_below_it() -> None:
    c = coordinator(tolerable=0)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=0.5)
    out = c.floor_not_stored(cid, "meta/completed_checkpoint: EIO", timed_out=False, now=1.0)
    assert out == [SendAbort(cid, 1, "completed floor not stored: meta/completed_checkpoint: "
                                     "EIO")]  # no SendComplete: no sink commits it
    assert c.last_completed is None and c.history[-1]["status"] == "failed"
    assert c.busy() == 0 and cid not in c.bad  # restorable: its metadata landed
    assert c.id_floor == c.completed_floor == cid
    nxt, _ = c.start(now=2.0, wall=2.0)
    ack_all(c, nxt, now=2.5)
    assert c.commit_point_written(nxt, running=True, now=3.0, wall=3.0)[0] == \
        SendComplete(nxt, 1)  # the next completed checkpoint commits both


def test_a_floor_write_that_timed_out_counts_toward_the_tolerance() -> None:
    c = coordinator(tolerable=0)
    cid, _ = c.start(now=0.0, wall=0.0)
    ack_all(c, cid, now=0.5)
    out = c.floor_not_stored(cid, "no answer", timed_out=True, now=1.0)
    assert isinstance(out[0], SendAbort) and isinstance(out[-1], StartRecovery)


def test_no_checkpoint_starts_above_the_ids_a_stored_record_reserves() -> None:
    c = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                              tolerable_timeouts=1)
    c.set_layout(TASKS, spout_tasks=[1], sink_tasks=[3])
    c.new_generation(1)
    assert not c.may_start(force=True) and c.needs_ids_record()  # nothing stored yet
    c.ids_record_stored(c.ids_record())
    assert c.may_start() and not c.needs_ids_record()
    c.resume_after(ID_RESERVATION - 1, now=0.0)  # the last reserved id is next
    assert c.may_start() and c.needs_ids_record()
    c.resume_after(ID_RESERVATION, now=0.0)
    assert not c.may_start(force=True)
    c.ids_record_stored(c.ids_record())
    assert c.may_start()


def test_a_resumed_coordinator_starts_above_its_predecessors_reservation() -> None:
    old = coordinator()
    stored = old.ids_record()  # the record its recovery stored
    cid, _ = old.start(now=0.0, wall=0.0)  # handed out, never recorded: its TM dies
    new = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                tolerable_timeouts=1)
    new.adopt_ids_record(stored)
    assert new.id_floor >= cid and new.id_floor >= ID_RESERVATION
    new.adopt_ids_record(b'{"id_floor": 7, "bad": [7]}')  # a record without a reservation
    assert 7 in new.bad


def test_each_tasks_pause_is_kept_with_the_longest_in_the_history() -> None:
    c = coordinator()
    cid, _ = c.start(now=1.0, wall=1001.0)
    for task, pause in ((1, 0.4), (2, 17.25), (3, 3.0)):
        c.ack(1, cid, TaskAck(task, f"h-{task}", 10, False, 1.5, pause), 1.5, 1001.5)
    c.commit_point_written(cid, running=True, now=2.0, wall=1002.0)
    last = c.last_completed
    assert last is not None
    assert last["task_pause_ms"] == {"1": 0.4, "2": 17.25, "3": 3.0}
    assert last["pause_ms"] == 17.25


def test_a_forced_checkpoint_over_the_limit_holds_the_next_one_back() -> None:
    """A savepoint forces a checkpoint while one is in flight (two with
    ``max_concurrent_checkpoints=1``): no periodic one starts until both ended."""
    c = coordinator()
    first, _ = c.start(now=1.0, wall=1001.0)
    assert not c.may_start() and c.may_start(force=True)
    forced, _ = c.start(now=1.1, wall=1001.1)
    assert c.busy() == 2
    assert not c.may_start(), "a third checkpoint started beside two in flight"
    ack_all(c, first, now=1.5)
    c.commit_point_written(first, running=True, now=1.6, wall=1001.6)
    assert not c.may_start()
    ack_all(c, forced, now=1.7)
    c.commit_point_written(forced, running=True, now=1.8, wall=1001.8)
    assert c.may_start()


def test_the_minimum_pause_counts_from_the_end_of_the_last_checkpoint() -> None:
    """``min_pause_between_checkpoints_ms``: however long ago the last trigger was, the
    next checkpoint waits that long after the last one ended."""
    c = coordinator()
    cid, _ = c.start(now=100.0, wall=1100.0)
    ack_all(c, cid, now=100.5)
    c.commit_point_written(cid, running=True, now=101.0, wall=1101.0)
    assert not c.due(now=101.5, interval_s=0.5, min_pause_s=1.0)
    assert c.due(now=102.0, interval_s=0.5, min_pause_s=1.0)


def test_the_next_periodic_checkpoint_waits_its_interval_after_the_last_trigger() -> None:
    """``checkpoint_interval_ms``: a periodic checkpoint starts once the interval has
    passed since the last one was triggered, not before, however fast that one ended."""
    c = coordinator()
    cid, _ = c.start(now=100.0, wall=1100.0)
    ack_all(c, cid, now=100.1)
    c.commit_point_written(cid, running=True, now=100.2, wall=1100.2)
    assert not c.due(now=100.5, interval_s=1.0)
    assert not c.due(now=100.99, interval_s=1.0)
    assert c.due(now=101.0, interval_s=1.0)


def test_a_checkpoint_no_task_acked_paused_nothing() -> None:
    """A checkpoint that timed out before any task acked paused no task: its history
    entry's pause is zero, not a negative number."""
    c = coordinator(tolerable=5)
    cid, _ = c.start(now=0.0, wall=0.0)
    c.expire(now=11.0)
    entry = c.history[-1]
    assert (entry["id"], entry["status"]) == (cid, "timed_out")
    assert entry["pause_ms"] == 0.0 and entry["task_pause_ms"] == {}


def test_the_duration_histogram_counts_completed_checkpoints_only() -> None:
    """``jstorm_checkpoint_duration_ms`` (Prometheus) is the duration of the checkpoints
    that completed: a failed one is in the history, not in the histogram."""
    c = coordinator(tolerable=5)
    failed, _ = c.start(now=0.0, wall=1000.0)
    ack_all(c, failed, now=1.0)
    c.commit_point_failed(failed, "connection refused", timed_out=False, now=2.0)
    done, _ = c.start(now=10.0, wall=1010.0)
    ack_all(c, done, now=10.5)
    c.commit_point_written(done, running=True, now=11.0, wall=1011.0)
    assert c.durations.count == 1
    assert c.durations.sum == 1000.0


def test_the_ticks_reservation_of_ids_is_one_store_at_a_time() -> None:
    """``IdsRecordStores.tick``: while the tick's store of the ids record is on its way to
    storage (queued behind slow backend calls), later ticks start no other: one write of
    ``meta/checkpoint_ids`` at a time, the next tick after it landed may start one."""
    import contextlib

    from jstormpy.master.ids_record_steps import IdsRecordStores

    class QueuedPort:
        def __init__(self) -> None:
            self.queued: list = []
            self.written: list[bytes] = []

        def locked(self) -> contextlib.AbstractContextManager:
            return contextlib.nullcontext()

        def on_storage(self, step) -> None:  # type: ignore[no-untyped-def]
            self.queued.append(step)

        def put_ids_record(self, ids: bytes, then) -> None:  # type: ignore[no-untyped-def]
            self.written.append(ids)
            then(None)

        def not_stored(self, why: str, error: BaseException) -> None:
            raise AssertionError(why)

    c = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                              tolerable_timeouts=1)
    c.set_layout(TASKS, spout_tasks=[1], sink_tasks=[3])
    c.new_generation(1)
    assert c.needs_ids_record()
    port = QueuedPort()
    stores = IdsRecordStores(c, port)
    assert stores.tick(running=True)
    assert not stores.tick(running=True) and not stores.tick(running=True)
    assert len(port.queued) == 1 and stores.reserving
    port.queued.pop()()
    assert len(port.written) == 1 and not stores.reserving


def test_the_masters_tick_triggers_a_periodic_checkpoint_while_the_spouts_run(
        tmp_path: Path) -> None:
    """``MasterCheckpoints.tick``: once ``checkpoint_interval_ms`` passed, the running
    topology's next checkpoint is triggered, its spouts far from finished (the final
    checkpoint of a bounded run is the other trigger)."""
    from jstormpy import Config
    from jstormpy.master.core import MasterCore
    from jstormpy.state_backends.file import FileBackend
    from tests.unit.test_checkpoint_ids_record import prepare_all
    from tests.unit.test_launch_attempts import DESCRIPTOR
    from tests.unit.test_rescale_commit import wait_until

    config = Config(workers=2, checkpoint_interval_ms=50)
    core = MasterCore("tick", config, DESCRIPTOR, FileBackend(f"file://{tmp_path}"))
    sessions, _ = prepare_all(core)
    triggers: list[tuple[int, bool]] = []

    def triggered() -> bool:
        core.tick()
        for s in sessions:
            while not s.outq.empty():
                msg = s.outq.get_nowait()
                if msg.WhichOneof("body") == "trigger":
                    triggers.append((msg.trigger.checkpoint_id, msg.trigger.pause))
        return bool(triggers)

    wait_until(triggered, "a periodic checkpoint triggered by the tick", timeout=10.0)
    assert not core.checkpoints.final_checkpoint
    assert core.checkpoints.inflight or core.checkpoints.committing
    # a periodic checkpoint leaves the spouts emitting after its barrier: only the
    # quiescent cut of a rescale or a gray release pauses them
    assert not any(pause for _, pause in triggers), triggers
    forced = core.trigger_checkpoint(force=True)
    assert forced is not None
    triggered()
    assert (forced, False) in triggers, triggers


def test_the_masters_tick_logs_the_checkpoints_pace_once_when_it_changes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``MasterCheckpoints.log_pace``: once the checkpoints run back to back (here every
    checkpoint, with ``min_pause_between_checkpoints_ms`` as long as the interval), the
    tick logs one warning that says what to change, and not again at every later tick
    while the pace stays the same."""
    from jstormpy import Config
    from jstormpy.master.core import MasterCore
    from jstormpy.state_backends.file import FileBackend
    from tests.unit.test_checkpoint_ids_record import checkpoint, prepare_all
    from tests.unit.test_launch_attempts import DESCRIPTOR

    config = Config(workers=2, checkpoint_interval_ms=3_600_000,
                    min_pause_between_checkpoints_ms=3_600_000)
    core = MasterCore("pace", config, DESCRIPTOR, FileBackend(f"file://{tmp_path}"))
    prepare_all(core)
    caplog.set_level(logging.INFO, logger="jstormpy.master")

    def advice() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("checkpoints")]

    core.tick()
    assert advice() == []  # no checkpoint yet: no pace to give
    checkpoint(core)
    assert core.backend_io.wait_idle(10)
    for _ in range(3):
        core.tick()
    logged = advice()
    assert len(logged) == 1, logged
    assert "run back to back" in logged[0] and "checkpoint_interval_ms=3600000" in logged[0]
