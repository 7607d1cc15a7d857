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
        deadline = time.monotonic() + 180
        while not ((out / "sums").exists() and len(read_committed(out / "sums")) > 1000):
            assert proc.poll() is None, proc.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "no committed output within 180 s"
            time.sleep(0.2)  # polling interval of the condition above
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
