"""Retention performed for the Topology Master: its steps, its one driver and its port.

The coordinator asks for retention when a checkpoint completes (``CollectGarbage``);
which checkpoints it keeps is ``state_backends/retention.py``'s decision, performed by
``StateBackend.garbage_collect``. Around that call the Topology Master's steps have one
order (:func:`perform`):

1. **read**, under the lock, the checkpoints the TM will never restore (``bad``) and the
   newest id it knows of (``id_floor``): neither counts among the newest kept, and
   nothing above the id floor is touched (a deposed or dead TM's late commit point,
   issue 27);
2. **collect** through the port, off the lock (the backend may be slow);
3. **forget**, under the lock, what was deleted (``retention_deleted``: status and the
   restore no longer offer it). A collection that fails deletes nothing the TM forgets.

``MasterCore`` (its BackendIO thread) and the simulator's TM (its serialised storage
calls) are each a :class:`RetentionPort`.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from jstormpy.master.coordinator import CheckpointCoordinator


class RetentionPort(Protocol):
    """How a runtime performs retention."""

    def locked(self) -> AbstractContextManager[Any]:
        """The TM's lock: the coordinator is read and changed under it."""

    def garbage_collect(self, keep: int, bad: Collection[int], upto: int,
                        then: Callable[[Sequence[int] | None, BaseException | None],
                                       None]) -> None:
        """``StateBackend.garbage_collect(keep, bad, upto)``; ``then(deleted, error)``
        (never, if the TM died meanwhile)."""


def perform(coordinator: CheckpointCoordinator, keep: int, port: RetentionPort) -> None:
    """The one driver: retention keeping the newest ``keep`` checkpoints (see the module's
    docstring)."""
    with port.locked():  # never the ones it will not restore (issue 27)
        bad, upto = frozenset(coordinator.bad), coordinator.id_floor

    def collected(deleted: Sequence[int] | None, error: BaseException | None) -> None:
        if error is None and deleted:
            with port.locked():
                coordinator.retention_deleted(deleted)
    port.garbage_collect(keep, bad, upto, collected)
