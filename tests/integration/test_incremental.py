"""Incremental checkpoints with real processes: a corrupt increment makes the Topology
Master fall back to the previous checkpoint and say which checkpoint and key group were
damaged; the state after the fallback is right (docs/checkpointing.md).

Every wait polls a condition with a deadline; no sleep stands in for one.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
from topologies import linear  # noqa: E402

pytestmark = pytest.mark.slow

T = TypeVar("T")
KEYS, PER_KEY = 20, 2000


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
            raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
        time.sleep(poll)


def test_corrupt_increment_falls_back_and_names_what_was_lost(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    conf = Config(workers=2, checkpoint_interval_ms=600_000,  # only forced checkpoints
                  worker_timeout_ms=5000, state_backend=f"file://{ckpt}",
                  incremental_checkpoints=True, incremental_compaction_every=50,
                  incremental_compaction_ratio=100.0, checkpoints_retained=5)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, KEYS, PER_KEY, rate=4000), conf)
        ids = []
        for _ in range(3):
            emitted = handle.metrics().get("topology", {}).get("emitted", 0)
            wait_for(lambda e=emitted: handle.metrics().get("topology", {}).get("emitted", 0) > e,
                     30, "progress between checkpoints")
            ids.append(handle.checkpoint())
        latest, previous = ids[-1], ids[-2]
        deltas = sorted(ckpt.glob(f"inc/task-*/seg-{latest:010d}-*.delta"))
        assert deltas, sorted(str(p) for p in ckpt.rglob("*"))
        for seg in deltas:
            data = bytearray(seg.read_bytes())
            data[-1] ^= 0xFF  # the last key group section no longer matches its checksum
            seg.write_bytes(bytes(data))
        gen = handle.status()["generation"]
        os.kill(handle.workers()[0].pid, signal.SIGKILL)
        recovery = wait_for(
            lambda: [r for r in handle.status()["recoveries"] if r["generation"] > gen
                     and r["checkpoint"] == previous], 60, "recovery to the previous checkpoint")
        reason = recovery[-1]["reason"]
        assert f"corrupt snapshot in checkpoint {latest}" in reason, reason
        assert f"delta of checkpoint {latest}" in reason and "key group" in reason, reason
        handle.wait(timeout=90)
    # state restored from the previous checkpoint is right: the last record of every key
    # carries the full count and sum (output replayed after the fallback may repeat)
    last: dict[str, dict[str, Any]] = {}
    for r in read_committed(out):
        if r["count"] >= last.get(r["key"], {"count": -1})["count"]:
            last[r["key"]] = r
    assert sorted(last) == sorted(f"k{k}" for k in range(KEYS))
    assert all(r["count"] == PER_KEY for r in last.values()), last
    seen = {(r["key"], r["seq"]) for r in read_committed(out)}
    assert len(seen) == KEYS * PER_KEY


def test_savepoint_of_incremental_run_then_new_code_at_another_parallelism(
        tmp_path: Path) -> None:
    """Savepoint (--stop) a run with incremental checkpoints, restart from it with
    ``migrate_state`` to dict values (mutated in place: written whole from then on) and
    parallelism 3: every key's sequence stays exactly-once."""
    from jstormpy.operations.savepoints import read_manifest
    from tests.chaos.topologies import check_keyed_sums
    from tests.integration.savepoint_components import RunningSumV2
    from tests.integration.savepoint_components import linear as sp_linear

    keys, per_key = 12, 1500
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300, incremental_checkpoints=True,
                  incremental_compaction_every=3)
    with LocalCluster() as cluster:
        handle = cluster.submit(sp_linear(out, 2), conf)
        wait_for(lambda: out.exists() and len(read_committed(out)) > 2000, 60,
                 "some committed output")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    assert not list((tmp_path / "sp").rglob("seg-*")), "a savepoint references no segment"
    assert read_manifest(uri)["components"]["sum"]["parallelism"] == 2
    with LocalCluster() as cluster:
        handle = cluster.submit(sp_linear(out, 3, RunningSumV2), conf, from_savepoint=uri)
        handle.wait(timeout=120)
    assert check_keyed_sums(out, keys, per_key) == ""
