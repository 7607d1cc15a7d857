"""Production's worker answers Prepare through the one order (runtime/prepare_steps.py).

A real ``Worker`` with a real transport and a file state backend, its topology set as
``fetch_topology`` sets it; ``prepare`` is called as the control thread calls it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jstormpy import Config, TopologyBuilder, pickling
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.runtime.transport import Transport
from jstormpy.runtime.worker import Worker
from jstormpy.state_backends import open_backend
from tests.integration.components import NumberSpout, PassThrough


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    b = TopologyBuilder("prepare")
    b.set_spout("numbers", NumberSpout(n=10), parallelism=1)
    b.set_bolt("pass", PassThrough(), parallelism=2).shuffle_grouping("numbers")
    w = Worker("127.0.0.1:9", 1, b"secret")  # never connects to a TM in this test
    w.topology = b.build()
    w.config = Config(state_backend=f"file://{tmp_path / 'state'}")
    w.component_blobs = {s.name: pickling.dumps(s.obj) for s in w.topology.components.values()}
    w.backend = open_backend(w.config.state_backend)
    w.transport = Transport(1, b"secret", lambda *a: None)
    w.transport.start()
    try:
        yield w
    finally:
        w.stop_tasks()
        w.transport.close()
        w.channel.close()


def _prepare(generation: int, restores: dict[int, str]) -> pb.Prepare:
    return pb.Prepare(generation=generation, checkpoint_id=3, task_ids=[1, 2, 3],
                      restores=[pb.TaskRestore(task_id=t, handle=h) for t, h in restores.items()],
                      task_workers={1: 1, 2: 1, 3: 1}, restored_checkpoint_id=3)


def test_a_snapshot_that_cannot_be_read_answers_ready_false_naming_its_task(
        worker: Worker) -> None:
    ready = worker.prepare(_prepare(1, {2: "snapshots/3/task-2-missing"}))
    assert ready is not None and not ready.ok
    assert ready.failed_task == 2 and ready.error.startswith("SnapshotNotFoundError: ")
    assert worker.executors == {}, "a task was built although a snapshot read failed"


def test_a_prepare_of_an_older_generation_is_not_answered(worker: Worker) -> None:
    ready = worker.prepare(_prepare(4, {}))
    assert ready is not None and ready.ok and sorted(worker.executors) == [1, 2, 3]
    built = dict(worker.executors)
    assert worker.prepare(_prepare(3, {})) is None
    assert worker.executors == built and worker.generation == 4
