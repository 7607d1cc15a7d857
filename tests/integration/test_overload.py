"""Sustained overload: memory stays bounded (measured from the OS) and the source rate
settles without oscillating, while checkpoints keep completing."""

from __future__ import annotations

import statistics
import time

import psutil
import pytest

from jstormpy import Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder, read_committed
from tests.integration.bp_components import StampedSlowPassThrough

CONFIG = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=500,
                queue_capacity=16, batch_size=64, heartbeat_interval_ms=200,
                send_buffer_bytes=256 * 1024, throttle_lease_ms=1000)
# Everything a worker may buffer: its task inboxes (credits × batch) plus one send buffer
# per peer; tuples here are ~40 bytes in memory, allow 200 per slot for Python overhead.
BUDGET_BYTES = (CONFIG.queue_capacity * CONFIG.batch_size * 3 * 200
                + CONFIG.send_buffer_bytes * CONFIG.workers) + 30 * 1024 * 1024


@pytest.mark.slow
def test_overload_memory_bounded_rate_steady_checkpoints_complete(tmp_path):
    b = TopologyBuilder("overload")
    # far more input than the slow bolt can take in the test's time: sustained overload
    b.set_spout("events", SequenceSpout(keys=8, per_key=1_000_000, batch=200), parallelism=1)
    b.set_bolt("slow", StampedSlowPassThrough, parallelism=1).shuffle_grouping("events")
    b.set_bolt("out", FileSink(str(tmp_path / "out")), parallelism=1).shuffle_grouping("slow")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), CONFIG)
        deadline = time.monotonic() + 60
        while handle.status()["state"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        procs = [psutil.Process(w.pid) for w in handle.workers()]
        warm_until = time.monotonic() + 3.0
        baseline = None
        rss_max = 0
        end = warm_until + 8.0
        start = time.time() + (warm_until - time.monotonic())
        while time.monotonic() < end:
            time.sleep(0.5)  # sampling period of the RSS observer
            rss = sum(p.memory_info().rss for p in procs)
            if time.monotonic() >= warm_until:
                baseline = rss if baseline is None else baseline
                rss_max = max(rss_max, rss)
        cid = handle.checkpoint()  # commit what was processed so far
        # a forced checkpoint right behind a periodic one has an empty transaction (no
        # file): wait for any committed part at or after it
        deadline = time.monotonic() + 30
        while not any(int(p.name.split("-")[1]) >= cid
                      for p in (tmp_path / "out").glob("part-*")):
            assert time.monotonic() < deadline, "checkpoint output never committed"
            time.sleep(0.05)
        status = handle.status()
    # per-second throughput of the bottleneck, from the processing stamps it committed
    stamps = [r["processed_at"] for r in read_committed(tmp_path / "out")]
    buckets: dict[int, int] = {}
    for t in stamps:
        if start <= t < start + 8.0:
            buckets[int(t - start)] = buckets.get(int(t - start), 0) + 1
    rates = [buckets.get(i, 0) for i in range(8)]
    assert rss_max - baseline < BUDGET_BYTES, (rss_max - baseline, BUDGET_BYTES)
    mean = statistics.mean(rates)
    cv = statistics.pstdev(rates) / mean
    assert mean > 0
    assert cv < 0.2, f"throughput oscillates: per-second counts {rates}, CV {cv:.2f}"
    completed = [c for c in status["checkpoints"] if c["status"] == "completed"]
    assert len(completed) >= 5, status["checkpoints"]
    assert status["backpressure"]["throttled_spouts"] or status["backpressure"]["throttle_count"]
