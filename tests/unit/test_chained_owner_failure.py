"""A chained bolt whose own thread failed is not called again (issue 23, hole 8).

A chained bolt runs its input in its source's thread and keeps a thread of its own for
commands and ticks (runtime/executor.py, "chained mode"). When that owner thread failed,
it cleaned the component up, yet the source kept calling ``execute`` on it; and when it
failed before the task was ready (a sink's begin), the source waited for ever. Real
executor threads; the source's calls are made from a thread of the test.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import pytest

from jstormpy import Bolt
from jstormpy.runtime.executor import TaskExecutor, TaskStopped
from jstormpy.runtime.routing import MessageKind, OutputCollector
from tests.fake_task_host import FakeTaskHost


class Fragile(Bolt):
    """Its tick raises once a tuple went through (a user error on the owner thread);
    counts the calls it gets after its cleanup."""

    outputs = ("n",)
    tick_interval_ms: ClassVar[float | None] = 5

    def __init__(self, fail_begin: bool = False) -> None:
        self.executed: list[Any] = []
        self.after_cleanup = 0
        self.cleaned = threading.Event()
        self.fail_begin = fail_begin

    def execute(self, tup: Any) -> None:
        if self.cleaned.is_set():
            self.after_cleanup += 1
        self.executed.append(tuple(tup.values))

    def on_tick(self, now_ms: float) -> None:
        if self.executed:  # the first tuple went through: the next tick breaks
            raise RuntimeError("tick broke")

    def begin(self, checkpoint_id: int) -> None:  # a sink's first transaction
        if self.fail_begin:
            raise RuntimeError("cannot open the first transaction")

    def cleanup(self) -> None:
        self.cleaned.set()


class Untimed(Fragile):
    tick_interval_ms = None


def chained(bolt: Fragile, host: FakeTaskHost, is_sink: bool = False) -> TaskExecutor:
    coll = OutputCollector(2, "fragile", {"default": []}, [], lambda dst, item: None)
    bolt.__dict__["_jstorm_collector"] = coll
    ex = TaskExecutor(2, "fragile", "bolt", bolt, coll, host,  # type: ignore[arg-type]
                      input_channels=(1,), is_sink=is_sink,
                      source_index={(1, "default"): ("src", {"n": 0})})
    ex.chained = True
    ex.start()
    return ex


def call_from_source(ex: TaskExecutor, values: tuple[Any, ...]) -> str:
    """What the source's thread does for one batch; returns how the call ended."""
    out: list[str] = []

    def run() -> None:
        try:
            ex.run_chained((1, int(MessageKind.DATA), "default", [values]))
            out.append("executed")
        except TaskStopped:
            out.append("stopped")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    return out[0] if out else "hung"


def test_the_source_stops_calling_a_chained_bolt_whose_thread_failed() -> None:
    host = FakeTaskHost(errors_fail=False)
    bolt = Fragile()
    ex = chained(bolt, host)
    try:
        assert call_from_source(ex, (1,)) == "executed"
        assert bolt.cleaned.wait(10), "the failing tick never ended the owner thread"
        assert host.errors and "tick broke" in str(host.errors[0][0])
        assert call_from_source(ex, (2,)) == "stopped"
        assert bolt.after_cleanup == 0 and bolt.executed == [(1,)]
    finally:
        ex.stop()
        ex.join(10)


def test_the_source_does_not_wait_for_ever_on_a_chained_sink_that_failed_to_begin() -> None:
    host = FakeTaskHost(errors_fail=False)
    bolt = Untimed(fail_begin=True)
    ex = chained(bolt, host, is_sink=True)
    try:
        assert bolt.cleaned.wait(10), "the failing begin never ended the owner thread"
        started = time.monotonic()
        assert call_from_source(ex, (1,)) == "stopped"
        assert time.monotonic() - started < 5
        assert bolt.executed == []
    finally:
        ex.stop()
        ex.join(10)


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Any:
    yield
    deadline = time.monotonic() + 5
    while any(t.name.startswith("task-2-") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "a task thread outlived its test"
        time.sleep(0.01)  # polling interval of a condition
