"""Dataflow joins and count windows with their state in the RocksDB state store
(docs/state-stores.md), with real processes: a window join (outer), an interval join and
a count window under a worker SIGKILL, and an interval join rescaled 1 -> 3 mid-run,
every pair (and unmatched record) or window committed exactly once, equal to a
recomputation.

Every wait polls a condition with a deadline; no sleep stands in for one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from jstormpy import FileSink, LocalCluster, read_committed
from jstormpy.connectors.sources import SequenceSpout
from jstormpy.dataflow import Dataflow
from jstormpy.state_store import rocksdict_module
from jstormpy.window import Count, CountWindows
from jstormpy.window.stored import WINDOW_STATE

from .dataflow_flows import (
    interval_join,
    interval_join_reference,
    window_join,
    window_join_reference,
)
from .helpers import committed_count, fast_config, kill_now, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def databases_with(stores: Path, state: str) -> list[Path]:
    """The task databases holding managed state ``state``'s column family."""
    rd = rocksdict_module()
    return [p.parent for p in sorted(stores.glob("worker-*/task-*/CURRENT"))
            if f"s:{state}" in rd.Rdict.list_cf(str(p.parent))]


@pytest.mark.parametrize("join", ["window", "interval"])
def test_rocksdb_join_exactly_once_under_worker_sigkill(tmp_path: Path, join: str) -> None:
    keys, nl, nr = 6, 300, 150
    out, stores = tmp_path / "out", tmp_path / "stores"
    if join == "window":
        topology = window_join(out, keys, nl, nr, rate=300, how="outer")
        want, state = window_join_reference(keys, nl, nr, "outer"), "join"
    else:
        topology = interval_join(out, keys, nl, nr, -30, 50, rate=300)
        want, state = interval_join_reference(keys, nl, nr, -30, 50), "interval_join"
    config = fast_config(checkpoint_interval_ms=300, state_store="rocksdb",
                         state_store_dir=str(stores))
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(topology, config)
        wait_until(lambda: committed_count(out) > 100, 60, "some committed pairs")
        kill_now(handle, "worker", 1)
        assert committed_count(out) < sum(want.values()), "the run ended before the kill"
        status = handle.wait(timeout=180)
        assert status["state"] == "drained"
        assert status["recoveries"], "the SIGKILL caused no recovery"
    assert databases_with(stores, state), "the join buffers were not kept in RocksDB"
    got = Counter((r["key"], r["l"], r["r"]) for r in read_committed(out))
    assert got == want


def count_windows(out: Path, keys: int, per_key: int) -> object:
    """Per key, a count window of every 10 records (Count()), from a rate-limited source."""
    flow = Dataflow("df-count-windows")
    flow.source("events", SequenceSpout(keys=keys, per_key=per_key, batch=20,
                                        rate_per_s=300), parallelism=2) \
        .key_by(lambda r: r["key"]).window(CountWindows(10)) \
        .aggregate(Count(), name="counts", parallelism=2).sink("out", FileSink(out))
    return flow.build()


def test_rocksdb_count_windows_exactly_once_under_worker_sigkill(tmp_path: Path) -> None:
    """Each key's 600 records make 60 windows of 10 whatever their order: a lost record
    would leave a partial last window, a repeated one an eleventh record."""
    keys, per_key = 6, 600
    out, stores = tmp_path / "out", tmp_path / "stores"
    want = sorted((f"k{k}", start, start + 10, 10) for k in range(keys)
                  for start in range(0, per_key, 10))
    config = fast_config(checkpoint_interval_ms=300, state_store="rocksdb",
                         state_store_dir=str(stores))
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(count_windows(out, keys, per_key), config)
        wait_until(lambda: committed_count(out) > 60, 60, "some committed windows")
        kill_now(handle, "worker", 1)
        assert committed_count(out) < len(want), "the run ended before the kill"
        status = handle.wait(timeout=180)
        assert status["state"] == "drained"
        assert status["recoveries"], "the SIGKILL caused no recovery"
    assert databases_with(stores, WINDOW_STATE), "the count windows were not in RocksDB"
    got = sorted((r["key"], r["start"], r["end"], r["value"]) for r in read_committed(out))
    assert got == want


def test_rocksdb_interval_join_rescaled_while_running_stays_exactly_once(
        tmp_path: Path) -> None:
    """`rescale {"interval": 3}` mid-run: the buffers move by key-group range into the
    new tasks' databases, and every pair in range is committed once."""
    keys, nl, nr = 6, 400, 200
    out, stores = tmp_path / "out", tmp_path / "stores"
    config = fast_config(checkpoint_interval_ms=300, state_store="rocksdb",
                         state_store_dir=str(stores))
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(interval_join(out, keys, nl, nr, -30, 50, rate=300), config)
        wait_until(lambda: committed_count(out) > 100, 60, "some committed pairs")
        assert handle.rescale({"interval": 3})["error"] == ""
        want = interval_join_reference(keys, nl, nr, -30, 50)
        assert committed_count(out) < sum(want.values()), "the run ended before the rescale"
        assert handle.wait(timeout=180)["state"] == "drained"
    assert len(databases_with(stores, "interval_join")) >= 3, \
        "the new tasks' buffers are not in RocksDB"
    assert Counter((r["key"], r["l"], r["r"]) for r in read_committed(out)) == want
