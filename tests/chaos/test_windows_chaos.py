"""Windows under SIGKILL: every window's on_time result committed exactly once, final
results equal a batch recomputation (the README's main job, with seeded kills)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import sensor_windows  # noqa: E402

pytestmark = pytest.mark.slow

SCHEDULES = [
    ChaosSchedule(31, (Kill("worker", at_s=0.8, worker=1),)),
    ChaosSchedule(32, (Kill("point", point="after_snapshot", checkpoint=3, worker=0),)),
    ChaosSchedule.random(seed=33, kills=2, workers=2, master=True),
    ChaosSchedule(34, (Kill("point", point="sink_before_commit", checkpoint=4),)),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=[f"seed{s.seed}" for s in SCHEDULES])
def test_windows_exactly_once_under_sigkill(tmp_path, schedule):
    out = tmp_path / "out"
    status, kills, _ = run_with_chaos(sensor_windows.build(out), sensor_windows.config,
                                      schedule, timeout=180, home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert any(k.startswith(("SIGKILL", "fault point fired")) for k in kills), kills
    assert sensor_windows.verify(out=out), f"{schedule.describe()} {kills}"
