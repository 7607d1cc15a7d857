"""A worker's answer to Prepare, in its one order (jstormpy/runtime/prepare_steps.py).

Production's worker and the simulator's perform these steps through their ports; these
tests drive the driver with a recording port whose snapshot reads answer when the test
says so, as the simulator's storage does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from jstormpy.api.errors import (
    BackendError,
    CorruptSnapshotError,
    RestoreRefusedError,
    SinkError,
)
from jstormpy.master.restart import unrestartable_reason
from jstormpy.runtime import prepare_steps
from jstormpy.runtime.prepare_steps import PrepareOrder, Ready


class RecordingPort:
    """A worker that records what the driver asks, in order."""

    def __init__(self, generation: int = 1, sinks: Sequence[int] = ()) -> None:
        self._generation = generation
        self.calls: list[tuple[Any, ...]] = []
        self.reads: dict[int, Callable[[Any, BaseException | None], None]] = {}
        self.answers: list[Ready] = []
        self.sink_ids = list(sinks)
        self.build_error: dict[int, Exception] = {}
        self.sink_error: dict[int, Exception] = {}
        self.live = True

    @property
    def generation(self) -> int:
        return self._generation

    def stop_tasks(self, generation: int) -> None:
        self.calls.append(("stop", generation))

    def take_generation(self, generation: int) -> None:
        self._generation = generation
        self.calls.append(("take", generation))

    def read_snapshot(self, task_id: int, handle: str,
                      then: Callable[[Any, BaseException | None], None]) -> None:
        self.calls.append(("read", task_id, handle))
        self.reads[task_id] = then

    def current(self, generation: int) -> bool:
        return self.live and generation == self._generation

    def begin_build(self, tasks: Sequence[int]) -> None:
        self.calls.append(("wire", tuple(tasks)))

    def build_task(self, task_id: int, snapshot: Any) -> None:
        self.calls.append(("build", task_id, snapshot))
        if task_id in self.build_error:
            raise self.build_error[task_id]

    def built(self, tasks: Sequence[int]) -> None:
        self.calls.append(("built", tuple(tasks)))

    def sinks(self) -> Sequence[int]:
        return self.sink_ids

    def restore_sink(self, task_id: int) -> None:
        self.calls.append(("restore_sink", task_id))
        if task_id in self.sink_error:
            raise self.sink_error[task_id]

    def answerable(self, error: Exception) -> bool:
        return isinstance(error, (SinkError, BackendError, ValueError))

    def ready(self, ready: Ready) -> None:
        self.calls.append(("ready", ready.ok))
        self.answers.append(ready)

    def kinds(self) -> list[Any]:
        return [c[0] for c in self.calls]


def test_a_prepare_of_an_older_generation_is_ignored_unanswered() -> None:
    port = RecordingPort(generation=5)
    prepare_steps.perform(PrepareOrder(4, (1, 2), {1: "h1"}), port)
    assert port.calls == [] and port.answers == []


def test_the_steps_in_order_with_no_snapshot_to_read() -> None:
    port = RecordingPort(generation=1, sinks=[3])
    prepare_steps.perform(PrepareOrder(2, (3, 1)), port)
    assert port.calls == [("stop", 2), ("take", 2), ("wire", (1, 3)), ("build", 1, None), ("build", 3, None),
                          ("built", (1, 3)), ("restore_sink", 3), ("ready", True)]
    assert port.answers == [Ready(2, True)]


def test_a_partial_prepare_stops_nothing() -> None:
    port = RecordingPort(generation=2)
    prepare_steps.perform(PrepareOrder(2, (4,), partial=True), port)
    assert port.kinds() == ["take", "wire", "build", "built", "ready"]


def test_no_task_is_built_before_every_read_answered() -> None:
    port = RecordingPort(generation=1)
    prepare_steps.perform(PrepareOrder(2, (1, 2, 3), {1: "h1", 2: "h2"}), port)
    assert port.kinds() == ["stop", "take", "read", "read"]  # both reads issued at once
    port.reads[2]({"state": 2}, None)
    assert {"wire", "build"}.isdisjoint(port.kinds()), \
        "a task was built while a read was outstanding"
    port.reads[1]({"state": 1}, None)
    assert port.calls[4:] == [("wire", (1, 2, 3)), ("build", 1, {"state": 1}), ("build", 2, {"state": 2}),
                              ("build", 3, None), ("built", (1, 2, 3)), ("ready", True)]


def test_a_failed_read_answers_ready_false_naming_the_task_and_builds_nothing() -> None:
    port = RecordingPort(generation=1)
    prepare_steps.perform(PrepareOrder(2, (1, 2), {1: "h1", 2: "h2"}), port)
    port.reads[2](None, BackendError("store did not answer"))
    port.reads[1]({}, None)
    assert {"wire", "build"}.isdisjoint(port.kinds())
    [answer] = port.answers
    assert (answer.ok, answer.corrupt, answer.failed_task) == (False, False, 2)
    assert answer.error == "BackendError: store did not answer"


def test_a_corrupt_snapshot_is_flagged_corrupt() -> None:
    port = RecordingPort(generation=1)
    prepare_steps.perform(PrepareOrder(2, (1,), {1: "h1"}), port)
    port.reads[1](None, CorruptSnapshotError("checksum mismatch"))
    [answer] = port.answers
    assert (answer.ok, answer.corrupt, answer.failed_task) == (False, True, 1)


def test_a_read_failing_at_once_issues_no_further_read() -> None:
    """Production reads on its control thread: after the first failure the Prepare's
    answer is known, the other snapshots are not downloaded."""

    class FailsAtOnce(RecordingPort):
        def read_snapshot(self, task_id: int, handle: str,
                          then: Callable[[Any, BaseException | None], None]) -> None:
            super().read_snapshot(task_id, handle, then)
            then(None, BackendError("gone"))

    port = FailsAtOnce(generation=1)
    prepare_steps.perform(PrepareOrder(2, (1, 2, 3), {1: "a", 2: "b", 3: "c"}), port)
    assert [c for c in port.calls if c[0] == "read"] == [("read", 1, "a")]
    assert [a.failed_task for a in port.answers] == [1]


def test_reads_answered_after_a_newer_prepare_answer_nothing() -> None:
    port = RecordingPort(generation=1)
    prepare_steps.perform(PrepareOrder(2, (1,), {1: "h1"}), port)
    first = port.reads[1]
    prepare_steps.perform(PrepareOrder(3, (1,), {1: "h1"}), port)  # overtakes it
    first({}, None)
    assert port.answers == []
    port.reads[1]({}, None)
    assert port.answers == [Ready(3, True)]


def test_sinks_restore_after_every_task_is_built_and_before_ready() -> None:
    port = RecordingPort(generation=1, sinks=[2, 3])
    prepare_steps.perform(PrepareOrder(2, (1, 2, 3)), port)
    kinds = port.kinds()
    assert kinds.index("built") < kinds.index("restore_sink")
    assert [c for c in port.calls if c[0] == "restore_sink"] == [("restore_sink", 2),
                                                                  ("restore_sink", 3)]
    assert kinds[-1] == "ready" and kinds.count("ready") == 1


def test_a_sink_restore_failing_answers_ready_false_naming_it() -> None:
    port = RecordingPort(generation=1, sinks=[2, 3])
    port.sink_error[2] = SinkError("external system unavailable at restore")
    prepare_steps.perform(PrepareOrder(2, (1, 2, 3)), port)
    [answer] = port.answers
    assert (answer.ok, answer.corrupt, answer.failed_task) == (False, False, 2)
    assert ("restore_sink", 3) not in port.calls


def test_a_build_failing_answers_ready_false_naming_the_task() -> None:
    port = RecordingPort(generation=1, sinks=[3])
    port.build_error[2] = ValueError("bad component")
    prepare_steps.perform(PrepareOrder(2, (1, 2, 3)), port)
    [answer] = port.answers
    assert (answer.ok, answer.failed_task) == (False, 2) and "bad component" in answer.error
    assert "built" not in port.kinds() and "restore_sink" not in port.kinds()


def test_an_error_the_port_does_not_answer_with_propagates() -> None:
    port = RecordingPort(generation=1)
    port.build_error[1] = KeyError("a bug of the runtime")
    with pytest.raises(KeyError):
        prepare_steps.perform(PrepareOrder(2, (1,)), port)
    assert port.answers == []


def test_a_failure_is_reported_as_exception_type_colon_message_as_the_tm_parses_it() -> None:
    """The TM fails the topology at once on an error no restart can fix, read from the
    Ready's ``"<ExceptionType>: message"`` (master/restart.py): a sink that refuses the
    restored checkpoint must not be restarted for ever."""
    port = RecordingPort(generation=1, sinks=[2])
    port.sink_error[2] = RestoreRefusedError("the checkpoint's transaction was abandoned")
    prepare_steps.perform(PrepareOrder(2, (2,)), port)
    [answer] = port.answers
    assert answer.error == ("RestoreRefusedError: the checkpoint's transaction was "
                            "abandoned") and answer.failed_task == 2
    assert unrestartable_reason(answer.error) is not None
