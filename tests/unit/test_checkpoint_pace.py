"""Checkpoints slower than their interval (issue 34 item 4): the minimum pause between
checkpoints, and the verdict ``jstorm status``, the UI and the log give (pure parts;
tests/integration/test_checkpoint_pace.py runs them on a real topology)."""

from __future__ import annotations

from jstormpy.cli.status import format_status
from jstormpy.master.checkpoint_health import CheckpointPace, assess
from jstormpy.master.coordinator import CheckpointCoordinator, TaskAck

TASKS = {1: "spout", 2: "sink"}


def coordinator() -> CheckpointCoordinator:
    c = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                              tolerable_timeouts=3)
    c.set_layout(TASKS, spout_tasks=[1], sink_tasks=[2])
    c.new_generation(1)
    c.ids_record_stored(c.ids_record())
    c.resume_after(0, now=0.0)
    return c


def complete(c: CheckpointCoordinator, cid: int, now: float) -> None:
    for task in TASKS:
        c.ack(1, cid, TaskAck(task, f"h{cid}-{task}", 10, False, 0.0), now, now)
    c.commit_point_written(cid, True, now, now)


def test_the_next_checkpoint_waits_for_the_minimum_pause_after_the_last_one_ended() -> None:
    c = coordinator()
    assert c.due(1.0, interval_s=1.0, min_pause_s=2.0)  # nothing ended yet
    cid, _ = c.start(1.0, 1.0)
    complete(c, cid, now=4.5)  # took 3.5 s against a 1 s interval
    assert not c.due(5.0, interval_s=1.0, min_pause_s=2.0)
    assert not c.due(6.4, interval_s=1.0, min_pause_s=2.0)
    assert c.due(6.5, interval_s=1.0, min_pause_s=2.0)
    # without a pause it would have started at once (back to back)
    assert c.due(4.5, interval_s=1.0, min_pause_s=0.0)


def test_a_timed_out_checkpoint_ends_too_and_the_pause_counts_from_its_timeout() -> None:
    c = coordinator()
    c.start(0.0, 0.0)
    c.expire(10.5)  # timed out
    assert not c.due(11.0, interval_s=1.0, min_pause_s=1.0)
    assert c.due(11.5, interval_s=1.0, min_pause_s=1.0)


def history(*durations: float, status: str = "completed") -> list[dict]:
    return [{"id": i, "status": status, "duration_ms": d} for i, d in enumerate(durations)]


def health(entries: list[dict], in_a_row: int = 0, min_pause_ms: int = 0):
    return assess(entries, in_a_row, interval_ms=2000, min_pause_ms=min_pause_ms,
                  timeout_ms=60_000, tolerable_timeouts=3)


def test_checkpoints_that_keep_up_get_no_advice() -> None:
    h = health(history(900, 1100, 800))
    assert h.pace is CheckpointPace.KEEPING_UP
    assert h.recent_duration_ms == 900 and h.advice == ""


def test_checkpoints_longer_than_the_interval_are_called_back_to_back_with_what_to_change(
) -> None:
    h = health(history(500, 2500, 3000, 2900, 3100, 2800))
    assert h.pace is CheckpointPace.BACK_TO_BACK
    assert "2900 ms" in h.advice and "checkpoint_interval_ms=2000" in h.advice
    assert "min_pause_between_checkpoints_ms" in h.advice
    # the pause counts: 1200 ms checkpoints with a 1000 ms pause fill the interval too
    assert health(history(1200), min_pause_ms=1000).pace is CheckpointPace.BACK_TO_BACK


def test_timeouts_in_a_row_say_how_many_how_many_more_start_a_recovery_and_what_to_change(
) -> None:
    h = health(history(900) + history(60_000, 60_000, status="timed_out"), in_a_row=2)
    assert h.pace is CheckpointPace.TIMING_OUT
    assert "2 checkpoint(s) in a row timed out" in h.advice
    assert "2 more in a row start a recovery" in h.advice
    assert "checkpoint_timeout_ms=60000" in h.advice and "incremental" in h.advice


def test_jstorm_status_prints_the_pace_and_the_warning() -> None:
    status = {"name": "t", "state": "running", "generation": 1, "guarantee": "exactly_once",
              "restarts": 0, "workers": [], "last_completed_checkpoint": None,
              "checkpoint_health": health(history(900), in_a_row=3).to_dict()}
    text = format_status(status)
    assert "pace       every 2000 ms; recent checkpoints take 900 ms; 3 timed out in a row " \
           "(4 start a recovery)" in text
    assert "WARNING    3 checkpoint(s) in a row timed out" in text
    status["checkpoint_health"] = health(history(900)).to_dict()
    text = format_status(status)
    assert "recent checkpoints take 900 ms" in text and "WARNING" not in text
