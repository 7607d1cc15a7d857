"""The ids record stored outside a recovery by its one driver
(master/ids_record_steps.py), on a real ``file://`` backend: the tick's reservation and
the store after a bad checkpoint, which ``MasterCore`` and the simulator's TM both run."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jstormpy.api.errors import BackendError
from jstormpy.master.coordinator import ID_RESERVATION, CheckpointCoordinator
from jstormpy.master.ids_record_steps import RESERVATION, IdsRecordStores
from jstormpy.state_backends.base import CHECKPOINT_IDS_META
from jstormpy.state_backends.file import FileBackend


class Port:
    """The BackendIO thread as a queue the test runs by hand."""

    def __init__(self, backend: FileBackend, fail: bool = False) -> None:
        self.backend, self.fail = backend, fail
        self.queued: list[Callable[[], None]] = []
        self.failures: list[str] = []

    def locked(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def on_storage(self, step: Callable[[], None]) -> None:
        self.queued.append(step)

    def run_queued(self) -> None:
        steps, self.queued = self.queued, []
        for step in steps:
            step()

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        if self.fail:
            then(BackendError("EIO"))
            return
        self.backend.put_meta(CHECKPOINT_IDS_META, ids)
        then(None)

    def not_stored(self, why: str, error: BaseException) -> None:
        self.failures.append(why)


def running(coord: CheckpointCoordinator) -> None:
    coord.set_layout({1: "spout"}, spout_tasks=[1], sink_tasks=[])
    coord.new_generation(1)
    coord.resume_after(0, now=0.0)


def stored(backend: FileBackend) -> dict[str, Any] | None:
    raw = backend.get_meta(CHECKPOINT_IDS_META)
    return None if raw is None else json.loads(raw)


def test_the_tick_reserves_ids_once_at_a_time_and_only_while_running(tmp_path: Path) -> None:
    backend = FileBackend(f"file://{tmp_path}")
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                  tolerable_timeouts=1)
    running(coord)
    port = Port(backend)
    stores = IdsRecordStores(coord, port)
    assert not coord.may_start()  # nothing reserved yet: no checkpoint may start
    assert not stores.tick(running=False)
    assert stores.tick(running=True)
    assert not stores.tick(running=True)  # one store at a time
    assert stored(backend) is None  # not written under the tick: on the storage thread
    port.run_queued()
    record = stored(backend)
    assert record is not None and record["reserved"] == ID_RESERVATION
    assert coord.ids_reserved == ID_RESERVATION and coord.may_start()
    assert not stores.reserving
    assert not stores.tick(running=True)  # half the reservation is not used yet


def test_the_reservation_written_is_read_at_the_write_so_a_bad_mark_since_the_tick_is_kept(
        tmp_path: Path) -> None:
    backend = FileBackend(f"file://{tmp_path}")
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                  tolerable_timeouts=1)
    running(coord)
    port = Port(backend)
    stores = IdsRecordStores(coord, port)
    assert stores.tick(running=True)
    coord.mark_bad(7)  # e.g. a failed commit point, between the tick and its write
    port.run_queued()
    record = stored(backend)
    assert record is not None and record["bad"] == [7]


def test_a_failed_store_reserves_nothing_and_the_next_tick_tries_again(tmp_path: Path) -> None:
    backend = FileBackend(f"file://{tmp_path}")
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                  tolerable_timeouts=1)
    running(coord)
    port = Port(backend, fail=True)
    stores = IdsRecordStores(coord, port)
    assert stores.tick(running=True)
    port.run_queued()
    assert port.failures == [RESERVATION]
    assert coord.ids_reserved == 0 and not coord.may_start()
    port.fail = False
    assert stores.tick(running=True)
    port.run_queued()
    assert coord.may_start()


def test_a_bad_checkpoint_stored_at_once_is_never_restored_by_a_resumed_tm(
        tmp_path: Path) -> None:
    backend = FileBackend(f"file://{tmp_path}")
    coord = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                  tolerable_timeouts=1)
    running(coord)
    port = Port(backend)
    stores = IdsRecordStores(coord, port)
    coord.mark_bad(3)
    done: list[bool] = []
    stores.store("bad checkpoint 3", lambda: done.append(True))
    assert done == [True] and port.queued == []  # stored at once, where it was called
    successor = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                                      tolerable_timeouts=1)
    raw = backend.get_meta(CHECKPOINT_IDS_META)
    assert raw is not None
    successor.adopt_ids_record(raw)
    assert 3 in successor.bad
    assert successor.id_floor >= ID_RESERVATION  # above every id the first TM may hand out
