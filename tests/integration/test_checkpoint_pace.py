"""Checkpoints slower than their interval, on a real topology (issue 34 item 4): the
minimum pause between checkpoints holds, and ``jstorm status`` says plainly when
checkpoints keep timing out (how many in a row, what to change) and when they keep up
again; output stays exactly once."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder
from jstormpy.cli.status import format_status
from tests.integration.components import HeldSnapshots
from tests.integration.helpers import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
from topologies import (  # noqa: E402
    RunningSum,
    SequenceSpout,
    check_keyed_sums,
    linear,
)

KEYS, PER_KEY = 10, 300


def completed(status: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((c for c in status["checkpoints"] if c["status"] == "completed"),
                  key=lambda c: c["id"])


def test_checkpoints_start_no_sooner_than_the_minimum_pause_after_the_last_one(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=100, min_pause_between_checkpoints_ms=700,
                  state_backend=f"file://{tmp_path}/ckpt")
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, PER_KEY, rate=1000), conf)
        final = handle.wait(timeout=120)
    assert final["state"] == "drained", final.get("failure")
    done = completed(final)
    assert len(done) >= 3, done
    # the final checkpoint is triggered by the end of input, not by the schedule
    for before, after in zip(done[:-2], done[1:-1], strict=True):
        ended = before["started_at"] + before["duration_ms"] / 1000.0
        assert after["started_at"] - ended >= 0.65, (before, after)
    assert not check_keyed_sums(out, KEYS, PER_KEY)


def test_status_says_how_many_checkpoints_timed_out_in_a_row_and_what_to_change(
        tmp_path: Path) -> None:
    out, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()
    b = TopologyBuilder("held-snapshots")
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=300),
                parallelism=2)
    b.set_bolt("held", HeldSnapshots(str(hold)), parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("held", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("sum", ["key"])
    conf = Config(workers=2, checkpoint_interval_ms=1000, checkpoint_timeout_ms=800,
                  tolerable_failed_checkpoints=50, state_backend=f"file://{tmp_path}/ckpt")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), conf)
        wait_until(lambda: handle.status()["checkpoint_health"]["timed_out_in_a_row"] >= 2,
                   timeout=60, what="two checkpoint timeouts in a row")
        status = handle.status()
        health = status["checkpoint_health"]
        assert health["pace"] == "timing_out", health
        text = format_status(status)
        n = health["timed_out_in_a_row"]
        assert f"WARNING    {n} checkpoint(s) in a row timed out after " \
               f"checkpoint_timeout_ms=800" in text, text
        assert "tolerable_failed_checkpoints=50" in text, text
        hold.unlink()
        started = time.time()
        wait_until(lambda: any(c["started_at"] > started for c in completed(handle.status())),
                   timeout=60, what="a checkpoint completed after the hold")
        status = handle.status()
        health = status["checkpoint_health"]
        assert health["timed_out_in_a_row"] == 0 and health["pace"] == "keeping_up", health
        assert "WARNING" not in format_status(status)
        final = handle.wait(timeout=120)
    assert final["state"] == "drained", final.get("failure")
    assert final["restarts"] == 0, final["recoveries"]
    assert not check_keyed_sums(out, KEYS, PER_KEY)
