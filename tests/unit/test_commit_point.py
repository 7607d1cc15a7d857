"""The one commit path (``master/commit_point.py``): its steps in their one order,
performed by one driver for ``MasterCore`` and the simulator's TM alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from jstormpy.api.errors import BackendError, BackendTimeoutError
from jstormpy.master.commit_point import (
    CheckFence,
    CommitOutcome,
    CommitPoint,
    CommitStatus,
    CreateCommitPoint,
    FenceMoment,
    StoreFloor,
    perform,
)


class RecordingPort:
    """Answers each step later (as the simulator's storage does) or at once."""

    def __init__(self, fenced: frozenset[FenceMoment] = frozenset(),
                 create_error: BackendError | None = None,
                 floor_error: BackendError | None = None, deferred: bool = False) -> None:
        self.fenced, self.create_error, self.floor_error = fenced, create_error, floor_error
        self.deferred = deferred
        self.log: list[str] = []
        self.pending: list[Callable[[], None]] = []
        self.created: dict[str, Any] = {}

    def _answer(self, fn: Callable[[], None]) -> None:
        if self.deferred:
            self.pending.append(fn)
        else:
            fn()

    def run(self) -> None:
        while self.pending:
            self.pending.pop(0)()

    def check_fence(self, checkpoint_id: int, moment: FenceMoment,
                    then: Callable[[bool], None]) -> None:
        self.log.append(f"fence {moment.name}")
        self._answer(lambda: then(moment in self.fenced))

    def create_commit_point(self, checkpoint_id: int, metadata: Mapping[str, Any],
                            then: Callable[[BackendError | None], None]) -> None:
        self.log.append(f"create {checkpoint_id}")
        self.created = dict(metadata)
        self._answer(lambda: then(self.create_error))

    def store_floor(self, checkpoint_id: int,
                    then: Callable[[BackendError | None], None]) -> None:
        self.log.append(f"floor {checkpoint_id}")
        self._answer(lambda: then(self.floor_error))


def commit(port: RecordingPort, stored_floor: int = 0) -> list[CommitOutcome]:
    out: list[CommitOutcome] = []
    perform(CommitPoint(7, {"tasks": {}}, {"job_id": "j", "epoch": 2}, stored_floor),
            port, out.append)
    port.run()
    return out


@pytest.mark.parametrize("deferred", [False, True])
def test_a_commit_point_is_fenced_created_fenced_again_then_floored(deferred: bool) -> None:
    port = RecordingPort(deferred=deferred)
    assert commit(port) == [CommitOutcome(CommitStatus.CREATED)]
    assert port.log == ["fence BEFORE", "create 7", "fence AFTER", "floor 7"]
    assert port.created == {"tasks": {}, "run": {"job_id": "j", "epoch": 2}}  # stamped


def test_the_step_list_is_the_order() -> None:
    steps = CommitPoint(7, {}, None, 0).steps()
    assert steps == [CheckFence(FenceMoment.BEFORE), CreateCommitPoint({}),
                     CheckFence(FenceMoment.AFTER), StoreFloor()]
    assert StoreFloor() not in CommitPoint(7, {}, None, 7).steps()  # stored already


def test_a_fenced_tm_writes_nothing() -> None:
    port = RecordingPort(fenced=frozenset({FenceMoment.BEFORE}))
    assert commit(port) == [CommitOutcome(CommitStatus.FENCED)]
    assert port.log == ["fence BEFORE"]


def test_a_tm_deposed_during_the_write_announces_nothing() -> None:
    port = RecordingPort(fenced=frozenset({FenceMoment.AFTER}))
    assert [o.status for o in commit(port)] == [CommitStatus.FENCED]
    assert "floor 7" not in port.log


def test_a_failed_write_checks_the_lease_alone_and_stores_no_floor() -> None:
    error = BackendTimeoutError("no answer")
    port = RecordingPort(create_error=error)
    [outcome] = commit(port)
    assert outcome.status == CommitStatus.FAILED and outcome.timed_out
    assert port.log == ["fence BEFORE", "create 7", "fence AFTER_FAILURE"]


def test_a_floor_that_is_not_stored_holds_the_checkpoint() -> None:
    port = RecordingPort(floor_error=BackendError("EIO"))
    assert [o.status for o in commit(port)] == [CommitStatus.FLOOR_NOT_STORED]
