"""Failure injection for tests and users (DESIGN §11): seeded, reproducible faults.

* SIGKILL schedules — :class:`Kill`, :class:`ChaosSchedule`, :class:`ChaosMonkey`,
  :func:`run_with_chaos` (:mod:`.kills`);
* real-socket network faults between workers and to the Topology Master —
  :class:`ChaosNetwork` (:mod:`.network`);
* the fault classes ``kill``, ``reset``, ``partition``, ``stall``, ``backend_hang``,
  ``backend_slow``, ``disk_full``, ``tm_kill_during_upgrade``, ``kill_during_drain``,
  ``listing_error``, ``metadata_write_error``, ``tm_generation_write_error``,
  ``fresh_run_into_used``, ``savepoint_into_used`` (:mod:`.reuse`; the Redis and Kafka
  outputs: :mod:`.brokers`) and
  ``rescale_unkeyed_state`` as seeded :class:`Scenario` objects run by
  :func:`run_scenario` (:mod:`.scenarios`);
* the soak behind ``jstorm chaos`` — :func:`run_soak` (:mod:`.soak`).

Example:
    >>> from jstormpy.testing.chaos import Scenario
    >>> Scenario.draw(7, topology="stateful", kind="stall").fault.kind
    'stall'
"""

from jstormpy.testing.chaos.kills import ChaosMonkey, ChaosSchedule, Kill, run_with_chaos
from jstormpy.testing.chaos.network import ChaosNetwork
from jstormpy.testing.chaos.scenarios import (
    FAULT_KINDS,
    Fault,
    Scenario,
    ScenarioResult,
    run_scenario,
    scenario_config,
)
from jstormpy.testing.chaos.soak import main, plan_scenarios, run_soak
from jstormpy.testing.chaos.topologies import TOPOLOGIES, Verdict, build_topology, check_output

__all__ = ["FAULT_KINDS", "TOPOLOGIES", "ChaosMonkey", "ChaosNetwork", "ChaosSchedule",
           "Fault", "Kill", "Scenario", "ScenarioResult", "Verdict", "build_topology",
           "check_output", "main", "plan_scenarios", "run_scenario", "run_soak",
           "run_with_chaos", "scenario_config"]
