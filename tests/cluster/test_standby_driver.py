"""Fault 4: the driver host dies, and the Topology Master with it (issue 27). Two
``jstorm run --ha`` drivers on their own hosts elect a leader through ZooKeeper on a
host of its own; every process of the leader's host is SIGKILLed mid-run; the standby
driver takes the run over with a new Spark application and drains it, every key exactly
once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jstormpy import read_committed
from jstormpy.cli.ha import LOST_EXIT_CODE
from jstormpy.testing.servers.zookeeper import ZooKeeperServer, find_zookeeper
from tests.cluster.conftest import SparkHosts
from tests.cluster.topologies import check_windowed, topology_file
from tests.ha.conftest import Launcher
from tests.ha.topologies import committed_parts

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

KEYS, PER_KEY = 6, 1500
SESSION_TIMEOUT_S = 10.0  # a loaded machine starting JVMs: a shorter session can lapse
# Spark standalone gives an application every core (4 here) by default; the dead
# driver's application keeps them until the master reaps it, and the standby's new
# application must get executors meanwhile (docs/cluster.md).
CORES_MAX = ("--spark-conf", "spark.cores.max=2")


def test_killing_the_driver_host_hands_the_run_to_the_standby_driver(
        spark_hosts: SparkHosts, tmp_path: Path) -> None:
    if find_zookeeper() is None:
        pytest.fail("Debian's zookeeper is not installed (scripts/setup.sh installs it)")
    hosts = spark_hosts.hosts
    out = tmp_path / "out"
    topo = topology_file(tmp_path / "standby.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=600)
    with ZooKeeperServer(tick_ms=500, host=hosts.address("zk"),
                         command=lambda argv: hosts.command("zk", argv)) as zk:
        extra = ("--ha", zk.url("/jstorm"), "--ha-session-timeout", str(SESSION_TIMEOUT_S),
                 *CORES_MAX)
        a = Launcher("driver", spark_hosts.driver_run(
            topo, *extra, jstorm_home=tmp_path / "home-a", host="driver"))
        b: Launcher | None = None
        try:
            a.wait_for(r"ha: leader; starting a fresh run", 180)
            b = Launcher("driver2", spark_hosts.driver_run(
                topo, *extra, jstorm_home=tmp_path / "home-b", host="driver2"))
            b.wait_for(r"ha: standby; .* leads", 180)
            deadline = time.monotonic() + 240
            while not ((out / "sums").exists() and len(read_committed(out / "sums")) >= 1000):
                assert a.proc.poll() is None, a.output()[-4000:]
                assert time.monotonic() < deadline, \
                    f"the leader committed too little output:\n{a.output()[-4000:]}"
                time.sleep(0.2)  # polling interval of the condition above
            before = set(committed_parts(out / "sums"))
            assert hosts.kill_host("driver") >= 1
            killed = time.monotonic()
            took_over = b.wait_for(r"ha: leader; taking over run", 120)
            while not set(committed_parts(out / "sums")) - before:
                assert b.proc.poll() is None, b.output()[-4000:]
                assert time.monotonic() - killed < 300, \
                    f"no new output after the takeover:\n{b.output()[-4000:]}"
                time.sleep(0.1)  # polling interval of the condition above
            resumed = time.monotonic()
            assert b.finish(400) == 0, b.output()[-4000:]
        finally:
            hosts.kill_host("driver")
            hosts.kill_host("driver2")
            for launcher in (a, b):
                if launcher is not None:
                    launcher.close()
    print(f"\ndriver host killed (session timeout {SESSION_TIMEOUT_S} s): standby leads after "
          f"{took_over - killed:.1f} s, first new committed output after "
          f"{resumed - killed:.1f} s")
    assert a.proc.returncode != LOST_EXIT_CODE  # it died with its host, it did not step down
    assert "ha: the run ended" in b.output()
    assert check_windowed(out, KEYS, PER_KEY) == ""
