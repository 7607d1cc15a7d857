"""When a bounded run's final checkpoint may start beside a checkpoint in flight (issue 36):
``CheckpointCoordinator.final_may_start``. I/O-free; time is an argument."""

from __future__ import annotations

from jstormpy.master.coordinator import (
    CheckpointCoordinator,
    CollectGarbage,
    Drained,
    SendComplete,
    TaskAck,
    TriggerFinal,
    WriteCommitPoint,
)

TASKS = {1: "spout", 2: "spout", 3: "count", 4: "sink"}


def coordinator() -> CheckpointCoordinator:
    c = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                              tolerable_timeouts=1)
    c.set_layout(TASKS, spout_tasks=[1, 2], sink_tasks=[4])
    c.new_generation(1)
    c.ids_record_stored(c.ids_record())
    c.resume_after(0, now=0.0)
    return c


def ack(c: CheckpointCoordinator, cid: int, task: int, finished: bool = False) -> list:
    return c.ack(1, cid, TaskAck(task, f"h{cid}-{task}", 1, finished, 0.0), 1.0, 1001.0)


def test_nothing_in_flight_the_final_checkpoint_starts_once_every_spout_finished() -> None:
    c = coordinator()
    assert not c.final_may_start(spouts_finished=False)
    assert c.final_may_start(spouts_finished=True)


def test_it_waits_for_every_spouts_ack_of_the_checkpoint_in_flight() -> None:
    """A spout that has not acked the checkpoint in flight may ack it "finished": then
    that one is the final checkpoint, and a second one would be needless."""
    c = coordinator()
    periodic, _ = c.start(now=0.0, wall=1000.0)
    assert not c.final_may_start(spouts_finished=True)
    ack(c, periodic, 1)
    assert not c.final_may_start(spouts_finished=True)
    ack(c, periodic, 2)
    assert c.final_may_start(spouts_finished=True), \
        "every spout acked the periodic checkpoint before its end: the final one waited"


def test_a_checkpoint_in_flight_that_covers_the_end_is_the_final_one() -> None:
    c = coordinator()
    periodic, _ = c.start(now=0.0, wall=1000.0)
    ack(c, periodic, 1, finished=True)
    ack(c, periodic, 2, finished=True)
    assert not c.final_may_start(spouts_finished=True)
    ack(c, periodic, 3)
    (write,) = ack(c, periodic, 4)  # committing: still the final one
    assert isinstance(write, WriteCommitPoint)
    assert not c.final_may_start(spouts_finished=True)


def test_it_starts_beside_a_periodic_one_whose_commit_point_is_being_written() -> None:
    c = coordinator()
    periodic, _ = c.start(now=0.0, wall=1000.0)
    for task in TASKS:
        ack(c, periodic, task)
    assert periodic in c.committing
    assert c.final_may_start(spouts_finished=True)


def test_the_overlapping_final_checkpoint_drains_after_the_periodic_one_completes() -> None:
    """Beyond ``max_concurrent``: the periodic one completes first (its commit point is
    written first: every task acks the two in id order), then the final one drains."""
    c = coordinator()
    periodic, _ = c.start(now=0.0, wall=1000.0)
    ack(c, periodic, 1)
    ack(c, periodic, 2)
    assert c.final_may_start(spouts_finished=True) and c.may_start(force=True)
    final, _ = c.start(now=0.1, wall=1000.1)
    assert final == periodic + 1
    assert not c.final_may_start(spouts_finished=True), "a third one while the final's acks come"
    assert not c.may_start(), "a periodic one beside the two"
    for task in (3, 4):
        ack(c, periodic, task)
    for task in (1, 2):
        ack(c, final, task, finished=True)
    assert c.commit_point_written(periodic, running=True, now=0.2, wall=1000.2) == [
        SendComplete(periodic, 1), TriggerFinal(), CollectGarbage()]
    assert c.final_checkpoint is None
    ack(c, final, 3)
    (write,) = ack(c, final, 4)
    assert isinstance(write, WriteCommitPoint) and write.metadata["spouts_finished"]
    assert c.commit_point_written(final, running=True, now=0.3, wall=1000.3) == [
        SendComplete(final, 1), CollectGarbage()]
    assert c.final_checkpoint == final
    assert c.sink_committed(1, final, 4) == [Drained(final)]


def test_no_final_checkpoint_beyond_the_reserved_ids_or_after_it_was_taken() -> None:
    c = coordinator()
    c.new_generation(2)  # the drain starts over; nothing reserved ahead of next_id
    c.resume_after(c.ids_reserved, now=0.0)
    assert not c.may_allocate() and not c.final_may_start(spouts_finished=True)
    c = coordinator()
    cid, _ = c.start(now=0.0, wall=1000.0)
    for task in TASKS:
        ack(c, cid, task, finished=task in (1, 2))
    c.commit_point_written(cid, running=True, now=0.1, wall=1000.1)
    assert c.final_checkpoint == cid
    assert not c.final_may_start(spouts_finished=True)
