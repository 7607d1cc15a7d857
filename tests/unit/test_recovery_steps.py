"""A recovery's restore performed by its one driver (master/recovery_steps.py).

``MasterCore`` and the simulator's TM both perform a ``RestorePlan`` through
``recovery_steps.perform``; these tests drive it through a port over an in-memory store
that can fail any one call, and check what a user of the topology would notice: which
writes happen before any worker is prepared, what a failure leaves behind, and that a
superseded recovery prepares nobody.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from jstormpy.api.errors import BackendError, CorruptSnapshotError
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.recovery_steps import (
    FallBack,
    Gate,
    Listing,
    Prepare,
    PrepareFailed,
    StartAll,
    Waiting,
    may_resolve,
    perform,
    worker_ready,
)
from jstormpy.master.restore_plan import LATEST, RestorePlan


class Port:
    """An in-memory state backend; ``fail`` names the call that raises (``"ids#2"``: the
    second ids record write)."""

    def __init__(self, completed: list[int], metadata: Mapping[int, Any],
                 fail: str = "", error: BaseException | None = None) -> None:
        self.completed, self.metadata = completed, dict(metadata)
        self.fail, self.error = fail, error or BackendError("EIO")
        self.calls: list[str] = []
        self.meta: dict[str, Any] = {}
        self.live = True
        self.generation = self.floor = 0
        self.outcome: tuple[str, Any] | None = None
        self.superseded_after = ""
        self.registered = True  # every worker registered (may_prepare)

    def _answer(self, call: str) -> BaseException | None:
        self.calls.append(call)
        if call == self.superseded_after:
            self.live = False
        if self.fail in (call, f"{call}#{self.calls.count(call)}"):
            return self.error
        return None

    def locked(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def current(self) -> bool:
        return self.live

    def may_prepare(self) -> bool:
        return self.registered

    def put_generation(self, generation: int, then: Callable[[Any], None]) -> None:
        error = self._answer("generation")
        if error is None:
            self.meta["generation"] = generation
        then(error)

    def put_ids_record(self, ids: bytes, then: Callable[[Any], None]) -> None:
        error = self._answer("ids")
        if error is None:
            self.meta["ids"] = json.loads(ids)
        then(error)

    def put_floor(self, checkpoint_id: int, then: Callable[[Any], None]) -> None:
        error = self._answer("floor")
        if error is None:
            self.meta["floor"] = checkpoint_id
        then(error)

    def list_checkpoints(self, then: Callable[[Any, Any], None]) -> None:
        error = self._answer("list")
        then(None if error else Listing(self.completed, self.completed), error)

    def read_metadata(self, checkpoint_id: int, then: Callable[[Any, Any], None]) -> None:
        error = self._answer(f"read {checkpoint_id}")
        then(None if error else self.metadata[checkpoint_id], error)

    def generation_stored(self, generation: int) -> None:
        self.generation = generation

    def floor_stored(self, checkpoint_id: int) -> None:
        self.floor = checkpoint_id

    def retry_later(self, reason: str) -> None:
        self.outcome = ("retry", reason)

    def refuse(self, reason: str) -> None:
        self.outcome = ("refuse", reason)

    def recover_again(self, checkpoint_id: int, why: str) -> None:
        self.outcome = ("again", checkpoint_id)

    def prepare(self, prepare: Prepare) -> None:
        self.outcome = ("prepare", prepare)

    def hold(self) -> None:
        self.outcome = ("hold", None)


META = {4: {"tasks": {"0": {"handle": "h4"}}}, 5: {"tasks": {"0": {"handle": "h5"}}}}


def recover(port: Port, epoch: int = 2, completed_floor: int = 0,
            ) -> tuple[CheckpointCoordinator, RestorePlan]:
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                  tolerable_timeouts=0)
    plan = RestorePlan(3, LATEST, stateful=True, persisted_generation=2,
                       completed_floor=completed_floor, bad=coord.bad, epoch=epoch,
                       epoch_starts=coord.epoch_starts)
    perform(plan, coord, port)
    return coord, plan


def test_everything_a_restarted_tm_needs_is_stored_before_any_worker_is_prepared() -> None:
    port = Port([4, 5], META)
    coord, _ = recover(port)
    assert port.calls == ["generation", "ids", "list", "read 5", "ids", "floor"]
    assert port.outcome == ("prepare", Prepare(5, {0: "h5"}, 5, 5, [4, 5]))
    assert port.meta["generation"] == 3 and port.generation == 3
    assert port.meta["ids"]["epochs"] == {"2": 5}  # epoch 2 restored checkpoint 5
    assert port.meta["floor"] == 5 and port.floor == 5
    assert coord.ids_reserved >= 5  # the stored record's reservation is usable
    assert coord.completed_floor == 5


def test_an_ids_record_that_is_not_stored_prepares_nobody() -> None:
    port = Port([4, 5], META, fail="ids")
    recover(port)
    assert port.calls == ["generation", "ids"]
    assert port.outcome is not None and port.outcome[0] == "retry"
    assert "generation 3" in port.outcome[1]
    assert port.generation == 0  # not recorded: the next attempt stores it again


def test_an_epoch_start_that_is_not_stored_is_taken_back() -> None:
    port = Port([4, 5], META, fail="ids#2", error=BackendError("disk full"))
    coord, _ = recover(port)
    assert port.calls == ["generation", "ids", "list", "read 5", "ids"]  # no floor
    assert coord.epoch_starts == {}
    assert port.outcome is not None and port.outcome[0] == "retry"
    assert "epoch 2" in port.outcome[1]


def test_a_damaged_commit_point_is_bad_and_the_recovery_goes_lower() -> None:
    port = Port([4, 5], META, fail="read 5", error=CorruptSnapshotError("torn"))
    coord, _ = recover(port)
    assert port.outcome == ("again", 5)
    assert 5 in coord.bad


def test_a_store_that_does_not_answer_a_read_keeps_the_checkpoint() -> None:
    port = Port([4, 5], META, fail="read 5", error=BackendError("timeout"))
    coord, _ = recover(port)
    assert port.outcome is not None and port.outcome[0] == "retry"
    assert 5 not in coord.bad


@pytest.mark.parametrize("after", ["ids", "list", "read 5"])
def test_a_superseded_recovery_stops_and_prepares_nobody(after: str) -> None:
    port = Port([4, 5], META)
    port.superseded_after = after
    recover(port)
    assert port.calls[-1] == after
    assert port.outcome is None


def test_a_listing_short_of_the_completed_floor_waits() -> None:
    port = Port([4], META)
    recover(port, completed_floor=5)
    assert port.calls == ["generation", "ids", "list"]
    assert port.outcome is not None and port.outcome[0] == "retry"
    assert "checkpoint 5 completed in this run" in port.outcome[1]


def gate(registered: int = 2, resolving: bool = False, committing: bool = False,
         backed_off: bool = True, held: bool = False) -> Gate:
    return may_resolve(registered=registered, workers=2, resolving=resolving,
                       committing=committing, backed_off=backed_off, held=held)


def test_the_restore_waits_for_workers_then_a_commit_outcome_then_the_back_off() -> None:
    assert gate() == Gate.GO
    assert gate(registered=1) == Gate.GO  # its stores run while the workers start
    assert gate(registered=1, held=True, committing=True) == Gate.WORKERS
    assert gate(registered=2, held=True) == Gate.GO  # the last registration: again
    assert gate(registered=1, committing=True) == Gate.COMMITTING
    assert gate(resolving=True) == Gate.RESOLVING
    assert gate(committing=True, backed_off=False) == Gate.COMMITTING
    assert gate(backed_off=False) == Gate.BACKING_OFF


def coordinator() -> CheckpointCoordinator:
    return CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                 tolerable_timeouts=0)


def test_a_corrupt_snapshot_marks_the_target_bad_and_falls_back() -> None:
    coord, ready = coordinator(), {0}
    outcome = worker_ready(coord, ready, 1, ok=False, corrupt=True, target=7, workers=2,
                           base=7, now=0.0)
    assert outcome == FallBack(7) and 7 in coord.bad
    assert worker_ready(coord, ready, 1, ok=False, corrupt=True, target=None, workers=2,
                        base=0, now=0.0) == PrepareFailed()  # nothing restored: no fallback


def test_the_generation_starts_above_the_prepared_ids_once_every_worker_is_ready() -> None:
    coord, ready = coordinator(), set[int]()
    assert worker_ready(coord, ready, 0, ok=True, corrupt=False, target=7, workers=2,
                        base=9, now=0.0) == Waiting()
    assert worker_ready(coord, ready, 1, ok=True, corrupt=False, target=7, workers=2,
                        base=9, now=0.0) == StartAll(9)
    assert coord.next_id == 10  # the first checkpoint of the generation


def test_a_restore_decided_before_the_last_registration_stores_all_but_prepares_nobody() -> None:
    """Resolved while a worker is still to register: everything a restarted TM needs is
    stored, nothing is sent, and the coordinator learns nothing (its floor stays); the
    resolution after the last registration stores nothing again and prepares from a
    listing made then."""
    port = Port([4, 5], META)
    port.registered = False
    coord, _ = recover(port)
    assert port.calls == ["generation", "ids", "list", "read 5", "ids", "floor"]
    assert port.outcome == ("hold", None)
    assert port.meta["generation"] == 3 and port.meta["ids"]["epochs"] == {"2": 5}
    assert port.meta["floor"] == 5
    assert coord.completed_floor == 0 and 5 not in coord.restored  # nothing settled
    # the last worker registers: the same generation is resolved again
    port.calls, port.registered = [], True
    port.completed = [4, 5, 6]  # what the listing shows now is what the Prepares restore
    port.metadata[6] = {"tasks": {"0": {"handle": "h6"}}}
    plan = RestorePlan(3, LATEST, stateful=True, persisted_generation=port.generation,
                       completed_floor=coord.completed_floor, bad=coord.bad, epoch=2,
                       epoch_starts=coord.epoch_starts, persisted_floor=port.floor)
    perform(plan, coord, port)
    assert port.calls == ["list", "read 6", "floor"]  # the generation and epoch: stored
    assert port.outcome == ("prepare", Prepare(6, {0: "h6"}, 6, 6, [4, 5, 6]))
    assert coord.completed_floor == 6
