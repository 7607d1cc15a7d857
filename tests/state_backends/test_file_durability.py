"""Durability of the file:// backend (issue 13 hole 7).

A new ``chk-N/`` directory is an entry of the checkpoint root: until the root itself is
fsynced, a power loss can drop the whole directory, ``_metadata`` included, after the
sinks already committed that checkpoint's output. These tests watch the real ``fsync``
calls (resolving each descriptor through /proc) and check what was made durable, in order.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jstormpy.state_backends.file import FileBackend


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths fsynced through os.fsync, in order (the real fsync still runs)."""
    seen: list[str] = []
    real = os.fsync

    def recording_fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return seen


def test_a_new_checkpoint_directory_is_durable_in_the_root(tmp_path: Path,
                                                           fsynced: list[str]) -> None:
    root = tmp_path / "ckpt"
    backend = FileBackend(f"file://{root}")
    backend.put_snapshot(1, 7, b"state")
    backend.create_metadata(1, {"tasks": {}})
    chk = root / "chk-0000000001"
    assert (chk / "_metadata").is_file()
    # the root was created: its parent is fsynced; chk-1 was created: the root is fsynced
    assert str(tmp_path) in fsynced and str(root) in fsynced
    assert fsynced.index(str(root)) < fsynced.index(str(chk))  # root before the rename in chk
    # every file rename in chk-1 (snapshot, then _metadata) is followed by an fsync of chk-1
    assert fsynced.count(str(chk)) >= 2
    assert fsynced[-1] == str(chk), "the commit point (_metadata) was not made durable last"


def test_an_existing_checkpoint_directory_does_not_refsync_the_root(
        tmp_path: Path, fsynced: list[str]) -> None:
    root = tmp_path / "ckpt"
    backend = FileBackend(f"file://{root}")
    backend.put_snapshot(2, 1, b"a")
    fsynced.clear()
    backend.put_snapshot(2, 2, b"b")
    assert str(root) not in fsynced and fsynced[-1] == str(root / "chk-0000000002")
