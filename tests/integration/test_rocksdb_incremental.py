"""Incremental native checkpoints of the RocksDB state store with real processes
(docs/state-stores.md): a worker SIGKILL restores the task databases from shared SST
files on file://, hdfs:// (WebHDFS test server) and hbase:// (HBase Thrift test server),
keeping exactly-once per key; a garbled or deleted SST file of the newest checkpoint
makes the recovery fall back to an older checkpoint (naming the file) instead of
restoring empty state.

Every wait polls a condition with a deadline; no sleep stands in for one.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Config, LocalCluster, read_committed
from jstormpy.state_backends import open_backend
from tests.chaos.topologies import check_keyed_sums
from tests.integration.helpers import committed_count, wait_until
from tests.integration.paced_spout import release
from tests.integration.savepoint_components import linear

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 12, 1500


def incremental_config(stores: Path, backend: str, **changes: Any) -> Config:
    base: dict[str, Any] = {"workers": 2, "checkpoint_interval_ms": 300,
                            "worker_timeout_ms": 5000, "state_store": "rocksdb",
                            "state_store_dir": str(stores), "incremental_checkpoints": True,
                            "state_backend": backend}
    base.update(changes)
    return Config(**base)


def sst_files_by_snapshot(uri: str, cid: int) -> dict[str, list[str]]:
    """Checkpoint ``cid``'s task snapshot handles -> the SST keys each references."""
    backend = open_backend(uri)
    try:
        out = {}
        for entry in backend.read_metadata(cid)["tasks"].values():
            if entry["handle"]:
                snap = pickle.loads(backend.get_snapshot(entry["handle"]))
                if snap.get("rocksdb"):
                    out[entry["handle"]] = [k for _n, k, _s in snap["rocksdb"]["sst"]]
        return out
    finally:
        backend.close()


def generation_of(key: str) -> int:
    """The generation in a handle or SST key (``...-g<gen>-a...``)."""
    return int(key.split("-g", 1)[1].split("-", 1)[0])


def last_completed(handle: Any) -> int:
    last = handle.status().get("last_completed_checkpoint") or {}
    return int(last.get("id") or 0)


@pytest.mark.parametrize("kind", ["file", "hdfs", "hbase"])
def test_worker_sigkill_restores_from_shared_sst_files(tmp_path: Path, kind: str,
                                                       request: pytest.FixtureRequest) -> None:
    if kind == "file":
        uri = f"file://{tmp_path / 'ckpt'}"
    elif kind == "hdfs":
        server = request.getfixturevalue("webhdfs_server")
        uri = f"hdfs://127.0.0.1:{server.port}/jstorm/ckpt"
    else:
        server = request.getfixturevalue("hbase_server")
        uri = f"hbase://127.0.0.1:{server.port}/jstorm_ckpt"
    out, stores = tmp_path / "out", tmp_path / "stores"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=1200,
                                       release_file=tmp_path / "go"),
                                incremental_config(stores, uri))
        wait_until(lambda: committed_count(out) > 2000 and last_completed(handle) >= 3, 90,
                   "some committed output and three checkpoints")
        gen = handle.status()["generation"]
        victim = handle.workers()[0].id
        os.kill(handle.workers()[0].pid, signal.SIGKILL)
        wait_until(lambda: handle.status()["generation"] > gen, 60, "the recovery")
        # the first checkpoint after the restore references SST files uploaded before
        # the kill: the restored databases are the downloaded files, not a rebuild
        refs = wait_until(lambda: [
            (h, keys) for h, keys in sst_files_by_snapshot(uri, last_completed(handle)).items()
            if generation_of(h) > gen], 90, "a checkpoint of the new generation")
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the kill mattered"
        assert any(generation_of(k) <= gen for _h, keys in refs for k in keys), refs
        # local recovery: the restarted worker, on the same host, took its tasks' SST files
        # from its local copies
        assert handle.run_dir is not None
        restores = [line for line in (handle.run_dir / "logs" / f"worker-{victim}.log")
                    .read_text().splitlines() if "opened the RocksDB checkpoint" in line]
        assert restores and all(" 0 SST file(s) from local copies" not in line
                                for line in restores), restores
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


@pytest.mark.parametrize("damage", ["garbled", "missing"])
def test_damaged_sst_file_falls_back_to_an_older_checkpoint(tmp_path: Path,
                                                            damage: str) -> None:
    out, stores, ckpt = tmp_path / "out", tmp_path / "stores", tmp_path / "ckpt"
    uri = f"file://{ckpt}"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=800,
                                       release_file=tmp_path / "go"),
                                incremental_config(stores, uri, checkpoint_interval_ms=1500,
                                                   checkpoints_retained=3))
        newest = wait_until(lambda: committed_count(out) > 1500 and last_completed(handle) >= 3
                            and last_completed(handle), 90, "three checkpoints")
        # garble or delete every SST file the newest checkpoint uploaded (it and any
        # checkpoint completing meanwhile reference them; the ones before it do not)
        damaged = [p for p in (ckpt / "inc").rglob(f"sst-{newest:010d}-*")]
        assert damaged, sorted(map(str, (ckpt / "inc").rglob("*")))
        for p in damaged:
            if damage == "missing":
                p.unlink()
            else:
                raw = p.read_bytes()
                p.write_bytes(raw[:-8] + bytes(b ^ 0xA5 for b in raw[-8:]))
        # and no local copy survives (as on another host; local recovery would take the
        # intact copies instead): each worker's local folder becomes a plain file, so no
        # copy is kept or found from now on
        local = sorted(stores.glob("worker-*/local"))
        assert local and any(d.glob(f"*sst-{newest:010d}-*") for d in local), local
        def replace(d: Path) -> bool:  # a concurrent upload may create it again
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
            d.write_text("no local copies here")
            return True

        for d in local:
            wait_until(functools.partial(replace, d), 10, f"{d} replaced by a file")
        gen = handle.status()["generation"]
        os.kill(handle.workers()[0].pid, signal.SIGKILL)
        recovery = wait_until(lambda: [r for r in handle.status()["recoveries"]
                                       if r["generation"] > gen], 90, "the recovery")
        restored, reason = recovery[-1]["checkpoint"], recovery[-1]["reason"]
        assert restored is not None and restored < newest, recovery
        # the error names the damaged file and the checkpoint it belongs to
        assert "corrupt snapshot in checkpoint" in reason and "SST file" in reason, reason
        assert f"sst-{newest:010d}-" in reason, reason
        assert ("is missing" if damage == "missing" else "checksum mismatch") in reason, reason
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the kill mattered"
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    # the state restored from the older checkpoint is right (not empty): the last record of
    # every key carries the full count and sum; output replayed for the checkpoints skipped
    # may repeat (at-least-once for that span, as status says)
    last: dict[str, dict[str, Any]] = {}
    for r in read_committed(out):
        if r["count"] >= last.get(r["key"], {"count": -1})["count"]:
            last[r["key"]] = r
    assert sorted(last) == sorted(f"k{k}" for k in range(KEYS))
    assert all(r["count"] == PER_KEY for r in last.values()), last
    assert len({(r["key"], r["seq"]) for r in read_committed(out)}) == KEYS * PER_KEY


def test_full_local_disk_fails_the_native_checkpoint_and_the_job_goes_on(
        tmp_path: Path) -> None:
    """The task databases' disk fills up (a 16 MB tmpfs and ballast, the disk_full chaos
    fault's): checkpoints are declined, naming the failed native checkpoint, the job keeps
    running; once there is space again checkpoints complete and the job drains with every
    key exactly once."""
    from jstormpy.testing.chaos.disk import FullDisk

    out, stores = tmp_path / "out", tmp_path / "stores"
    disk = FullDisk(stores)
    if not disk.mounted:
        pytest.skip("needs root to mount a tmpfs")
    try:
        with LocalCluster(home=tmp_path / "home") as cluster:
            handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=600,
                                           release_file=tmp_path / "go"),
                                    incremental_config(stores, f"file://{tmp_path / 'ckpt'}"))
            wait_until(lambda: last_completed(handle) >= 2, 90, "two checkpoints")
            gen = handle.status()["generation"]
            disk.fill()

            def declined() -> list[dict[str, Any]]:
                return [c for c in handle.status()["checkpoints"]
                        if "native RocksDB checkpoint failed" in (c.get("error") or "")]

            failed = wait_until(declined, 60, "a declined checkpoint")
            assert "No space left" in failed[0]["error"], failed
            before = committed_count(out)
            disk.free()
            newest = max(c["id"] for c in failed)
            wait_until(lambda: last_completed(handle) > newest, 60,
                       "a checkpoint completed after the disk has space again")
            assert committed_count(out) > before or committed_count(out) == KEYS * PER_KEY
            assert handle.status()["generation"] == gen, "the job was restarted"
            release(tmp_path / "go")  # the scenario is over: the rest at full speed
            handle.wait(timeout=180)
    finally:
        disk.release()
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


def test_the_task_thread_pause_of_each_checkpoint_reaches_the_tm(tmp_path: Path) -> None:
    """Each task's ack carries how long the checkpoint stopped its thread; the TM's
    checkpoint history holds every task's figure and the longest, as does
    ``jstorm status``'s last checkpoint."""
    from jstormpy.cli.status import format_status

    out, stores = tmp_path / "out", tmp_path / "stores"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, keys=KEYS, per_key=PER_KEY, rate=600,
                                       release_file=tmp_path / "go"),
                                incremental_config(stores, f"file://{tmp_path / 'ckpt'}"))
        wait_until(lambda: last_completed(handle) >= 2, 90, "two checkpoints")
        status = handle.status()
        last = status["last_completed_checkpoint"]
        tasks = {str(t) for w in status["workers"] for t in w["tasks"]}
        assert set(last["task_pause_ms"]) == tasks, last
        assert all(ms >= 0 for ms in last["task_pause_ms"].values())
        assert last["pause_ms"] == max(last["task_pause_ms"].values()) > 0
        assert f"task pause {last['pause_ms']} ms" in format_status(status)
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
