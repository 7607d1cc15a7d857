"""``MasterCore``'s side of the recovery: the ports through which it performs a recovery's
restore (``recovery_steps.perform``) and the start of a generation (``generation_steps.begin``).

The steps and their order are the pure modules' (shared with the simulator's TM); these
ports are what ``MasterCore`` does at each: its state backend on the BackendIO thread, its
lock, its log, its restart strategy and its bookkeeping, through ``MasterCore``'s public
methods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from jstormpy.api.errors import BackendError
from jstormpy.master.recovery_steps import UNUSABLE_METADATA, Listing, Prepare
from jstormpy.master.restore_plan import LATEST
from jstormpy.master.topology_state import TopologyState
from jstormpy.state_backends.base import CHECKPOINT_IDS_META, COMPLETED_META

if TYPE_CHECKING:
    from jstormpy.master.core import MasterCore

log = logging.getLogger("jstormpy.master")


class MasterRecoveryPort:
    """How ``MasterCore`` performs a recovery's restore
    (:class:`~jstormpy.master.recovery_steps.RecoveryPort`): the state backend on its
    BackendIO thread, answering each call at once; the outcome under its lock."""

    def __init__(self, core: MasterCore, generation: int) -> None:
        self.core, self.generation = core, generation

    def locked(self) -> AbstractContextManager[Any]:
        return self.core.lock

    def current(self) -> bool:
        core = self.core
        return self.generation == core.generation and core.state == TopologyState.RECOVERING

    def put_generation(self, generation: int,
                       then: Callable[[BaseException | None], None]) -> None:
        try:
            self.core.backend.put_meta("generation", str(generation).encode())
        except BackendError as exc:
            log.error("cannot persist generation %d: %s", generation, exc)
            then(exc)
            return
        then(None)

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        self._put(CHECKPOINT_IDS_META, ids, then)

    def put_floor(self, checkpoint_id: int,
                  then: Callable[[BaseException | None], None]) -> None:
        self._put(COMPLETED_META, str(checkpoint_id).encode(), then)

    def _put(self, name: str, value: bytes,
             then: Callable[[BaseException | None], None]) -> None:
        try:
            self.core.backend.put_meta(name, value)
        except BackendError as exc:
            then(exc)
            return
        then(None)

    def list_checkpoints(self,
                         then: Callable[[Listing | None, BaseException | None], None]) -> None:
        backend = self.core.backend
        try:
            listing = Listing(backend.list_completed(), backend.list_checkpoint_ids())
        except BackendError as exc:
            then(None, exc)
            return
        then(listing, None)

    def read_metadata(self, checkpoint_id: int,
                      then: Callable[[Mapping[str, Any] | None, BaseException | None],
                                     None]) -> None:
        try:
            metadata = self.core.backend.read_metadata(checkpoint_id)
        except (*UNUSABLE_METADATA, BackendError) as exc:
            then(None, exc)
            return
        then(metadata, None)

    def generation_stored(self, generation: int) -> None:
        core = self.core
        core.persisted_generation = max(core.persisted_generation, generation)

    def floor_stored(self, checkpoint_id: int) -> None:
        self.core.checkpointing.floor_stored(checkpoint_id)

    def retry_later(self, reason: str) -> None:
        self.core.preparing = None
        self.core.retry_prepare(reason)

    def refuse(self, reason: str) -> None:
        self.core.preparing = None
        self.core.fail(reason)

    def recover_again(self, checkpoint_id: int, why: str) -> None:
        core = self.core
        core.preparing = None
        log.error("checkpoint %s unusable (%s); falling back", checkpoint_id, why)
        core.begin_recovery(f"checkpoint {checkpoint_id} unusable", count_restart=False)

    def prepare(self, prepare: Prepare) -> None:
        core = self.core
        core.preparing = None
        core.target_checkpoint = prepare.target
        if prepare.listing:
            core.note_fallback(list(prepare.listing))
        core.send_prepares(prepare)


class MasterGenerationPort:
    """How ``MasterCore`` starts a generation
    (:class:`~jstormpy.master.generation_steps.GenerationPort`), under its lock."""

    def __init__(self, core: MasterCore) -> None:
        self.core = core

    @property
    def generation(self) -> int:
        return self.core.generation

    def operations_hear(self, reason: str) -> None:
        self.core.upgrade.on_new_generation(reason)  # upgrade hook
        self.core.rescale.on_new_generation(reason)  # rescale hook

    def count_restart(self, reason: str) -> str | None:
        core = self.core
        decision = core.restart_tracker.on_failure(reason)
        core.restarts = core.restart_tracker.restarts
        if not decision.restart:
            return f"{decision.reason}; last failure: {reason}"
        if decision.delay_s:
            log.info("restart %d after a back-off of %.0f ms (%s)", core.restarts,
                     decision.delay_s * 1000, core.config.restart().kind.value)
        return None

    def fail(self, reason: str) -> None:
        self.core.fail(reason)

    def recovering(self, generation: int, target: int | None, reason: str) -> None:
        core = self.core
        core.generation = generation  # stored before any Prepare names it (_resolve_restore)
        core.backpressure.reset()
        core.finished_spouts = set()
        core.target_checkpoint = target
        core.ready = set()
        core.recovery_started = time.monotonic()
        core.recovery_reason = reason
        log.info("generation %d: %s; restoring checkpoint %s", generation, reason,
                 "the latest" if target == LATEST else
                 target if target is not None else "none (fresh state)")
        core.set_state(TopologyState.RECOVERING)

    def maybe_prepare(self) -> None:
        self.core.maybe_prepare_all()
