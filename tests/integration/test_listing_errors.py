"""A checkpoint listing that fails during a recovery (issue 23 hole 1), with real processes.

A worker is killed while the checkpoint store lists no checkpoints although it has them:
an HDFS NameNode answering 404 for the checkpoint root, or a file:// checkpoint root
that is an empty directory for a while (an NFS mount point seen unmounted). Before the
fix the TM read that as "no checkpoints": every task restored nothing, the spouts
started again from offset 0, the FileSink accepted the recovery and every record
already committed was committed a second time, with ``errors == []``. Now the recovery
waits, with an error in status naming the backend and what is missing, and restores the
newest checkpoint once the listing heals: each key's committed output is exactly once.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Config, LocalCluster, read_committed
from jstormpy.api.errors import JStormError
from jstormpy.state_backends.base import COMPLETED_META
from jstormpy.state_backends.file import FileBackend
from jstormpy.testing.semantics import check_sequences
from jstormpy.testing.servers.webhdfs import WebHdfsServer

from .helpers import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
from topologies import linear  # noqa: E402

KEYS = 20
PER_KEY = 2000


def _config(backend: str) -> Config:
    # checkpoints only when the test forces them: none can start while the store is
    # broken (a checkpoint "completed" into the stand-in directory would be lost with it)
    return Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=600_000,
                  worker_timeout_ms=5000, checkpoint_timeout_ms=10_000, state_backend=backend)


def _two_checkpoints_with_output(handle: Any, out: Path) -> int:
    """Force two checkpoints with progress between them; the id of the second."""
    ids = []
    for _ in range(2):
        emitted = handle.metrics().get("topology", {}).get("emitted", 0)
        wait_until(lambda e=emitted: handle.metrics().get("topology", {}).get("emitted", 0) > e,
                   30, "progress between checkpoints")
        ids.append(handle.checkpoint())
    wait_until(lambda: read_committed(out), 30, "committed output")
    return ids[-1]


def _kill_worker_and_watch(handle: Any, uri: str) -> dict[str, Any]:
    """SIGKILL a worker; return the status once the recovery either waits with an error
    naming ``uri`` or is already running again (what the unfixed TM did)."""
    gen = handle.status()["generation"]
    os.kill(handle.workers()[1].pid, signal.SIGKILL)

    def settled() -> dict[str, Any] | None:
        st = handle.status()
        if st["generation"] <= gen:
            return None
        waiting = st["state"] == "recovering" and any(uri in e["message"] for e in st["errors"])
        return st if waiting or st["state"] == "running" else None

    st: dict[str, Any] = wait_until(settled, 60, "the recovery to wait for the backend or run")
    return st


def _assert_exactly_once(out: Path) -> None:
    report = check_sequences(read_committed(out), "key", "seq",
                             {f"k{i}": PER_KEY for i in range(KEYS)})
    assert report.ok, report.summary()


def _assert_restored(final: dict[str, Any], latest: int) -> None:
    restored = [r["checkpoint"] for r in final["recoveries"]]
    assert restored and restored[0] is not None and restored[0] >= latest, final["recoveries"]


def test_hdfs_listing_404_during_recovery(tmp_path: Path,
                                          webhdfs_server: WebHdfsServer) -> None:
    out = tmp_path / "out"
    uri = f"hdfs://127.0.0.1:{webhdfs_server.port}/jstorm/ckpt"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, PER_KEY, rate=4000), _config(uri))
        latest = _two_checkpoints_with_output(handle, out)
        webhdfs_server.fail_listings("/jstorm/ckpt", -1)
        try:
            during = _kill_worker_and_watch(handle, uri)
        finally:
            webhdfs_server.fail_listings("/jstorm/ckpt", 0)
        final = handle.wait(timeout=120)
    _assert_exactly_once(out)
    assert final["state"] == "drained", final["state"]
    assert during["state"] == "recovering", during["recoveries"]
    assert any("404" in e["message"] and "/jstorm/ckpt" in e["message"]
               for e in during["errors"]), during["errors"]
    _assert_restored(final, latest)


def test_file_checkpoint_root_empty_during_recovery(tmp_path: Path) -> None:
    """The backend itself cannot tell an unmounted mount point from a new empty store:
    the TM knows which checkpoint completed and must not restore below it."""
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    away = tmp_path / "ckpt.mounted"
    uri = f"file://{ckpt}"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, PER_KEY, rate=4000), _config(uri))
        latest = _two_checkpoints_with_output(handle, out)
        os.rename(ckpt, away)  # "unmount": the mount point is an empty directory
        ckpt.mkdir()
        try:
            during = _kill_worker_and_watch(handle, uri)
            if during["state"] == "recovering":
                # "roll back to the latest" would take the short listing's word as well
                with pytest.raises(JStormError, match=f"refused.*checkpoint {latest}"):
                    handle.rollback()
        finally:
            os.rename(ckpt, tmp_path / "standin")  # "mount" again: what was written
            os.rename(away, ckpt)                  # meanwhile is hidden
        final = handle.wait(timeout=120)
    _assert_exactly_once(out)
    assert final["state"] == "drained", final["state"]
    assert during["state"] == "recovering", during["recoveries"]
    messages = [e["message"] for e in during["errors"] if uri in e["message"]]
    assert messages and f"checkpoint {latest}" in messages[-1], during["errors"]
    _assert_restored(final, latest)


def test_resume_with_a_listing_missing_the_newest_checkpoint(tmp_path: Path) -> None:
    """A restarted TM (``--resume``) knows the newest completed checkpoint from the
    backend's meta object, not from its memory: a listing without it makes the resume
    wait, instead of restoring the checkpoint before it (a silent restore older than
    what the sinks committed)."""
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    uri = f"file://{ckpt}"
    topo = linear(out, KEYS, PER_KEY, rate=4000)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, _config(uri), resume=False)
        latest = _two_checkpoints_with_output(handle, out)
        store = FileBackend(uri)
        wait_until(lambda: store.get_meta(COMPLETED_META) == str(latest).encode(), 30,
                   "the completed checkpoint id persisted")
        handle.kill()
    newest = ckpt / f"chk-{latest:010d}"
    hidden = tmp_path / "hidden"
    os.rename(newest, hidden)  # listed by nobody: as if the store lost sight of it
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, _config(uri), resume=True)
        try:
            def waiting() -> dict[str, Any] | None:
                st = handle.status()
                if st["state"] != "recovering":
                    return st if st["state"] != "starting" else None
                return st if any(uri in e["message"] for e in st["errors"]) else None

            during: dict[str, Any] = wait_until(waiting, 60, "the resume to wait or run")
        finally:
            os.rename(hidden, newest)
        final = handle.wait(timeout=120)
    _assert_exactly_once(out)
    assert final["state"] == "drained", final["state"]
    messages = [e["message"] for e in during["errors"] if uri in e["message"]]
    assert messages and f"checkpoint {latest}" in messages[-1], during["errors"]
    _assert_restored(final, latest)


def test_savepoint_restore_below_the_newest_checkpoint_of_the_earlier_run(
        tmp_path: Path) -> None:
    """A savepoint restore replaces the backend's checkpoints by the savepoint: the
    earlier run's newest completed id (meta/completed_checkpoint) must go with them, or
    the restored run would wait for it for ever. The imported checkpoint takes its id
    from a new reservation above every id the store and the earlier run used (issue 35:
    one commit path), so it is not the savepoint's lower id."""
    ckpt = tmp_path / "ckpt"
    uri = f"file://{ckpt}"
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, PER_KEY, rate=4000), _config(uri))
        _two_checkpoints_with_output(handle, out)
        savepoint = handle.savepoint(f"file://{tmp_path / 'sp'}")
        later = _two_checkpoints_with_output(handle, out)
        later = max(later, _two_checkpoints_with_output(handle, out))
        store = FileBackend(uri)

        def persisted() -> int:
            return int(store.get_meta(COMPLETED_META) or b"0")
        # checkpoints keep completing: wait for ``later`` (or a newer one) to be persisted,
        # and after the kill take the newest id the earlier run persisted
        wait_until(lambda: persisted() >= later, 30, "the completed checkpoint id persisted")
        handle.kill()
        later = persisted()
    restored_out = tmp_path / "restored"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(restored_out, KEYS, PER_KEY, rate=None), _config(uri),
                                from_savepoint=savepoint)
        final = handle.wait(timeout=120)
    assert final["state"] == "drained", (final["state"], final["errors"])
    restored = final["recoveries"][0]["checkpoint"]
    assert restored is not None and restored > later, final["recoveries"]
