"""The RocksDB state store with real processes (docs/state-stores.md): a keyed running-sum
job keeps exactly-once per key through a worker SIGKILL, savepoints move its state from the
memory store into RocksDB and back, and a rescale 2 -> 3 re-partitions it.

Every wait polls a condition with a deadline; no sleep stands in for one.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster
from jstormpy.operations.savepoints import read_manifest
from tests.chaos.topologies import check_keyed_sums
from tests.integration.helpers import committed_count, wait_until
from tests.integration.paced_spout import release
from tests.integration.savepoint_components import linear

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 12, 1500


def rocks_config(stores: Path, **changes: object) -> Config:
    base: dict[str, object] = {"workers": 2, "checkpoint_interval_ms": 300,
                               "worker_timeout_ms": 5000, "state_store": "rocksdb",
                               "state_store_dir": str(stores)}
    base.update(changes)
    return Config(**base)  # type: ignore[arg-type]


def task_databases(stores: Path) -> list[Path]:
    """The RocksDB databases the workers opened (a ``CURRENT`` file marks one)."""
    return sorted(p.parent for p in stores.glob("worker-*/task-*/CURRENT"))


def test_worker_sigkill_keeps_every_key_exactly_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=1500,
                                       release_file=tmp_path / "go"),
                                Config(workers=2, checkpoint_interval_ms=300,
                                       worker_timeout_ms=5000, state_store="rocksdb"))
        assert handle.run_dir is not None
        stores = handle.run_dir / "state-store"  # the default state_store_dir
        wait_until(lambda: committed_count(out) > 2000, 60, "some committed output")
        assert task_databases(stores), sorted(map(str, stores.rglob("*")))
        gen = handle.status()["generation"]
        victim = handle.workers()[0]
        os.kill(victim.pid, signal.SIGKILL)
        wait_until(lambda: handle.status()["generation"] > gen, 60, "the recovery")
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the kill mattered"
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    # the barriers took native RocksDB checkpoints beside the databases, and every one was
    # released once its snapshot was written
    frozen = sorted(stores.glob("worker-*/task-*.frozen"))
    assert frozen and not [p for d in frozen for p in d.iterdir()]
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


@pytest.mark.parametrize("incremental", [False, True], ids=["whole", "shared-sst"])
def test_savepoints_move_state_memory_to_rocksdb_and_back(tmp_path: Path,
                                                          incremental: bool) -> None:
    """With incremental checkpoints the RocksDB run's savepoint reads its entries out of
    the checkpoint's SST files: self-contained, restored into the memory store."""
    out, stores = tmp_path / "out", tmp_path / "stores"
    memory = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=1500), memory)
        wait_until(lambda: committed_count(out) > 2000, 60, "output of the memory run")
        first = handle.savepoint(f"file://{tmp_path / 'sp1'}", stop=True)
    after_memory = committed_count(out)
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=1500),
                                rocks_config(stores, incremental_checkpoints=incremental,
                                             state_backend=f"file://{tmp_path / 'ckpt'}"),
                                from_savepoint=first)
        wait_until(lambda: committed_count(out) > after_memory + 2000, 60,
                   "output of the RocksDB run")
        second = handle.savepoint(f"file://{tmp_path / 'sp2'}", stop=True)
    assert task_databases(stores)
    assert read_manifest(second)["components"]["sum"]["parallelism"] == 2
    assert not list((tmp_path / "sp2").rglob("*.sst")), "a savepoint references no SST file"
    assert bool(list((tmp_path / "ckpt").rglob("sst-*.sst"))) == incremental
    after_rocks = committed_count(out)
    assert after_rocks < KEYS * PER_KEY, "the RocksDB run ended before its savepoint"
    with LocalCluster(home=tmp_path / "home") as cluster:
        # restored, the rest at full speed: nothing more happens to this run
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=None), memory,
                                from_savepoint=second)
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


@pytest.mark.parametrize("incremental", [False, True], ids=["whole", "shared-sst"])
def test_rescale_two_to_three_to_one_with_rocksdb_state(tmp_path: Path,
                                                        incremental: bool) -> None:
    """With incremental checkpoints the rescale reads the tasks' entries out of their SST
    files and splits them by key group into the new tasks' fresh databases."""
    out, stores = tmp_path / "out", tmp_path / "stores"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=800,
                                       release_file=tmp_path / "go"),
                                rocks_config(stores, incremental_checkpoints=incremental,
                                             state_backend=f"file://{tmp_path / 'ckpt'}"))
        wait_until(lambda: committed_count(out) > 2000, 60, "some committed output")
        up = handle.rescale({"sum": 3})
        assert up["error"] == ""
        sums = [c for c in handle.status()["components"] if c["name"] == "sum"][0]
        assert len(sums["tasks"]) == 3
        # every task of "sum" (3 after the rescale) has its own database
        assert {p.name for p in task_databases(stores)} >= {f"task-{t}" for t in sums["tasks"]}
        before = committed_count(out)
        wait_until(lambda: committed_count(out) > before + 1500, 60, "output after the rescale up")
        down = handle.rescale({"sum": 1})
        assert down["error"] == ""
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the rescale down"
        # the one "sum" task has the only database: the others were deleted when the
        # workers were rebuilt for the new layout
        sums = [c for c in handle.status()["components"] if c["name"] == "sum"][0]
        held = [p for p in stores.glob("worker-*/task-*") if not p.name.endswith(".frozen")]
        assert [p.name for p in held] == [f"task-{sums['tasks'][0]}"], held
        for w in handle.workers():
            assert {p.name for p in stores.glob(f"worker-{w.id}/task-*")} <= \
                {f"task-{t}{x}" for t in w.tasks for x in ("", ".frozen")}
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
    # the shared-sst variant's checkpoints were SST files (retention keeps the newest)
    assert bool(list((tmp_path / "ckpt").rglob("sst-*.sst"))) == incremental


@pytest.mark.parametrize("budget_mb, cache_bytes", [(96, 80 << 20), (None, 32 << 20)])
def test_a_workers_tasks_share_one_cache_sized_from_the_budget(
        tmp_path: Path, budget_mb: int | None, cache_bytes: int) -> None:
    """``Config.rocksdb_memory_mb`` reaches the worker: both task databases on the one
    worker run with the budget's whole cache (5/6 of it: 80 MB of 96), not a share of it
    each nor the 32 MB of a store on its own (that they share the one cache:
    tests/unit/test_rocksdb_memory.py); without a budget (the default) each has its own
    32 MB cache."""
    out, stores = tmp_path / "out", tmp_path / "stores"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=1500,
                                       release_file=tmp_path / "go"),
                                rocks_config(stores, workers=1, rocksdb_memory_mb=budget_mb))
        wait_until(lambda: committed_count(out) > 2000, 60, "some committed output")

        def figures() -> dict[str, dict[str, float]]:
            tasks = handle.metrics("sum").get("tasks", {})
            return {tid: v.get("store") or {} for tid, v in tasks.items()}

        wait_until(lambda: len(figures()) == 2 and all(
            f.get("block_cache_capacity_bytes") for f in figures().values()), 60,
                   "both tasks' RocksDB figures")
        assert [f["block_cache_capacity_bytes"] for f in figures().values()] == [cache_bytes] * 2
        release(tmp_path / "go")  # the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
