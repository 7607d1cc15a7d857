"""A command reaches an idle bolt at once, not at its inbox's next poll.

The Topology Master's ``complete(n)`` tells a sink to commit; a sink whose input is idle
(the final checkpoint of a bounded run: nothing follows its barrier) used to see the
command only when its wait on the empty inbox timed out, so every bounded run's drain
waited up to one poll for each sink's commit. Real executor threads; the poll is set to a
minute, so only a wake-up can pass these tests.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from jstormpy.api.component import Tuple, bind_task
from jstormpy.barrier.twophase import Sink
from jstormpy.runtime import executor as executor_module
from jstormpy.runtime.credits import TaskInbox
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import MessageKind, OutputCollector
from jstormpy.runtime.task_host import TaskCommand
from tests.fake_task_host import FakeTaskHost

pytestmark = pytest.mark.timeout(60)


class RecordingSink(Sink):
    """Keeps its transactions in memory; ``committed`` is set at each commit."""

    def __init__(self) -> None:
        self.staged: list[int] = []
        self.commits: list[int] = []
        self.committed = threading.Event()

    def begin(self, checkpoint_id: int) -> None:
        pass

    def write(self, tup: Tuple) -> None:
        pass

    def pre_commit(self, checkpoint_id: int) -> None:
        self.staged.append(checkpoint_id)

    def commit(self, checkpoint_id: int) -> None:
        self.commits.append(checkpoint_id)
        self.committed.set()

    def abort(self, checkpoint_id: int) -> None:
        pass


def test_an_idle_sink_commits_when_the_checkpoint_completes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "IDLE_POLL_S", 60.0)  # only a wake-up is in time
    host = FakeTaskHost()
    inbox = TaskInbox(100)
    sink = RecordingSink()
    coll = OutputCollector(2, "sink", {"default": []}, [], lambda dst, item: None)
    bind_task(sink, coll, None)
    ex = TaskExecutor(2, "sink", "bolt", sink, coll, host,  # type: ignore[arg-type]
                      is_sink=True, inq=inbox, input_channels=(1,))
    ex.start()
    try:
        inbox.put((1, MessageKind.BARRIER, "default", 1))  # the final barrier: then idle
        assert host.acked.wait(10), "the sink never acked checkpoint 1"
        ex.command(TaskCommand.COMPLETE, 1)  # what the worker does with complete(1)
        assert sink.committed.wait(10), "the idle sink did not commit before its next poll"
        assert sink.commits == [1] and host.committed == [1]
    finally:
        ex.stop()
        assert ex.join(10), "the idle bolt did not stop before its next poll"


def test_a_waiting_get_is_woken_without_an_item() -> None:
    inbox = TaskInbox(10)
    got: list[Any] = []

    def reader() -> None:
        try:
            got.append(inbox.get(60.0))
        except IndexError:
            got.append("woken")

    th = threading.Thread(target=reader)
    th.start()
    inbox.wake()
    th.join(10)
    assert got == ["woken"]
    inbox.wake()  # a wake before the wait: the next get does not wait either
    with pytest.raises(IndexError):
        inbox.get(60.0)
