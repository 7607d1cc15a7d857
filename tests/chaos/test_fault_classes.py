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
    assert (v.lost, v.duplicated, v.reordered) == (0, 0, 0), f"{context}\n{v.detail}"
    assert not v.state_problems, f"{context}\n" + "\n".join(v.state_problems)
    assert result.recovery_s is not None, f"no checkpoint completed after the fault: {context}"
