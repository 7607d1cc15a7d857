"""Hole 3 of issue 13: the final checkpoint must follow the spout's end-of-stream.

A checkpoint trigger that reaches a spout task between its last emit and its end of
stream used to put barrier n *before* END_OF_STREAM on the channel while the ack said
"finished": the TM took n as the final checkpoint, and whatever end of input causes
downstream (``on_inputs_finished`` output, windows firing at watermark +inf) landed in
transaction n+1, which never commits. These tests run a real spout executor thread.
"""

from __future__ import annotations

from typing import Any

from jstormpy import Spout
from jstormpy.api.component import bind_task
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import MessageKind, OutputCollector
from jstormpy.runtime.task_host import TaskCommand
from tests.fake_task_host import FakeTaskHost


class LastEmitThenTrigger(Spout):
    """Emits one tuple, finishes, and (standing in for the TM's trigger arriving at that
    very moment) queues checkpoint 1 on its own executor before returning."""

    outputs = ("x",)
    executor: TaskExecutor | None = None

    def next_tuple(self) -> None:
        if self.finished:
            return
        self.emit((1,))
        self.finish()
        assert self.executor is not None
        self.executor.command(TaskCommand.TRIGGER, 1)


def test_a_trigger_racing_the_last_emit_is_not_taken_as_the_final_checkpoint() -> None:
    sent: list[tuple[int, Any]] = []
    host = FakeTaskHost()
    coll = OutputCollector(1, "spout", {"default": []}, [7],
                           lambda dst, item: sent.append((item[1], item[3])))
    comp = LastEmitThenTrigger()
    bind_task(comp, coll, None)  # what the worker does when it builds a task
    ex = TaskExecutor(1, "spout", "spout", comp, coll, host)  # type: ignore[arg-type]
    comp.executor = ex
    ex.start()
    try:
        assert host.acked.wait(10), "checkpoint 1 was never acked"
    finally:
        ex.stop()
        ex.join(10)
    markers = [kind for kind, _ in sent if kind in (MessageKind.BARRIER, MessageKind.END_OF_STREAM)]
    (cid, finished), = [(a.checkpoint_id, a.finished) for a in host.acks]
    assert cid == 1
    eos_first = markers.index(MessageKind.END_OF_STREAM) < markers.index(MessageKind.BARRIER)
    # the TM drains at the first checkpoint whose spout acks say "finished": that may only
    # be said when end-of-stream went out ahead of the barrier on every channel
    assert not finished or eos_first, f"ack says finished but the channel got {markers}"
    assert finished, "end of stream was pending when the barrier went out: send it first"
