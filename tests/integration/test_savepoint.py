"""Savepoint a running topology, then restart it from the savepoint with new code
(migrate_state) and another parallelism: every key's sequence stays exactly-once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster, SequenceSpout, TopologyBuilder, read_committed
from jstormpy.errors import JStormError
from jstormpy.savepoints import read_manifest
from tests.chaos.topologies import check_keyed_sums
from tests.integration.savepoint_components import RunningSumV2, linear

KEYS, PER_KEY = 12, 1500


def committed(out: Path) -> int:
    return len(read_committed(out)) if out.exists() else 0


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("new_parallelism", [4, 1])
def test_savepoint_then_new_code_at_another_parallelism(tmp_path: Path,
                                                        new_parallelism: int) -> None:
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 2), conf)
        wait_for(lambda: committed(out) > 2000, 60, "some committed output")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    assert uri == f"file://{tmp_path / 'sp'}"
    manifest = read_manifest(uri)
    assert manifest["components"]["sum"]["parallelism"] == 2
    assert len(read_committed(out)) < KEYS * PER_KEY, "the run ended before the savepoint"

    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, new_parallelism, RunningSumV2), conf,
                                from_savepoint=uri)
        handle.wait(timeout=120)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


def test_from_savepoint_refuses_state_of_a_removed_component(tmp_path: Path) -> None:
    out = tmp_path / "out"
    conf = Config(workers=1, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 1, rate=500), conf)
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    b = TopologyBuilder("sp-linear")
    b.set_spout("events", SequenceSpout(keys=2, per_key=10), parallelism=2)
    with LocalCluster() as cluster, pytest.raises(JStormError, match="'out', 'sum'"):
        cluster.submit(b.build(), conf, from_savepoint=uri)
