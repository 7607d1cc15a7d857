"""BarrierAligner: aligned (exactly-once) and unaligned barrier tracking."""

from __future__ import annotations

from jstormpy.barrier import aligner as aligner_module
from jstormpy.barrier.aligner import BarrierAligner


def test_aligned_blocks_channels_until_every_barrier_arrived(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(aligner_module.time, "monotonic", lambda: now[0])
    a = BarrierAligner([1, 2, 3], aligned=True)
    assert not a.on_barrier(1, 5)
    assert a.is_blocked(1) and not a.is_blocked(2)
    a.hold(1, "x1")
    assert not a.on_barrier(2, 5)
    a.hold(2, "x2")
    a.hold(1, "y1")
    now[0] = 100.25  # the last barrier arrives 250 ms after the first
    assert a.on_barrier(3, 5)
    assert a.alignment_ms(5) == 250.0  # the alignment time the checkpoint reports
    assert a.alignment_ms(5) == 0.0  # measured once, then forgotten
    assert a.release() == ["x1", "y1", "x2"]
    assert not a.blocked


def test_unaligned_never_blocks():
    a = BarrierAligner([1, 2], aligned=False)
    assert not a.on_barrier(1, 1)
    assert not a.is_blocked(1)
    assert a.on_barrier(2, 1)


def test_older_incomplete_checkpoints_are_forgotten_when_a_newer_one_completes():
    # channel 2's task was restarted (at_most_once) and never sends barrier 3
    a = BarrierAligner([1, 2], aligned=False)
    assert not a.on_barrier(1, 3)
    assert not a.on_barrier(1, 4)
    assert a.on_barrier(2, 4)  # 4 completes
    assert a.arrived == {}  # 3 can never complete: forgotten with it
    a.alignment_ms(4)
    assert a.started == {}


def test_reset_forgets_everything():
    a = BarrierAligner([1, 2], aligned=True)
    a.on_barrier(1, 1)
    a.hold(1, "x")
    a.reset()
    assert not a.blocked and a.release() == [] and a.arrived == {}
