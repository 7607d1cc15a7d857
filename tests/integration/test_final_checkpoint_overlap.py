"""A bounded run's final checkpoint starts beside a periodic one in flight (issue 36).

The spouts finish only after the first checkpoint's barrier, and a bolt holds that
checkpoint's snapshot while a file exists: at the end of input a periodic checkpoint is in
flight that cannot be the final one. The final checkpoint starts at once, beside it (it
used to wait for it to complete), and a worker killed while both are in flight still
leaves every record committed exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed

from .components import FinishAfterCheckpoint, HeldPassThrough
from .helpers import fast_config, kill_now, wait_until

pytestmark = pytest.mark.timeout(150)

N = 400


def _topology(name: str, out: Path, hold: Path) -> Any:
    b = TopologyBuilder(name)
    b.set_spout("numbers", FinishAfterCheckpoint(N, per_call=20), parallelism=2)
    b.set_bolt("held", HeldPassThrough(str(hold)), parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(out)), parallelism=2).shuffle_grouping("held")
    return b.build()


def _both_in_flight(handle: Any) -> list[int] | None:
    """The checkpoints in flight once every spout finished and two are (else None)."""
    st = handle.status()
    inflight = st["inflight_checkpoints"]
    return inflight if len(st["spouts_finished"]) == 2 and len(inflight) == 2 else None


def _assert_exactly_once(out: Path) -> None:
    seqs = sorted(r["seq"] for r in read_committed(out))
    assert seqs == list(range(N)), (
        f"{len(seqs)} committed, {len(set(seqs))} distinct, missing "
        f"{sorted(set(range(N)) - set(seqs))[:10]}")


def test_the_final_checkpoint_starts_while_a_periodic_one_is_in_flight(tmp_path: Path) -> None:
    out, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()  # every checkpoint's snapshot at the bolt waits until it is removed
    with LocalCluster() as cluster:
        handle = cluster.submit(_topology("final-overlap", out, hold),
                                fast_config(checkpoint_interval_ms=300))
        periodic, final = wait_until(
            lambda: _both_in_flight(handle), timeout=30,
            what="the final checkpoint in flight beside the held periodic one")
        hold.unlink()
        status = handle.wait(timeout=60)
    assert status["state"] == "drained"
    assert status["final_checkpoint"] == final > periodic
    history = {c["id"]: c for c in status["checkpoints"]}
    assert history[periodic]["status"] == history[final]["status"] == "completed"
    # the final one started before the periodic one completed
    assert history[final]["started_at"] < (history[periodic]["started_at"]
                                          + history[periodic]["duration_ms"] / 1000)
    _assert_exactly_once(out)


@pytest.mark.parametrize("victim", [0, 1])
def test_a_worker_killed_while_both_are_in_flight_loses_and_repeats_nothing(
        tmp_path: Path, victim: int) -> None:
    out, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()
    with LocalCluster() as cluster:
        handle = cluster.submit(_topology("final-overlap-kill", out, hold),
                                fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: _both_in_flight(handle), timeout=30,
                   what="the final checkpoint in flight beside the held periodic one")
        generation = handle.status()["generation"]
        kill_now(handle, "worker", victim)
        hold.unlink()  # the recovery's checkpoints complete
        status = handle.wait(timeout=90)
    assert status["state"] == "drained"
    assert status["generation"] > generation, "the kill did not start a recovery"
    _assert_exactly_once(out)
