"""Storing the checkpoint ids record: its one order, its one driver and its port.

The coordinator's ids record (``meta/checkpoint_ids``: the id floor, the bad checkpoints,
each epoch's lowest restore, the ids reserved; ``CheckpointCoordinator.ids_record``) is
stored outside a recovery in two cases, both through :class:`IdsRecordStores`:

- **the reservation** (:meth:`IdsRecordStores.tick`): while the topology runs and half of
  the reserved ids are used (``needs_ids_record``), one store at a time, so that a
  checkpoint never starts above a stored reservation and a resumed TM starts above every
  id this one may have handed out;
- **after a bad checkpoint** (:meth:`IdsRecordStores.store`): a failed commit point, a
  dropped rescale's checkpoint, stored at once, best effort, so that a TM that dies
  before its next recovery's record leaves the bad mark behind.

Each store has one order: **read** the record under the lock, at the moment of the write
(a record read earlier could miss a bad mark and be written over a newer one), **write**
it through the port, then, **under the lock**, let the coordinator hand out the ids it
reserves (``ids_record_stored``); a write that fails reserves nothing and is reported to
the port (``not_stored``). A recovery stores the record as one of its restore plan's
steps (``recovery_steps.perform``), through the same ``put_ids_record``.

``MasterCore`` (its BackendIO thread, under its lock) and the simulator's TM (its
simulated storage) are each an :class:`IdsRecordPort`.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from jstormpy.master.coordinator import CheckpointCoordinator

RESERVATION = "reservation"
"""The ``why`` of the tick's store."""


class IdsRecordPort(Protocol):
    """How a runtime stores the ids record."""

    def locked(self) -> AbstractContextManager[Any]:
        """The TM's lock: the coordinator is read and changed under it."""

    def on_storage(self, step: Callable[[], None]) -> None:
        """Run ``step`` where this TM calls its storage (production: queue it on the
        BackendIO thread; the simulator: at once). Called under :meth:`locked`."""

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        """Store ``ids`` as ``meta/checkpoint_ids``; ``then(error)`` (never, if the TM died
        meanwhile)."""

    def not_stored(self, why: str, error: BaseException) -> None:
        """The store for ``why`` failed (e.g. log it): nothing more is reserved."""


class IdsRecordStores:
    """One TM's stores of its ids record outside a recovery (see the module's
    docstring)."""

    def __init__(self, coordinator: CheckpointCoordinator, port: IdsRecordPort) -> None:
        self._coordinator = coordinator
        self._port = port
        self._reserving = False  # the tick's store is under way

    @property
    def reserving(self) -> bool:
        """The tick's store is under way (no second one starts meanwhile)."""
        return self._reserving

    def tick(self, *, running: bool) -> bool:
        """Under the lock, at each tick: reserve ids ahead while the topology runs and half
        of the reservation is used, one store at a time. True if a store began."""
        if not running or self._reserving or not self._coordinator.needs_ids_record():
            return False
        self._reserving = True
        self._port.on_storage(lambda: self.store(RESERVATION, self._reserved))
        return True

    def _reserved(self) -> None:
        with self._port.locked():
            self._reserving = False

    def store(self, why: str, then: Callable[[], None] | None = None) -> None:
        """Where the TM calls its storage, off the lock: store the ids record now (``why``:
        what made it due, for :meth:`IdsRecordPort.not_stored`), then ``then()`` whether
        or not it was stored."""
        coordinator, port = self._coordinator, self._port
        with port.locked():
            ids = coordinator.ids_record()

        def stored(error: BaseException | None) -> None:
            if error is None:
                with port.locked():
                    coordinator.ids_record_stored(ids)
            else:
                port.not_stored(why, error)
            if then is not None:
                then()
        port.put_ids_record(ids, stored)
