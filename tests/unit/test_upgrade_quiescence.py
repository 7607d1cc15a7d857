"""Gray release quiescence of bolts that act on their own (issue 13 hole 4).

During an upgrade the spouts stop right after the quiescent barrier; a bolt with
``tick_interval_ms`` (window idle timeouts, early fire, processing-time windows) used to
keep emitting after it: output either lost (upstream of an upgraded worker) or duplicated
(downstream). Real executor threads: the bolt must not tick between the quiescent barrier
and the resume, and must tick again after it.
"""

from __future__ import annotations

import time
from typing import Any

from jstormpy import Bolt, Spout
from jstormpy.api.component import bind_task
from jstormpy.runtime.credits import TaskInbox
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import MessageKind, OutputCollector, Route
from jstormpy.runtime.task_host import TaskCommand
from tests.fake_task_host import FakeTaskHost


class Ticker(Bolt):
    """Emits one tuple per processing-time tick (like an early-firing window)."""

    outputs = ("n",)
    tick_interval_ms = 5

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.ticks = 0

    def on_tick(self, now_ms: float) -> None:
        self.ticks += 1
        self.emit((self.ticks,))


class Source(Spout):
    outputs = ("n",)


def wait_until(pred: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)  # polling interval of a condition


def test_a_ticking_bolt_is_quiescent_from_the_upgrade_barrier_until_resume() -> None:
    # spout task 1 -> bolt task 2 -> sink channel 9 (recorded)
    host = FakeTaskHost()
    out: list[tuple[int, Any]] = []
    inbox = TaskInbox(100)
    spout_coll = OutputCollector(1, "src", {"default": []}, [2],
                                 lambda dst, item: inbox.put(item))
    spout = Source()
    bind_task(spout, spout_coll, None)
    spout_ex = TaskExecutor(1, "src", "spout", spout, spout_coll, host)  # type: ignore[arg-type]
    def record(dst: int, item: Any) -> None:
        out.append((item[1], item[3]))

    route = Route("shuffle", "default", "sink", [9], 2, record, batch_size=1)
    coll = OutputCollector(2, "ticker", {"default": [route]}, [9], record)
    bolt = Ticker()
    bind_task(bolt, coll, None)
    bolt.prepare({}, None)
    ex = TaskExecutor(2, "ticker", "bolt", bolt, coll, host,  # type: ignore[arg-type]
                      inq=inbox, input_channels=(1,))
    ex.start()
    try:
        wait_until(lambda: bolt.ticks >= 3)
        # what the worker does with TriggerCheckpoint(pause=True): the spout sends the
        # quiescent barrier and stops
        spout_ex.command(TaskCommand.TRIGGER_PAUSE, 1)
        spout_ex._process_ctrl()
        wait_until(lambda: any(kind == MessageKind.BARRIER for kind, _ in out))
        at_barrier = bolt.ticks
        # the worker waits for the checkpoint to complete, restarts the upgraded workers...
        wait_until(lambda: 1 in [a.checkpoint_id for a in host.acks])
        idle_until = time.monotonic() + 0.2  # 40 tick intervals
        while time.monotonic() < idle_until:
            time.sleep(0.01)  # the length of the upgrade pause itself
        before = [k for k, _ in out[:[k for k, _ in out].index(MessageKind.BARRIER)]]
        after = [v for kind, v in out[[k for k, _ in out].index(MessageKind.BARRIER) + 1:]]
        assert MessageKind.DATA in before  # ticks before the barrier do reach the channel
        assert bolt.ticks == at_barrier and after == [], \
            f"ticked {bolt.ticks - at_barrier} times after the quiescent barrier"
        ex.command(TaskCommand.RESUME, None)  # ResumeSpouts reaches every task
        wait_until(lambda: bolt.ticks >= at_barrier + 3)
        barrier_at = [k for k, _ in out].index(MessageKind.BARRIER)
        wait_until(lambda: any(k == MessageKind.DATA for k, _ in out[barrier_at + 1:]))
    finally:
        ex.stop()
        ex.join(10)


def test_a_drop_after_an_upgrade_is_reported_again() -> None:
    """The worker reports dropped frames once per generation; an upgrade keeps the
    generation, so without a reset a real drop after it went unreported."""
    from jstormpy.proto import jstorm_pb2 as pb
    from jstormpy.runtime.worker import Worker

    worker = Worker("127.0.0.1:9", 0, b"secret")  # never connects in this test
    try:
        worker.generation = worker.tasks_generation = 3

        def reports() -> list[str]:
            out = []
            while not worker.outbox.empty():
                msg = worker.outbox.get_nowait()
                if msg.WhichOneof("body") == "task_error":
                    out.append(msg.task_error.message)
            return out

        worker._frames_lost(1)  # during the upgrade pause: the batch worker restarts
        worker._frames_lost(1)
        assert len(reports()) == 1
        worker._dispatch(pb.MasterMessage(resume=pb.ResumeSpouts(generation=3)))
        worker._frames_lost(2)  # a real loss after the upgrade
        assert [m for m in reports() if "worker 2" in m], "drop after the upgrade not reported"
    finally:
        worker.channel.close()
