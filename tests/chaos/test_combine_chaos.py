"""Combining before the shuffle under SIGKILL: the windowed word count's split tasks ship
partial counts to the count tasks; after kills of workers (and at protocol points) every
word's final count is committed exactly once and equals the corpus's (no loss, no
duplicate: a partial never crosses a barrier its records would not have crossed)."""

from __future__ import annotations

import pytest
from combine_topologies import (
    check_event_time_counts,
    check_final_counts,
    event_time_counts,
    windowed_wordcount,
)
from topologies import write_corpus

from jstormpy import Config
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

pytestmark = pytest.mark.slow

SCHEDULES = [
    ChaosSchedule.random(seed=61, kills=2, workers=3),
    ChaosSchedule(62, (Kill("point", point="after_snapshot", checkpoint=2, worker=1),)),
    ChaosSchedule(63, (Kill("point", point="sink_before_commit", checkpoint=3),)),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=[f"seed{s.seed}" for s in SCHEDULES])
def test_combined_window_wordcount_exactly_once_under_sigkill(tmp_path, schedule):
    out = tmp_path / "out"
    expected = write_corpus(tmp_path / "corpus")
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000)
    status, kills, _ = run_with_chaos(windowed_wordcount(out, tmp_path / "corpus"), config,
                                      schedule, timeout=120, home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert any(k.startswith(("SIGKILL", "fault point fired")) for k in kills), kills
    problems = check_final_counts(out, expected)
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"
    logs = "".join(p.read_text() for p in (tmp_path / "home" / "runs" /
                                           "chaos-window-wordcount" / "logs").glob("*.log"))
    assert "(split) combines before the shuffle towards 'count'" in logs


@pytest.mark.parametrize("schedule", SCHEDULES, ids=[f"seed{s.seed}" for s in SCHEDULES])
def test_combined_event_time_counts_exactly_once_under_sigkill(tmp_path, schedule):
    """Event time: the forwarding task ships per (key, pane) partials of the records on
    time under the watermark it sent, the rest as records. After kills (and at protocol
    points) every firing, late ones included, is committed exactly once and equals the
    reference's: a restored task keeps its watermark bound, so no partial is late."""
    out, late = tmp_path / "out", tmp_path / "late"
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000)
    status, kills, _ = run_with_chaos(event_time_counts(out, late), config, schedule,
                                      timeout=120, home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert any(k.startswith(("SIGKILL", "fault point fired")) for k in kills), kills
    problems = check_event_time_counts(out, late)
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"
    logs = "".join(p.read_text() for p in (tmp_path / "home" / "runs" /
                                           "chaos-event-time-counts" / "logs").glob("*.log"))
    assert "(forward) combines before the shuffle towards 'count'" in logs
