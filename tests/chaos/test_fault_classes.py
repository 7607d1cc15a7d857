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
# the job still reports drained. Seen as "lost 8 event(s) on 8 key(s): s0 [34]; s1 [34]..."
# (the last window of every sensor) in 118-windowed-kill_during_drain and
# 122-windowed-stall: a recovery near the end of the input replays into the race. Only the
# windowed topology has output caused by end of input, so only its scenarios of those two
# classes are marked; every other scenario must pass.
DRAIN_RACE = pytest.mark.xfail(
    strict=False, reason="issue 13 hole 3: end-of-input windows lost to the drain race")


def _param(scenario):
    marks = [DRAIN_RACE] if scenario.topology == "windowed" and \
        scenario.fault.kind in ("kill_during_drain", "stall") else []
    return pytest.param(scenario, marks=marks,
                        id=f"{scenario.seed}-{scenario.topology}-{scenario.fault.kind}")


def test_the_plan_covers_every_fault_class_three_times() -> None:
    kinds = [s.fault.kind for s in SCENARIOS]
    assert all(kinds.count(k) >= 3 for k in FAULT_KINDS), kinds


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
