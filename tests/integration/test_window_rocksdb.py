"""Windows kept in the RocksDB state store (docs/state-stores.md, window/stored.py), with
real processes: the README's sensor-window job under a worker SIGKILL, and rescaled 2 -> 3,
each with every window's on_time result committed exactly once and the last result of each
window equal to a batch recomputation (``sensor_windows.verify``).

Every wait polls a condition with a deadline; no sleep stands in for one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder
from jstormpy.state_store import rocksdict_module
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos
from jstormpy.window.stored import WINDOW_STATE
from tests.integration.helpers import committed_count, wait_until
from tests.integration.paced_spout import release

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import sensor_windows  # noqa: E402

pytestmark = pytest.mark.slow


def rocks_config(stores: Path, **changes: object) -> Config:
    base: dict[str, object] = {"workers": 2, "guarantee": "exactly_once",
                               "checkpoint_interval_ms": 300, "state_store": "rocksdb",
                               "state_store_dir": str(stores)}
    base.update(changes)
    return Config(**base)  # type: ignore[arg-type]


def window_families(stores: Path) -> list[Path]:
    """The task databases holding the window state's column family."""
    rd = rocksdict_module()
    return [p.parent for p in sorted(stores.glob("worker-*/task-*/CURRENT"))
            if f"s:{WINDOW_STATE}" in rd.Rdict.list_cf(str(p.parent))]


@pytest.mark.parametrize("incremental", [False, True], ids=["whole", "shared-sst"])
def test_rocksdb_windows_exactly_once_under_worker_sigkill(tmp_path: Path,
                                                           incremental: bool) -> None:
    """shared-sst: the windows are checkpointed as the database's SST files and the
    recovery opens the downloaded checkpoint as it is."""
    out, stores = tmp_path / "out", tmp_path / "stores"
    schedule = ChaosSchedule(31, (Kill("worker", at_s=0.8, worker=1),))
    config = rocks_config(stores, incremental_checkpoints=incremental,
                          state_backend=f"file://{tmp_path / 'ckpt'}")
    status, kills, _ = run_with_chaos(sensor_windows.build(out), config,
                                      schedule, timeout=180, home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert any(k.startswith("SIGKILL") for k in kills), kills
    assert window_families(stores), "the windows were not kept in RocksDB"
    assert bool(list((tmp_path / "ckpt").rglob("sst-*.sst"))) == incremental
    assert sensor_windows.verify(out=out)


class ReleasableReadings(sensor_windows.Readings):
    """Readings at ``rate_per_call`` until ``release_file`` exists, then 40 a call (the
    example's own rate): the test releases them once its rescale is over, rather than
    waiting out the rest of the slowed input (tests/integration/paced_spout.py)."""

    def __init__(self, release_file: Path, rate_per_call: int) -> None:
        super().__init__(rate_per_call=rate_per_call)
        self.release_file = str(release_file)

    def next_tuple(self) -> None:
        if self.rate_per_call < RELEASED_PER_CALL and os.path.exists(self.release_file):
            self.rate_per_call = RELEASED_PER_CALL
        super().next_tuple()


RELEASED_PER_CALL = 40


def slow_sensor_job(out: Path, release_file: Path):
    """sensor_windows at a quarter of the rate (about 24 s), so a rescale lands mid-run,
    until the test releases it."""
    b = TopologyBuilder("sensor-windows-rescale")
    b.set_spout("readings", ReleasableReadings(release_file, rate_per_call=10), parallelism=1)
    b.set_bolt("avg", sensor_windows.AvgTemp, parallelism=2).fields_grouping(
        "readings", ["sensor"])
    b.set_bolt("windows", FileSink(str(out / "windows")), parallelism=1).global_grouping("avg")
    b.set_bolt("late", FileSink(str(out / "late")), parallelism=1).global_grouping(
        "avg", stream="late")
    return b.build()


def test_rocksdb_windows_rescale_two_to_three(tmp_path: Path) -> None:
    out, stores = tmp_path / "out", tmp_path / "stores"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(slow_sensor_job(out, tmp_path / "go"), rocks_config(stores))
        wait_until(lambda: committed_count(out / "windows") > 50, 90,
                   "some committed window results")
        up = handle.rescale({"avg": 3})
        assert up["error"] == ""
        avg = [c for c in handle.status()["components"] if c["name"] == "avg"][0]
        assert len(avg["tasks"]) == 3
        before = committed_count(out / "windows")
        wait_until(lambda: committed_count(out / "windows") > before + 50, 90,
                   "output after the rescale")
        release(tmp_path / "go")  # the scenario is over: the rest at the example's rate
        handle.wait(timeout=180)
    assert len(window_families(stores)) >= 3, "the new tasks' windows are not in RocksDB"
    assert sensor_windows.verify(out=out)
