"""A snapshot belongs to the generation of its barrier (issue 23, hole 6).

A task's upload runs on its snapshot thread and may finish after a rollback switched the
worker to a new generation. It must still write and report under the generation its
barrier belonged to: the worker process (and so its fencing token) is the same, so a write
under the new generation's name is the very key the new generation's task writes for the
same checkpoint id, and a late stale write would replace it (a mixed cut)."""

from __future__ import annotations

from jstormpy import Bolt
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector
from tests.fake_task_host import FakeTaskHost, Write


class Holder(Bolt):
    outputs = ("k",)


def executor(host: FakeTaskHost) -> TaskExecutor:
    comp = Holder()
    comp.state("counts").update({"a": 1})
    coll = OutputCollector(1, "holder", {"default": []}, [], lambda d, i: None)
    return TaskExecutor(1, "holder", "bolt", comp, coll, host)  # type: ignore[arg-type]


def test_a_late_upload_writes_under_its_barriers_generation_not_the_new_one() -> None:
    host = FakeTaskHost(generation=1, blocking=True)
    ex = executor(host)
    ex._take_snapshot(5, 0.0, emit_barrier=False)  # barrier of generation 1
    ex.stop()  # a rollback stops the task ...
    host.generation = 2  # ... and the worker moves to generation 2 while it uploads
    host.release.set()
    assert ex.snapshotter is not None and ex.snapshotter.wait_idle(10)
    assert host.writes == [Write(5, 1, 1)]
    assert host.acks == []  # and the void checkpoint is not acked


def test_an_ack_carries_its_barriers_generation() -> None:
    host = FakeTaskHost(generation=3, blocking=True)
    ex = executor(host)
    ex._take_snapshot(7, 0.0, emit_barrier=False)
    host.generation = 4  # e.g. a partial prepare bumped the worker's generation meanwhile
    host.release.set()
    assert host.acked.wait(10)
    assert [a.generation for a in host.acks] == [3]


def test_a_failed_upload_reports_its_barriers_generation() -> None:
    host = FakeTaskHost(generation=3, blocking=True)
    ex = executor(host)

    def broken(*args, **kwargs):
        host.generation = 4
        raise OSError("disk full")

    host.write_snapshot = broken  # type: ignore[method-assign]
    ex._take_snapshot(7, 0.0, emit_barrier=False)
    assert ex.snapshotter is not None and ex.snapshotter.wait_idle(10)
    assert [(f.checkpoint_id, f.generation) for f in host.failures] == [(7, 3)]
