"""Retention performed by its one driver (master/retention_steps.py), on a real
``file://`` backend: what ``MasterCore`` and the simulator's TM both run when a
checkpoint completes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from jstormpy.api.errors import BackendError
from jstormpy.master.coordinator import CheckpointCoordinator, TaskAck
from jstormpy.master.retention_steps import perform
from jstormpy.state_backends.file import FileBackend


class Port:
    def __init__(self, backend: FileBackend, fail: bool = False) -> None:
        self.backend, self.fail = backend, fail
        self.asked: tuple[int, frozenset[int], int] | None = None

    def locked(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def garbage_collect(self, keep: int, bad: Collection[int], upto: int,
                        then: Callable[[Sequence[int] | None, BaseException | None],
                                       None]) -> None:
        self.asked = (keep, frozenset(bad), upto)
        if self.fail:
            then(None, BackendError("EIO"))
            return
        then(self.backend.garbage_collect(keep, bad, upto), None)


def completed(tmp_path: Path, ids: list[int]) -> tuple[FileBackend, CheckpointCoordinator]:
    backend = FileBackend(f"file://{tmp_path}")
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                  tolerable_timeouts=1)
    coord.set_layout({1: "spout"}, spout_tasks=[1], sink_tasks=[])
    coord.new_generation(1)
    coord.ids_record_stored(coord.ids_record())
    coord.resume_after(0, now=0.0)
    for n in ids:
        cid, _ = coord.start(now=float(n), wall=float(n))
        assert cid == n
        backend.put_snapshot(cid, 1, b"state")
        coord.ack(1, cid, TaskAck(1, f"h{cid}", 5, False, 0.0), float(n), float(n))
        backend.create_metadata(cid, {"tasks": {"1": {"handle": f"h{cid}"}}})
        coord.commit_point_written(cid, running=True, now=float(n), wall=float(n))
    return backend, coord


def retained(coord: CheckpointCoordinator) -> list[int]:
    return [e["id"] for e in coord.history if e.get("retained")]


def test_retention_keeps_the_newest_and_the_tm_stops_offering_what_it_deleted(
        tmp_path: Path) -> None:
    backend, coord = completed(tmp_path, [1, 2, 3])
    coord.mark_bad(3)  # e.g. its snapshot turned out corrupt: never among the newest
    port = Port(backend)
    perform(coord, 1, port)
    assert port.asked == (1, frozenset({3}), 3)
    assert backend.list_completed() == [2, 3]  # 2 is the newest usable one
    assert retained(coord) == [2, 3]


def test_a_failed_collection_forgets_nothing(tmp_path: Path) -> None:
    backend, coord = completed(tmp_path, [1, 2, 3])
    perform(coord, 1, Port(backend, fail=True))
    assert backend.list_completed() == [1, 2, 3]
    assert retained(coord) == [1, 2, 3]
