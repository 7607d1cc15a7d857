"""The simulator's filesystem faults, as the real ``file://`` backend meets them.

``jstorm simulate`` stores checkpoints with the real :class:`FileBackend` on a simulated
filesystem (issue 37); these are the failures a real disk shows that the backend must
report, and that the simulated one injects.
"""

from __future__ import annotations

import pytest

from jstormpy.api.errors import BackendError, CorruptSnapshotError
from jstormpy.state_backends.file import FileBackend
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.filesystem import SimDisk, SimFilesystem
from jstormpy.testing.simulation.world import World

ROOT = "/ckpt"


def backends(*faults: Fault, seed: int = 1) -> tuple[FileBackend, FileBackend, FaultPlan]:
    """A backend whose calls the faults strike (every time, up to their limit), and the
    operator's view of the same disk."""
    disk, world = SimDisk(), World(seed)
    plan = FaultPlan(enabled=frozenset(faults), rate=dict.fromkeys(faults, 1.0))
    faulty = FileBackend(f"file://{ROOT}", SimFilesystem(disk, world, plan, ROOT))
    clean = FileBackend(f"file://{ROOT}", SimFilesystem(disk, world, None, ROOT))
    return faulty, clean, plan


def test_a_failed_snapshot_write_may_still_land() -> None:
    faulty, clean, _ = backends(Fault.WRITE_ERROR)
    landed = lost = 0
    for cid in range(1, 7):  # the fault strikes 6 times a run
        with pytest.raises(BackendError, match="Input/output error"):
            faulty.put_snapshot(cid, 0, b"state")
        if cid in clean.list_checkpoint_ids():
            assert clean.get_snapshot(clean.list_objects(f"chk-{cid:010d}/")[0]) == b"state"
            landed += 1
        else:
            lost += 1
    assert landed and lost  # both kinds of failure, for this seed
    assert not any(".tmp-" in k for k in clean.list_objects("chk-"))


def test_a_torn_snapshot_reads_as_corrupt_not_as_less_state() -> None:
    faulty, clean, _ = backends(Fault.PARTIAL_WRITE)
    with pytest.raises(BackendError):
        faulty.put_snapshot(3, 1, b"x" * 1000)
    [handle] = clean.list_objects("chk-0000000003/")
    with pytest.raises(CorruptSnapshotError, match="truncated"):
        clean.get_snapshot(handle)


def test_a_full_disk_fails_every_write_and_stores_nothing() -> None:
    faulty, clean, plan = backends()
    plan.disk_full = (0.0, 1.0)
    with pytest.raises(BackendError, match="No space left"):
        faulty.create_metadata(1, {"tasks": {}})
    with pytest.raises(BackendError, match="No space left"):
        faulty.put_meta("generation", b"3")
    assert clean.list_objects("") == []


def test_a_lagging_listing_misses_the_newest_checkpoints_in_both_lists() -> None:
    faulty, clean, _ = backends(Fault.LISTING_SHORT, seed=4)
    for cid in range(1, 6):
        clean.put_snapshot(cid, 0, b"s")
        clean.create_metadata(cid, {"tasks": {}})
    clean.put_snapshot(6, 0, b"in flight")
    completed = faulty.list_completed()
    present = faulty.list_checkpoint_ids()
    assert completed == list(range(1, len(completed) + 1)) and len(completed) < 5
    assert present == completed  # the same moment: the same checkpoints missing
    assert clean.list_completed() == [1, 2, 3, 4, 5]


def test_a_failing_listing_is_an_error_not_an_empty_list() -> None:
    faulty, clean, _ = backends(Fault.LISTING_ERROR)
    clean.put_snapshot(1, 0, b"s")
    with pytest.raises(BackendError, match="the listing is incomplete"):
        faulty.list_checkpoint_ids()


def test_retention_runs_on_the_simulated_disk() -> None:
    faulty, clean, _ = backends()
    for cid in range(1, 5):
        clean.put_snapshot(cid, 0, b"s")
        clean.create_metadata(cid, {"tasks": {}})
    assert faulty.garbage_collect(2) == [1, 2]
    assert clean.list_checkpoint_ids() == [3, 4]
    fs = clean.fs
    assert isinstance(fs, SimFilesystem)
    assert fs.disk.dirs["/ckpt"] == {"chk-0000000003", "chk-0000000004"}
