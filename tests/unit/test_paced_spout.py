"""The paced spout the integration tests release once their scenario is over
(tests/integration/paced_spout.py): paced until released, then unthrottled, with the same
events and snapshots as SequenceSpout."""

from __future__ import annotations

import time
from pathlib import Path

from jstormpy import SequenceSpout
from tests.integration.paced_spout import ReleasableSequenceSpout, release
from tests.unit.connectors.test_sources import Collector, drain, launch, step


def drain_within(collector: Collector, seconds: float) -> list[tuple[object, ...]]:
    """Every event the spout emits until it finishes, which must be within ``seconds``."""
    spout = collector.spout
    start, deadline = len(collector.out), time.monotonic() + seconds
    while not spout.finished:
        assert time.monotonic() < deadline, \
            f"still paced: {len(collector.out) - start} events in {seconds} s"
        spout.next_tuple()
    return collector.out[start:]


def test_paced_until_released_then_full_speed_with_the_same_events(tmp_path: Path) -> None:
    gate = tmp_path / "release"
    paced = launch(ReleasableSequenceSpout(gate, keys=3, per_key=400, rate_per_s=20))
    t0 = time.monotonic()
    step(paced, 30)
    elapsed = time.monotonic() - t0
    # paced: at most the rate's share of the time (the spout emits 100 a call unthrottled)
    assert 1 <= len(paced.out) <= 2 + elapsed * 20, (len(paced.out), elapsed)
    snap = paced.spout.snapshot()
    assert snap == {"emitted": len(paced.out)}
    release(gate)
    drain_within(paced, 10)  # paced at 20/s, its 1,200 events would take a minute
    assert paced.out == drain(launch(SequenceSpout(keys=3, per_key=400)))


def test_a_task_started_after_the_release_runs_unthrottled(tmp_path: Path) -> None:
    """A task restarted (recovery, rescale, upgrade) after the release reads the file."""
    gate = tmp_path / "release"
    spout = ReleasableSequenceSpout(gate, keys=2, per_key=300, rate_per_s=5)
    release(gate)
    restarted = launch(spout, snap={"emitted": 100})
    # paced at 5/s, its 500 events would take 100 s
    assert drain_within(restarted, 10) == drain(launch(SequenceSpout(keys=2, per_key=300),
                                                       snap={"emitted": 100}))
