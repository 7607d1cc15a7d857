"""Checkpoint failure handling with real processes: unreachable backends, unwritable
checkpoint directories, corrupt snapshots, rollback, forced checkpoints, at-least-once
under kills, and resuming a killed topology from its last completed checkpoint.

Every wait polls a condition with a deadline (``wait_for``); no sleep stands in for one.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from jstormpy import Config, LocalCluster, read_committed
from jstormpy.api.errors import JStormError
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
from topologies import check_keyed_sums, linear  # noqa: E402

T = TypeVar("T")
KEYS = 20


def wait_for(cond: Callable[[], T], timeout: float, what: str, poll: float = 0.05) -> T:
    """Poll ``cond`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = cond()
        except JStormError as exc:  # the TM may be busy restarting
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(poll)


def checkpoints(handle: Any, status: str | tuple[str, ...]) -> list[dict[str, Any]]:
    wanted = (status,) if isinstance(status, str) else status
    return [c for c in handle.status()["checkpoints"] if c["status"] in wanted]


def config(backend: str, **changes: Any) -> Config:
    base = dict(workers=2, guarantee="exactly_once", checkpoint_interval_ms=200,
                worker_timeout_ms=5000, checkpoint_timeout_ms=10_000, state_backend=backend)
    base.update(changes)
    return Config(**base)


def missing_events(out: Path, keys: int, per_key: int) -> list[tuple[str, int]]:
    """(key, seq) pairs the committed output lacks (duplicates allowed)."""
    seen = {(r["key"], r["seq"]) for r in read_committed(out)}
    return [(f"k{k}", s) for k in range(keys) for s in range(per_key)
            if (f"k{k}", s) not in seen]


def _outage_run(tmp_path: Path, backend: str, break_backend: Callable[[], None],
                repair_backend: Callable[[], None], error_hint: str) -> None:
    """Run linear; break the backend after two completed checkpoints; expect failed
    checkpoints with a clear error while the job keeps running; repair; expect completed
    checkpoints again and exactly-once output."""
    per_key = 2000
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, per_key, rate=5000), config(backend))
        wait_for(lambda: len(checkpoints(handle, "completed")) >= 2, 60,
                 "two completed checkpoints")
        break_backend()
        try:
            failed = wait_for(lambda: checkpoints(handle, ("failed", "timed_out")), 30,
                              "a failed checkpoint while the backend is down")
            st = handle.status()
            assert st["state"] == "running", st["state"]
            for entry in failed:
                assert entry["error"], entry
            assert any(error_hint in c["error"] for c in failed), failed
        finally:
            repair_backend()
        last_failed = max(c["id"] for c in checkpoints(handle, ("failed", "timed_out")))
        wait_for(lambda: [c for c in checkpoints(handle, "completed") if c["id"] > last_failed],
                 60, "a completed checkpoint after the backend came back")
        final = handle.wait(timeout=90)
    assert final["state"] == "drained"
    assert final["restarts"] == 0, final["recoveries"]  # failed checkpoints do not roll back
    problems = check_keyed_sums(out, KEYS, per_key)
    assert not problems, problems


@pytest.mark.parametrize("kind", ["hdfs", "hbase"])
def test_backend_unreachable_mid_run(tmp_path, kind, request):
    if kind == "hdfs":
        server = request.getfixturevalue("webhdfs_server")
        uri = f"hdfs://127.0.0.1:{server.port}/jstorm/ckpt"
    else:
        server = request.getfixturevalue("hbase_server")
        uri = f"hbase://127.0.0.1:{server.port}/jstorm_ckpt"
    port = server.port

    def restart() -> None:
        server.start()
        assert server.port == port

    _outage_run(tmp_path, uri, server.stop, restart, "unreachable")


def test_file_checkpoint_dir_replaced_by_a_file(tmp_path):
    ckpt = tmp_path / "ckpt"
    away = tmp_path / "ckpt.away"

    def break_dir() -> None:
        # root may ignore permissions: make the directory a regular file (ENOTDIR)
        os.rename(ckpt, away)
        ckpt.write_bytes(b"not a directory\n")

    def repair_dir() -> None:
        if ckpt.is_file():
            ckpt.unlink()
        if away.exists():
            os.rename(away, ckpt)

    _outage_run(tmp_path, f"file://{ckpt}", break_dir, repair_dir, "Not a directory")


def forced_checkpoints(handle: Any, n: int) -> list[int]:
    """``n`` checkpoints taken with ``handle.checkpoint()``, each after some progress."""
    ids = []
    for _ in range(n):
        emitted = handle.metrics().get("topology", {}).get("emitted", 0)
        wait_for(lambda e=emitted: handle.metrics().get("topology", {}).get("emitted", 0) > e,
                 30, "progress between checkpoints")
        ids.append(handle.checkpoint())
    return ids


def corrupt(snapshot: Path) -> None:
    """Flip payload bytes in the middle of a snapshot: its checksum no longer matches
    (the end of a streamed snapshot is its envelope's trailer)."""
    data = bytearray(snapshot.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF
    snapshot.write_bytes(bytes(data))


def test_corrupt_snapshot_falls_back_to_previous_checkpoint(tmp_path):
    """Corrupt a snapshot of the newest completed checkpoint, kill a worker: the TM logs
    the corrupt snapshot, restores the previous checkpoint and the job completes.

    Falling back past a checkpoint whose output the sinks already committed replays that
    output: at-least-once here (no loss), not exactly-once.
    """
    per_key = 2000
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    conf = config(f"file://{ckpt}", checkpoint_interval_ms=600_000)  # only forced ones
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, per_key, rate=4000), conf)
        ids = forced_checkpoints(handle, 3)
        assert ids == sorted(ids) and handle.last_completed_checkpoint() == ids[-1]
        latest, previous = ids[-1], ids[-2]
        wait_for(lambda: read_committed(out), 30, "committed output")
        snaps = sorted((ckpt / f"chk-{latest:010d}").glob("task-*.snap"))
        assert snaps, list(ckpt.rglob("*"))
        corrupt(snaps[len(snaps) // 2])
        gen = handle.status()["generation"]
        os.kill(handle.workers()[0].pid, signal.SIGKILL)
        recovery = wait_for(
            lambda: [r for r in handle.status()["recoveries"] if r["generation"] > gen
                     and r["checkpoint"] == previous], 60, "recovery to the previous checkpoint")
        assert "corrupt snapshot" in recovery[-1]["reason"], recovery
        assert str(latest) in recovery[-1]["reason"]
        final = handle.wait(timeout=90)
        master_log = (handle.run_dir / "logs" / "master.log").read_text()
    assert "corrupt snapshot" in master_log and "checksum mismatch" in master_log
    # the checkpoint ids after the fallback stay above the discarded one: a sink never
    # reuses the id of a transaction it already committed
    after = [c["id"] for c in final["checkpoints"]
             if c["status"] == "completed" and c["generation"] == final["generation"]]
    missing = missing_events(out, KEYS, per_key)
    assert not missing, f"{len(missing)} events lost, e.g. {missing[:5]}"
    assert after and min(after) > latest, final["checkpoints"]
    # ... and status says which span of committed output is emitted again (issue 13 hole 7)
    notes = [e["message"] for e in final["errors"] if "emitted again" in e["message"]]
    assert notes and f"fell back to checkpoint {previous}" in notes[-1], final["errors"]


def test_rollback_keeps_exactly_once(tmp_path):
    per_key = 2000
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, per_key, rate=5000),
                                config(f"file://{tmp_path / 'ckpt'}"))
        wait_for(lambda: len(checkpoints(handle, "completed")) >= 2, 60, "two checkpoints")
        gen0 = handle.status()["generation"]
        target = handle.rollback()
        assert target >= 1
        st = wait_for(lambda: (s := handle.status())["generation"] > gen0
                      and s["state"] == "running" and s, 30, "running after the rollback")
        assert any(r["checkpoint"] == target for r in st["recoveries"]), st["recoveries"]
        gen1 = st["generation"]
        wait_for(lambda: [c for c in checkpoints(handle, "completed") if c["generation"] == gen1],
                 30, "a checkpoint in the new generation")
        with pytest.raises(JStormError, match="not a completed checkpoint"):
            handle.rollback(to=987654)
        assert handle.status()["generation"] == gen1  # a refused rollback changes nothing
        cid = handle.checkpoint()
        assert handle.rollback(to=cid) == cid
        wait_for(lambda: handle.status()["generation"] > gen1, 30, "the second rollback")
        final = handle.wait(timeout=90)
    assert final["state"] == "drained"
    problems = check_keyed_sums(out, KEYS, per_key)
    assert not problems, problems


def test_forced_checkpoint_is_the_last_completed(tmp_path):
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        conf = config(f"file://{tmp_path / 'ckpt'}", checkpoint_interval_ms=600_000)
        handle = cluster.submit(linear(out, 4, 2000, rate=2000), conf)
        wait_for(lambda: handle.status()["state"] == "running", 30, "running")
        first = handle.checkpoint()
        assert handle.last_completed_checkpoint() == first
        second = handle.checkpoint()
        assert second > first
        assert handle.last_completed_checkpoint() == second
        entry = [c for c in handle.status()["checkpoints"] if c["id"] == second][-1]
        assert entry["status"] == "completed" and entry["error"] == ""
        handle.kill()


def test_at_least_once_under_kills_never_loses(tmp_path):
    per_key = 2500
    out = tmp_path / "out"
    schedule = ChaosSchedule(31, (Kill("worker", at_s=0.6, worker=0),
                                  Kill("worker", at_s=1.4, worker=1)))
    conf = config(f"file://{tmp_path / 'ckpt'}", guarantee="at_least_once")
    status, kills, _ = run_with_chaos(linear(out, KEYS, per_key, rate=8000), conf, schedule,
                                      timeout=90, home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert [k for k in kills if k.startswith("SIGKILL")], kills
    assert status["restarts"] >= 1
    missing = missing_events(out, KEYS, per_key)
    assert not missing, f"{len(missing)} events lost, e.g. {missing[:5]}"


def test_resume_continues_from_last_checkpoint(tmp_path):
    per_key = 2000
    out = tmp_path / "out"
    backend = f"file://{tmp_path / 'ckpt'}"
    topo = linear(out, KEYS, per_key, rate=5000)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, config(backend), resume=False)
        wait_for(lambda: len(checkpoints(handle, "completed")) >= 2, 60, "two checkpoints")
        cid = handle.checkpoint()
        first_gen = handle.status()["generation"]
        st = handle.status()
        assert st["state"] == "running" and not st["final_checkpoint"]
        handle.kill()  # mid-run: the spouts are far from finished
    assert len(read_committed(out)) < KEYS * per_key
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, config(backend), resume=True)
        final = handle.wait(timeout=90)
    assert final["state"] == "drained"
    assert final["generation"] > first_gen
    assert final["recoveries"][0]["checkpoint"] >= cid, final["recoveries"]
    problems = check_keyed_sums(out, KEYS, per_key)
    assert not problems, problems


@pytest.mark.parametrize("kind", ["hdfs", "hbase"])
def test_worker_killed_while_backend_unreachable(tmp_path, kind, request):
    """A recovery that cannot reach the checkpoint store must wait for it, not discard
    the checkpoints and restart from scratch (or from an older checkpoint)."""
    if kind == "hdfs":
        server = request.getfixturevalue("webhdfs_server")
        uri = f"hdfs://127.0.0.1:{server.port}/jstorm/ckpt"
    else:
        server = request.getfixturevalue("hbase_server")
        uri = f"hbase://127.0.0.1:{server.port}/jstorm_ckpt"
    per_key = 1500
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, per_key, rate=5000), config(uri))
        wait_for(lambda: len(checkpoints(handle, "completed")) >= 2, 60, "two checkpoints")
        server.stop()
        try:
            gen = handle.status()["generation"]
            os.kill(handle.workers()[1].pid, signal.SIGKILL)
            log = handle.run_dir / "logs" / "master.log"
            wait_for(lambda: "unreachable" in log.read_text() and
                     handle.status()["generation"] > gen, 60,
                     "a recovery attempt that finds the backend unreachable")
            assert handle.status()["state"] == "recovering"
        finally:
            server.start()
        final = handle.wait(timeout=90)
    assert final["state"] == "drained"
    restored = [r["checkpoint"] for r in final["recoveries"] if r["generation"] > gen]
    assert restored and restored[0] is not None, final["recoveries"]
    problems = check_keyed_sums(out, KEYS, per_key)
    assert not problems, problems


def test_every_checkpoint_corrupt_fails_the_topology_instead_of_replaying_from_nothing(
        tmp_path):
    """Corrupt a snapshot of every completed checkpoint, kill a worker: once the TM has
    found each unusable it fails the topology naming them, instead of restoring empty
    state under committed output (every key's output would be emitted again)."""
    per_key = 2000
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    conf = config(f"file://{ckpt}", checkpoint_interval_ms=600_000)  # only forced ones
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, per_key, rate=4000), conf)
        ids = forced_checkpoints(handle, 2)
        wait_for(lambda: read_committed(out), 30, "committed output")
        committed = len(read_committed(out))
        for victim in sorted(ckpt.glob("chk-*/task-*.snap")):
            corrupt(victim)
        os.kill(handle.workers()[0].pid, signal.SIGKILL)
        with pytest.raises(JStormError, match="no usable checkpoint is left") as failed:
            handle.wait(timeout=120)
    assert f"checkpoint(s) {ids}" in str(failed.value), failed.value
    assert len(read_committed(out)) >= committed
    rows = [(r["key"], r["seq"]) for r in read_committed(out)]
    assert len(rows) == len(set(rows)), "committed output was replayed"
