"""Starting a generation: its one order, its one driver and its port.

Every recovery begins a new generation (a worker lost or re-registered, a task failed, a
checkpoint unusable, a rescale or gray release that restores, the first start). The
Topology Master's steps have one order (:func:`begin`):

1. the **operations hear** of it first (a gray release or rescale under way ends or moves
   on: ``UpgradeController`` / ``RescaleController.on_new_generation``);
2. a failure (``count_restart``) is **counted** against the restart strategy: refused,
   the topology fails and no generation begins;
3. the generation **counter** goes up by one and the coordinator starts it
   (``CheckpointCoordinator.new_generation``: checkpoints in flight of the old one are
   dropped); it is stored before any Prepare names it (``recovery_steps.perform``);
4. the TM's per-generation **bookkeeping** starts afresh and it is **recovering**
   (``TopologyState.RECOVERING``), restoring ``target``;
5. the restore **may begin** (``recovery_steps.may_resolve`` decides when).

``MasterCore`` (under its lock) and the simulator's TM are each a
:class:`GenerationPort`.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from typing import Protocol

from jstormpy.master.coordinator import CheckpointCoordinator


class GenerationPort(Protocol):
    """How a runtime starts a generation (every call under the TM's lock)."""

    @property
    def generation(self) -> int:
        """The TM's current generation."""

    def operations_hear(self, reason: str) -> None:
        """A new generation begins (``reason``): the rescale's and gray release's hooks."""

    def count_restart(self, reason: str) -> str | None:
        """Count the failure ``reason`` against the restart strategy: None if a restart is
        allowed, else why not (the topology then fails)."""

    def fail(self, reason: str) -> None:
        """Fail the topology for good."""

    def recovering(self, generation: int, target: int | None, reason: str) -> None:
        """``generation`` began, restoring ``target``: the TM's counter, its bookkeeping
        afresh, its state ``RECOVERING``."""

    def maybe_prepare(self) -> None:
        """The restore may begin (when ``recovery_steps.may_resolve`` says so)."""


def begin(coordinator: CheckpointCoordinator, port: GenerationPort, reason: str,
          target: int | None, *, count_restart: bool) -> int | None:
    """The one driver: start generation ``port.generation + 1`` restoring ``target`` (see
    the module's docstring). Returns it, or None if the restart strategy refused."""
    port.operations_hear(reason)
    if count_restart:
        refused = port.count_restart(reason)
        if refused is not None:
            port.fail(refused)
            return None
    generation = port.generation + 1
    coordinator.new_generation(generation)
    port.recovering(generation, target, reason)
    port.maybe_prepare()
    return generation
