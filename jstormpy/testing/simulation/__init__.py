"""Deterministic simulation of the checkpoint protocol (``jstorm simulate``).

The real protocol objects (the TM's coordinator and restore plan, the tasks' aligner,
snapshot and sink-transaction objects, key-group redistribution) run in one process
against a simulated clock, network, storage and external systems, driven by one seeded
random generator: every run replays exactly from its seed. See docs/simulation.md.
"""

from jstormpy.testing.simulation.faults import ALL_FAULTS, Fault, FaultPlan
from jstormpy.testing.simulation.scenario import SeedResult, run_seed, run_seeds

__all__ = ["ALL_FAULTS", "Fault", "FaultPlan", "SeedResult", "run_seed", "run_seeds"]
