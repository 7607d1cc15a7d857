"""A frame of a stopped generation never reaches the new generation's task queue (issue
23, hole 8): the receiving thread checked the frame's generation against the worker's,
then looked the queue up; a Prepare between the two (the thread preempted there) handed
the old frame to the new task. The check and the lookup now read one generation-tagged
set of queues."""

from __future__ import annotations

from typing import Any

from jstormpy.runtime.credits import TaskInbox
from jstormpy.runtime.worker import Worker


def test_a_frame_checked_before_a_prepare_is_not_delivered_after_it() -> None:
    worker = Worker("127.0.0.1:9", 0, b"secret")  # never connects in this test
    try:
        old = TaskInbox(10)
        new = TaskInbox(10)
        worker.stop_tasks(new_generation=1)
        worker.prepare_inboxes(1)
        worker.add_inbox(7, old)

        class PreparedMeanwhile(dict):
            """The old generation's queues, whose lookup runs when a Prepare for
            generation 2 has just replaced them (the receiving thread was preempted)."""

            def get(self, key: Any, default: Any = None) -> Any:
                worker.stop_tasks(new_generation=2)
                worker.prepare_inboxes(2)
                worker.add_inbox(7, new)
                return dict.get(self, key, default)

        worker.inboxes = worker.inboxes.__class__(1, PreparedMeanwhile(worker.inboxes.queues))
        worker._deliver(7, ("data", "of generation 1"), 1)
        assert new.empty(), "a frame of generation 1 reached generation 2's task"
        worker._deliver(7, ("data", "of generation 2"), 2)
        assert not new.empty()
    finally:
        worker.channel.close()
