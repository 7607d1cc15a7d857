"""Starting a generation by its one driver (master/generation_steps.py): what
``MasterCore.begin_generation`` and the simulator's TM both run when a recovery begins,
here with the real restart strategy (``master/restart.py``) behind the port, as
``MasterCore``'s port has it."""

from __future__ import annotations

from jstormpy.api.config import Config
from jstormpy.master.coordinator import CheckpointCoordinator, TaskAck
from jstormpy.master.generation_steps import begin
from jstormpy.master.restart import RestartTracker
from jstormpy.master.restore_plan import LATEST
from jstormpy.master.topology_state import TopologyState


class Port:
    def __init__(self, max_restarts: int) -> None:
        config = Config(max_restarts=max_restarts)
        self.tracker = RestartTracker(config.restart(), config.max_restarts)
        self.generation = 0
        self.state = TopologyState.RUNNING
        self.calls: list[str] = []
        self.failure = ""
        self.target: int | None = None

    def operations_hear(self, reason: str) -> None:
        self.calls.append("hear")

    def count_restart(self, reason: str) -> str | None:
        self.calls.append("count")
        decision = self.tracker.on_failure(reason)
        return None if decision.restart else decision.reason

    def fail(self, reason: str) -> None:
        self.calls.append("fail")
        self.state, self.failure = TopologyState.FAILED, reason

    def recovering(self, generation: int, target: int | None, reason: str) -> None:
        self.calls.append("recovering")
        self.generation, self.target = generation, target
        self.state = TopologyState.RECOVERING

    def maybe_prepare(self) -> None:
        self.calls.append("prepare")


def in_flight() -> CheckpointCoordinator:
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                  tolerable_timeouts=1)
    coord.set_layout({1: "spout", 2: "sink"}, spout_tasks=[1], sink_tasks=[2])
    coord.new_generation(0)
    coord.ids_record_stored(coord.ids_record())
    coord.resume_after(0, now=0.0)
    cid, _ = coord.start(now=1.0, wall=1.0)
    coord.ack(0, cid, TaskAck(1, "h", 1, False, 0.0), 1.0, 1.0)
    return coord


def test_a_generation_voids_the_old_ones_checkpoints_before_the_restore_may_begin() -> None:
    coord, port = in_flight(), Port(max_restarts=3)
    assert coord.inflight
    assert begin(coord, port, "worker 0 lost", LATEST, count_restart=True) == 1
    assert port.calls == ["hear", "count", "recovering", "prepare"]
    assert (port.generation, port.target, port.state) == (1, LATEST, TopologyState.RECOVERING)
    assert coord.generation == 1 and not coord.inflight
    # the old generation's late acks count for nothing
    assert coord.ack(0, 1, TaskAck(2, "h", 1, False, 0.0), 2.0, 2.0) == []


def test_a_refused_restart_fails_the_topology_and_begins_no_generation() -> None:
    coord, port = in_flight(), Port(max_restarts=0)
    assert begin(coord, port, "task 2 failed", LATEST, count_restart=True) is None
    assert port.calls == ["hear", "count", "fail"]
    assert port.state == TopologyState.FAILED and port.generation == 0
    assert "restart" in port.failure  # names why it refused
    assert coord.generation == 0 and coord.inflight  # nothing of the old one voided


def test_a_rescale_or_upgrade_is_not_counted_against_the_restart_strategy() -> None:
    coord, port = in_flight(), Port(max_restarts=0)
    assert begin(coord, port, "rescale", 7, count_restart=False) == 1
    assert port.calls == ["hear", "recovering", "prepare"]
    assert port.target == 7 and port.tracker.restarts == 0
