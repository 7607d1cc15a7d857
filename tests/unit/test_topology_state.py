"""The TM's topology state is a ``TopologyState`` member (master/topology_state.py), and
what a user reads of it is the same plain string as before: the status JSON, the
Prometheus ``state`` label. Real MasterCore and file backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from jstormpy.api.errors import JStormError
from jstormpy.master.prom import MasterCollector
from jstormpy.master.rescale import RescalePhase
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from tests.unit.test_rescale_commit import setup


def test_a_running_topology_reports_its_typed_state_as_the_plain_string(
        tmp_path: Path) -> None:
    core, _, _ = setup(tmp_path)
    assert core.state is TopologyState.RUNNING
    assert json.loads(json.dumps(core.status(), default=str))["state"] == "running"
    registry = CollectorRegistry()
    registry.register(MasterCollector(core))
    text = generate_latest(registry).decode()
    assert 'jstorm_topology_state{state="running",topology="rc"} 1.0' in text
    for other in ("starting", "recovering", "drained", "killed", "failed"):
        assert f'jstorm_topology_state{{state="{other}",topology="rc"}} 0.0' in text
    assert "TopologyState" not in text


def test_a_killed_topology_is_terminal_and_its_status_says_killed(tmp_path: Path) -> None:
    core, _, _ = setup(tmp_path)
    core.kill("test")
    assert core.state is TopologyState.KILLED
    assert core.state in TERMINAL_STATES
    assert core.wait_state(TERMINAL_STATES, 0.0)
    assert json.dumps({"state": core.status()["state"]}) == '{"state": "killed"}'


def test_a_gray_release_step_is_refused_while_a_rescale_is_under_way(
        tmp_path: Path) -> None:
    core, _, _ = setup(tmp_path)
    core.rescale.request({"count": 3})
    core.tick()
    assert core.rescale.phase == RescalePhase.QUIESCING
    assert not core.rescale.is_idle()
    with pytest.raises(JStormError, match=r"a rescale is in progress \(quiescing\)"):
        core.upgrade.request("continue")
