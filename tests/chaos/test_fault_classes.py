"""Exactly-once under every fault class of ``jstormpy.testing.chaos`` (issue 13).

Thirty seeded scenarios (``jstorm chaos -n 30 --seed 101`` runs the same ones), the fault
classes taken in turn so each gets three or four, over the stateful, word-count and
windowed topologies. Each runs real processes (a Topology Master, three workers) with the
fault injected on real sockets, signals, a real filesystem or a real (test) WebHDFS server,
and must drain with no event lost, duplicated or reordered and state equal to a batch
recomputation. Network faults go through fault-injecting TCP proxies on every worker pair
and worker-TM channel; see docs/checkpointing.md, "Fault classes".
"""

from __future__ import annotations

import pytest

from jstormpy.testing.chaos import FAULT_KINDS, plan_scenarios, run_scenario

pytestmark = pytest.mark.slow

SCENARIOS = plan_scenarios(30, seed=101)

# Known hole (issue 13, hole 3, "drain race"; fixed on the faults branch): when the final
# checkpoint is taken between a spout's last emit and its end of stream, the windows that
# fire at watermark +inf on end of input land in a transaction that is never committed and
# the job still reports drained. It shows as "lost 8 event(s) on 8 key(s): s0 [34]; s1 [34]
# ..." (the last window of every sensor; seen in 118-windowed-kill_during_drain,
# 122-windowed-stall and soak seed 38, windowed reset). Only the windowed topology has output
# caused by end of input. A windowed scenario whose ONLY problem is that exact signature is
# reported as an expected failure; any other difference fails.
def _final_windows_lost(workdir) -> int:
    """How many keys lack the on_time result of their last window."""
    from jstormpy import read_committed
    from jstormpy.testing.chaos.topologies import READINGS, SENSORS, WINDOW_MS, reading

    last = {}
    for i in range(SENSORS * READINGS):
        sensor, ts, _ = reading(i)
        last[sensor] = max(last.get(sensor, 0), ts // WINDOW_MS * WINDOW_MS)
    seen = {(r["key"], r["window_start"]) for r in read_committed(workdir / "out")
            if r["kind"] == "on_time"}
    return sum(1 for k, w in last.items() if (k, w) not in seen)


def test_the_plan_covers_every_fault_class_three_times() -> None:
    kinds = [s.fault.kind for s in SCENARIOS]
    assert all(kinds.count(k) >= 3 for k in FAULT_KINDS), kinds


def _param(scenario):
    return pytest.param(scenario, id=f"{scenario.seed}-{scenario.topology}-{scenario.fault.kind}")


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_exactly_once_under_fault(tmp_path, scenario) -> None:
    result = run_scenario(scenario, tmp_path, timeout_s=150)
    context = f"{scenario.describe()}\nevents: {list(result.events)}\nerror: {result.error}"
    assert result.drained, context
    assert result.fired, f"the fault never happened: {context}"
    v = result.verdict
    if scenario.topology == "windowed" and v.lost and not (v.duplicated or v.reordered) \
            and not v.state_problems and _final_windows_lost(tmp_path) == v.lost:
        pytest.xfail(f"issue 13 hole 3 (drain race): the last window of {v.lost} key(s) "
                     f"lost: {v.detail}")
    assert (v.lost, v.duplicated, v.reordered) == (0, 0, 0), f"{context}\n{v.detail}"
    assert not v.state_problems, f"{context}\n" + "\n".join(v.state_problems)
    assert result.recovery_s is not None, f"no checkpoint completed after the fault: {context}"
