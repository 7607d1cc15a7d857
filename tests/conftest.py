"""Shared fixtures: protocol-level WebHDFS and HBase Thrift servers (no clusters needed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jstormpy.testing.servers.hbase import HBaseThriftServer
from jstormpy.testing.servers.webhdfs import WebHdfsServer
from tests.simulation import ci_sweep


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """JSTORM_FAST=1 skips tests marked slow (same as -m 'not slow')."""
    if os.environ.get("JSTORM_FAST") == "1":
        skip = pytest.mark.skip(reason="JSTORM_FAST=1 skips slow tests")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The simulator's CI sweep, if selected, starts in the background now
    (tests/simulation/ci_sweep.py)."""
    ci_sweep.start_if_selected(session.items)


def pytest_unconfigure(config: pytest.Config) -> None:
    ci_sweep.stop_background()


@pytest.fixture
def webhdfs_server(tmp_path: Path) -> Iterator[WebHdfsServer]:
    """A WebHDFS server over ``tmp_path/hdfs``, on a free port."""
    with WebHdfsServer(tmp_path / "hdfs") as server:
        yield server


@pytest.fixture
def hbase_server() -> Iterator[HBaseThriftServer]:
    """An HBase Thrift server (buffered transport, binary protocol), on a free port."""
    with HBaseThriftServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _jstorm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own JSTORM_HOME (registry, runs, default checkpoints)."""
    monkeypatch.setenv("JSTORM_HOME", str(tmp_path / "jstorm-home"))
