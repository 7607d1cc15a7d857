"""The coordinator's actions, performed once (master/coordinator_driver.py) for the
Topology Master and the simulator's TM."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jstormpy.master import coordinator_driver
from jstormpy.master.coordinator import (
    CollectGarbage,
    Drained,
    SendAbort,
    SendComplete,
    SendTrigger,
    StartRecovery,
    TriggerFinal,
    WriteCommitPoint,
)

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self, stop_after: str = "") -> None:
        self.done: list[str] = []
        self.stop_after = stop_after

    def stopped(self) -> bool:
        return bool(self.stop_after) and self.stop_after in self.done

    def __getattr__(self, name: str):  # every action method: record its name
        return lambda action: self.done.append(name)


ALL = [SendTrigger(1, 1), WriteCommitPoint(1, 1, {}), SendComplete(1, 1),
       SendAbort(2, 1, "x"), CollectGarbage(), TriggerFinal(), Drained(1),
       StartRecovery("y")]


def test_every_action_is_performed_in_order_and_a_recovery_is_reported() -> None:
    port = Recorder()
    assert coordinator_driver.perform(ALL, port)
    assert port.done == ["send_trigger", "write_commit_point", "send_complete",
                         "send_abort", "collect_garbage", "trigger_final", "drained",
                         "start_recovery"]
    assert not coordinator_driver.perform(ALL[:3], Recorder())


def test_nothing_is_performed_after_the_master_stopped() -> None:
    # the simulator's TM deposed while writing a commit point performs nothing after it
    port = Recorder(stop_after="write_commit_point")
    assert not coordinator_driver.perform(ALL, port)
    assert port.done == ["send_trigger", "write_commit_point"]


@pytest.mark.parametrize("module", ["master/checkpoints.py",
                                    "jstormpy/testing/simulation/cluster.py"])
def test_no_master_matches_coordinator_actions_itself(module: str) -> None:
    """Both TMs perform the actions through the driver: neither matches on them."""
    tree = ast.parse((ROOT / module).read_text())
    names = {"SendTrigger", "SendComplete", "CollectGarbage", "Drained", "StartRecovery"}
    cases = [n.pattern.cls.id for n in ast.walk(tree) if isinstance(n, ast.match_case)
             and isinstance(n.pattern, ast.MatchClass) and isinstance(n.pattern.cls, ast.Name)
             and n.pattern.cls.id in names]
    assert not cases
    assert "coordinator_driver.perform(" in (ROOT / module).read_text()
