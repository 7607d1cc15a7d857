"""The one performer of the checkpoint coordinator's actions, through a port.

:class:`~jstormpy.master.coordinator.CheckpointCoordinator` returns actions; the Topology
Master (``MasterCore``) and the simulator's TM (``jstorm simulate``) each carried a copy
of the loop that performs them, kept in step by comments (issue 37). :func:`perform`
is that loop, once: the actions in order, each through one method of the runtime's
:class:`CoordinatorPort`, none after the port says it stopped (a TM that died or was
deposed while performing one). Free of I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from jstormpy.master.coordinator import (
    CollectGarbage,
    CoordinatorAction,
    Drained,
    SendAbort,
    SendComplete,
    SendTrigger,
    StartRecovery,
    TriggerFinal,
    WriteCommitPoint,
)


class CoordinatorPort(Protocol):
    """How a runtime performs the coordinator's actions (one method per action)."""

    def stopped(self) -> bool:
        """The TM stopped (died, was deposed): no further action is performed."""
        ...

    def send_trigger(self, action: SendTrigger) -> None: ...

    def write_commit_point(self, action: WriteCommitPoint) -> None: ...

    def send_complete(self, action: SendComplete) -> None: ...

    def send_abort(self, action: SendAbort) -> None: ...

    def collect_garbage(self, action: CollectGarbage) -> None: ...

    def trigger_final(self, action: TriggerFinal) -> None: ...

    def drained(self, action: Drained) -> None: ...

    def start_recovery(self, action: StartRecovery) -> None: ...


def perform(actions: Iterable[CoordinatorAction], port: CoordinatorPort) -> bool:
    """Perform ``actions`` in order through ``port``; True if one began a recovery."""
    recovery = False
    for action in actions:
        if port.stopped():
            break
        match action:
            case SendTrigger():
                port.send_trigger(action)
            case WriteCommitPoint():
                port.write_commit_point(action)
            case SendComplete():
                port.send_complete(action)
            case SendAbort():
                port.send_abort(action)
            case CollectGarbage():
                port.collect_garbage(action)
            case TriggerFinal():
                port.trigger_final(action)
            case Drained():
                port.drained(action)
            case StartRecovery():
                port.start_recovery(action)
                recovery = True
    return recovery
