"""The way to a quiescent cut (master/quiescent_cut.py), which the rescale and upgrade
controllers and the simulator's rescale and gray release all run."""

from __future__ import annotations

from jstormpy.master.quiescent_cut import CutFailed, CutPhase, Quiesced, QuiescentCut


def may(cut: QuiescentCut, running: bool = True, in_flight: int = 0, committing: int = 0,
        may_start: bool = True) -> bool:
    return cut.may_quiesce(running=running, in_flight=in_flight, committing=committing,
                           may_start=may_start)


def test_the_cut_waits_until_nothing_is_in_flight_and_a_checkpoint_may_start() -> None:
    cut = QuiescentCut(wait_for_commits=False)
    assert may(cut)
    assert not may(cut, in_flight=1)
    assert not may(cut, running=False)
    assert not may(cut, may_start=False)
    # a rescale's steps wait for the sinks' commits anyway; a gray release's batch does not
    assert may(cut, committing=1)
    assert not may(QuiescentCut(wait_for_commits=True), committing=1)


def test_only_its_own_checkpoint_in_its_generation_decides_the_cut() -> None:
    cut = QuiescentCut(wait_for_commits=True)
    assert cut.ended(7, 2, "completed") is None  # not started: no answer
    cut.started(7, 2)
    assert cut.phase == CutPhase.QUIESCING
    assert not may(cut)  # quiescing already
    assert cut.ended(6, 2, "completed") is None
    assert cut.ended(7, 3, "completed") is None  # the same id in a newer generation
    assert cut.ended(7, 2, "completed") == Quiesced(7)
    assert cut.ended(7, 2, "completed") is None  # decided once


def test_a_quiescent_checkpoint_that_fails_is_no_cut() -> None:
    cut = QuiescentCut(wait_for_commits=False)
    cut.started(4, 1)
    assert cut.ended(4, 1, "timed_out", "task 3 never acked") == CutFailed(
        "quiescent checkpoint 4 timed_out: task 3 never acked")
    assert cut.phase == CutPhase.FAILED
