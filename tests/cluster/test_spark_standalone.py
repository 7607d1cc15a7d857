"""A windowed exactly-once job on a Spark standalone cluster of three hosts, with the
Topology Master on a fourth and the checkpoints on a fifth (tests/cluster/conftest.py).
Per key: no loss, no duplicate, no reordering, state equal to a recomputation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jstormpy import read_committed
from tests.cluster.conftest import SparkHosts, start_worker, wait_spark_workers
from tests.cluster.topologies import check_windowed, topology_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

KEYS, PER_KEY = 6, 1500


def finish(proc, timeout: float = 400) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"jstorm run exited {proc.returncode}:\n{out[-4000:]}"
    return out


def test_a_windowed_job_drains_exactly_once_across_hosts(spark_hosts: SparkHosts,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "out"
    topo = topology_file(tmp_path / "drain.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=None)
    finish(spark_hosts.driver_run(topo))
    assert check_windowed(out, KEYS, PER_KEY) == ""
    # Spark, the batch side of the pipeline, reads the Parquet output as it is
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("verify").getOrCreate()
    try:
        rows = spark.read.parquet(str(out / "sums")).groupBy("key").count().collect()
        assert {r["key"]: r["count"] for r in rows} == {f"k{i}": PER_KEY for i in range(KEYS)}
    finally:
        spark.stop()


def wait_committed(proc, out: Path, at_least: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not ((out / "sums").exists() and len(read_committed(out / "sums")) >= at_least):
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        assert time.monotonic() < deadline, f"not {at_least} committed records in {timeout} s"
        time.sleep(0.2)  # polling interval of the condition above


def test_killing_a_worker_host_whole_recovers_exactly_once(spark_hosts: SparkHosts,
                                                           tmp_path: Path) -> None:
    """Fault 1: SIGKILL every process of one worker host (its Spark worker daemon, the
    executor and the jstorm worker in it). Spark reschedules the barrier stage onto the
    other host; the Topology Master rolls back to the last checkpoint."""
    out = tmp_path / "out"
    topo = topology_file(tmp_path / "kill.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=600)
    proc = spark_hosts.driver_run(topo)
    try:
        wait_committed(proc, out, 1000)
        assert spark_hosts.hosts.pids("worker1"), "nothing ran on worker1"
        killed = spark_hosts.hosts.kill_host("worker1")
        assert killed >= 2  # at least the worker daemon and its executor
        out_text = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        spark_hosts.daemons["worker1"] = start_worker(spark_hosts, "worker1")
        wait_spark_workers(spark_hosts.hosts, 2, 60)
    assert check_windowed(out, KEYS, PER_KEY) == ""
    assert "recover" in out_text.lower() or "restart" in out_text.lower(), out_text[-2000:]


def test_a_partitioned_worker_host_is_fenced_and_the_job_recovers(spark_hosts: SparkHosts,
                                                                 tmp_path: Path) -> None:
    """Fault 2: worker2's link goes down for longer than the heartbeat timeout, then comes
    back. The job recovers without it; whatever the cut-off side does meanwhile or after
    the heal is of an old generation and commits nothing."""
    out = tmp_path / "out"
    topo = topology_file(tmp_path / "partition.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=600, worker_timeout_ms=3000)
    proc = spark_hosts.driver_run(topo, "--spark-conf", "spark.network.timeout=10s",
                                  "--spark-conf", "spark.network.timeoutInterval=5s",
                                  "--spark-conf", "spark.executor.heartbeatInterval=2s")
    try:
        wait_committed(proc, out, 1000)
        before = len(read_committed(out / "sums"))
        with spark_hosts.hosts.partitioned("worker2"):
            # past the TM's heartbeat timeout and Spark's worker timeout, output goes on
            wait_committed(proc, out, before + 1500, timeout=120)
        out_text = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        spark_hosts.hosts.kill_host("worker2")  # its daemon may be half-alive: start anew
        spark_hosts.daemons["worker2"] = start_worker(spark_hosts, "worker2")
        wait_spark_workers(spark_hosts.hosts, 2, 60)
    assert check_windowed(out, KEYS, PER_KEY) == ""
    assert "recover" in out_text.lower() or "restart" in out_text.lower(), out_text[-2000:]


def test_a_partitioned_storage_host_delays_checkpoints_and_loses_nothing(
        spark_hosts: SparkHosts, tmp_path: Path) -> None:
    """Fault 3: the checkpoint storage is cut off for a few seconds. Checkpoints fail (or
    wait), then resume; the job drains exactly once."""
    out = tmp_path / "out"
    topo = topology_file(tmp_path / "storage.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=600, state_backend_timeout_ms=2000)
    proc = spark_hosts.driver_run(topo)
    try:
        wait_committed(proc, out, 1000)
        with spark_hosts.hosts.partitioned("storage"):
            committed = len(read_committed(out / "sums"))
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:  # the outage lasts 4 s
                assert proc.poll() is None
                time.sleep(0.2)
            # no checkpoint can complete without its storage: nothing new was committed
            # beyond what was already in flight
            stalled = len(read_committed(out / "sums"))
        finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert stalled - committed <= 600, "checkpoints completed while the storage was cut off"
    assert check_windowed(out, KEYS, PER_KEY) == ""
