"""A task's snapshots between barrier and report (barrier/snapshots.py), in isolation."""

from jstormpy.barrier.snapshots import AckSnapshot, DeclineSnapshot, TaskSnapshots


def test_a_snapshot_reports_under_its_barriers_generation():
    snaps = TaskSnapshots(task_id=3)
    ticket = snaps.barrier(7, generation=2)
    assert snaps.uploaded(ticket, "h", 10) == [AckSnapshot(ticket, "h", 10)]
    assert ticket.generation == 2 and ticket.task_id == 3


def test_a_stopped_task_reports_neither_acks_nor_failures():
    snaps = TaskSnapshots(task_id=1)
    done, failing = snaps.barrier(4, 1), snaps.barrier(5, 1)
    snaps.stop()
    assert snaps.uploaded(done, "h", 1) == []
    assert snaps.failed(failing, "slow disk") == []
    assert not snaps.in_flight


def test_a_failure_of_a_running_task_declines_its_checkpoint():
    snaps = TaskSnapshots(task_id=1)
    ticket = snaps.barrier(4, 1)
    assert snaps.failed(ticket, "EIO") == [DeclineSnapshot(ticket, "EIO")]
