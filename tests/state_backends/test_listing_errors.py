"""A checkpoint listing that fails is an error, never "no checkpoints" (issue 23 hole 1).

The TM resolves "restore the latest checkpoint" from ``list_completed()``. A listing that
silently comes back empty (or one checkpoint short) makes the recovery restore nothing
(or an older checkpoint) while the sinks have committed more: every key is replayed from
its first record. So each backend must raise BackendError when it cannot list, and
return the full list once the storage answers again.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import BackendError
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.file import FileBackend
from jstormpy.state_backends.hdfs import HdfsBackend
from jstormpy.testing.servers.webhdfs import WebHdfsServer


def _complete(backend: StateBackend, *ids: int) -> None:
    for cid in ids:
        handle = backend.put_snapshot(cid, 0, b"state %d" % cid)
        backend.create_metadata(cid, {"tasks": {"0": {"handle": handle}}})


def _scandir_failing_on(monkeypatch: pytest.MonkeyPatch, broken: Path, err: int) -> None:
    """os.scandir of ``broken`` raises OSError(err), as an EIO disk or EMFILE would
    (root ignores chmod, so the fault is injected)."""
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(os.fsdecode(path)) == broken:
            raise OSError(err, os.strerror(err), str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


@pytest.mark.parametrize("err", [errno.EIO, errno.EMFILE])
def test_file_root_that_cannot_be_scanned_raises(tmp_path: Path, err: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    backend = FileBackend(f"file://{tmp_path / 'ckpt'}")
    _complete(backend, 1, 2)
    _scandir_failing_on(monkeypatch, tmp_path / "ckpt", err)
    with pytest.raises(BackendError, match=rf"{tmp_path / 'ckpt'}.*{os.strerror(err)}"):
        backend.list_completed()
    monkeypatch.undo()
    assert backend.list_completed() == [1, 2]


def test_file_checkpoint_directory_that_cannot_be_scanned_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error on one ``chk-N/`` must not drop N from the list (a silent restore of
    N-1, older than what the sinks committed)."""
    backend = FileBackend(f"file://{tmp_path / 'ckpt'}")
    _complete(backend, 1, 2)
    _scandir_failing_on(monkeypatch, tmp_path / "ckpt" / "chk-0000000002", errno.EIO)
    with pytest.raises(BackendError, match="chk-0000000002"):
        backend.list_completed()


def test_file_root_that_is_not_a_directory_raises(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    root.write_bytes(b"a file where the checkpoint directory belongs\n")
    with pytest.raises(BackendError, match="not a directory"):
        FileBackend(f"file://{root}").list_completed()


def test_file_root_never_written_lists_nothing(tmp_path: Path) -> None:
    assert FileBackend(f"file://{tmp_path / 'absent'}").list_completed() == []


def _hdfs(server: WebHdfsServer, retries: int = 3) -> HdfsBackend:
    backend = open_backend(f"hdfs://127.0.0.1:{server.port}/ckpt", retries=retries,
                           backoff_s=0.01, timeout_s=5)
    assert isinstance(backend, HdfsBackend)
    return backend


def test_hdfs_root_404_for_a_moment_is_retried(webhdfs_server: WebHdfsServer) -> None:
    backend = _hdfs(webhdfs_server)
    _complete(backend, 1, 2)
    webhdfs_server.fail_listings("/ckpt", 2)
    assert backend.list_completed() == [1, 2]


def test_hdfs_root_404_that_persists_raises(webhdfs_server: WebHdfsServer) -> None:
    backend = _hdfs(webhdfs_server, retries=2)
    _complete(backend, 1, 2)
    webhdfs_server.fail_listings("/ckpt", -1)
    with pytest.raises(BackendError, match=r"hdfs://127\.0\.0\.1:\d+/ckpt.*/ckpt"):
        backend.list_completed()
    webhdfs_server.fail_listings("/ckpt", 0)
    assert backend.list_completed() == [1, 2]


def test_hdfs_root_404_seen_by_a_new_client_raises(webhdfs_server: WebHdfsServer) -> None:
    """A TM restarted for a resume has a new backend object: the generation counter it
    reads shows the root exists, so a 404 listing it is a fault, not "no checkpoints"."""
    _complete(_hdfs(webhdfs_server), 1, 2)
    _hdfs(webhdfs_server).put_meta("generation", b"3")
    backend = _hdfs(webhdfs_server, retries=1)
    assert backend.get_meta("generation") == b"3"
    webhdfs_server.fail_listings("/ckpt", -1)
    with pytest.raises(BackendError):
        backend.list_completed()


def test_hdfs_checkpoint_directory_404_is_not_a_short_list(
        webhdfs_server: WebHdfsServer) -> None:
    backend = _hdfs(webhdfs_server, retries=2)
    _complete(backend, 1, 2)
    webhdfs_server.fail_listings("/ckpt/chk-0000000002", 1)
    assert backend.list_completed() == [1, 2]  # retried
    webhdfs_server.fail_listings("/ckpt/chk-0000000002", -1)
    with pytest.raises(BackendError, match="chk-0000000002"):
        backend.list_completed()


def test_hdfs_root_never_written_lists_nothing(webhdfs_server: WebHdfsServer) -> None:
    assert _hdfs(webhdfs_server).list_completed() == []
