"""BarrierAligner: aligned (exactly-once) and unaligned barrier tracking."""

from __future__ import annotations

from jstormpy.barrier.aligner import BarrierAligner


def test_aligned_blocks_channels_until_every_barrier_arrived():
    a = BarrierAligner([1, 2, 3], aligned=True)
    assert not a.on_barrier(1, 5, 100.0)
    assert a.is_blocked(1) and not a.is_blocked(2)
    a.hold(1, "x1")
    assert not a.on_barrier(2, 5, 100.1)
    a.hold(2, "x2")
    a.hold(1, "y1")
    assert a.on_barrier(3, 5, 100.25)  # the last barrier arrives 250 ms after the first
    assert a.alignment_ms(5, 100.25) == 250.0  # the alignment time the checkpoint reports
    assert a.alignment_ms(5, 100.5) == 0.0  # measured once, then forgotten
    assert a.release() == ["x1", "y1", "x2"]
    assert not a.blocked


def test_unaligned_never_blocks():
    a = BarrierAligner([1, 2], aligned=False)
    assert not a.on_barrier(1, 1, 0.0)
    assert not a.is_blocked(1)
    assert a.on_barrier(2, 1, 0.0)


def test_older_incomplete_checkpoints_are_forgotten_when_a_newer_one_completes():
    # channel 2's task was restarted (at_most_once) and never sends barrier 3
    a = BarrierAligner([1, 2], aligned=False)
    assert not a.on_barrier(1, 3, 0.0)
    assert not a.on_barrier(1, 4, 0.0)
    assert a.on_barrier(2, 4, 0.0)  # 4 completes
    assert a.arrived == {}  # 3 can never complete: forgotten with it
    a.alignment_ms(4, 0.0)
    assert a.started == {}


def test_reset_forgets_everything():
    a = BarrierAligner([1, 2], aligned=True)
    a.on_barrier(1, 1, 0.0)
    a.hold(1, "x")
    a.reset()
    assert not a.blocked and a.release() == [] and a.arrived == {}


def test_a_tasks_barrier_steps_are_values() -> None:
    """``barrier/task_barrier.py``: the steps a task performs at a barrier are values,
    equal for equal barriers (what every runtime's port is handed), and cannot be
    changed once handed out."""
    import dataclasses

    import pytest

    from jstormpy.barrier.task_barrier import TaskBarrier, TaskKind

    for kind in TaskKind:
        barrier = TaskBarrier(kind, stateful=True, quiescent=True)
        assert barrier.steps() == TaskBarrier(kind, stateful=True, quiescent=True).steps()
        for step in barrier.steps():
            with pytest.raises(dataclasses.FrozenInstanceError):
                step.kind = kind  # type: ignore[misc, union-attr]
