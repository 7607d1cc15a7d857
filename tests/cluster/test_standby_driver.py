"""The driver host, and so the Topology Master, lost (issue 27). Two ``jstorm run --ha``
drivers on their own hosts elect a leader through ZooKeeper on a host of its own; the
standby driver takes the run over with a new Spark application and drains it, every key
exactly once.

- fault 4: every process of the leader's host is SIGKILLed mid-run;
- the leader's host is partitioned (its link down) for longer than the ZooKeeper session,
  then healed: the old leader, back on the network, commits nothing, and the checkpoint
  store holds no commit point of its epoch written after the cut.

Both tests share one ZooKeeper (on host ``zk``) and the package's Spark cluster.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from jstormpy import read_committed
from jstormpy.cli.ha import LOST_EXIT_CODE
from jstormpy.leader_lease import LEASE_FRACTION
from jstormpy.state_backends import open_backend
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


@pytest.fixture(scope="module")
def zookeeper(spark_hosts: SparkHosts) -> Iterator[ZooKeeperServer]:
    """ZooKeeper on host ``zk`` (ticks of 500 ms: sessions up to 10 s)."""
    if find_zookeeper() is None:
        pytest.fail("Debian's zookeeper is not installed (scripts/setup.sh installs it)")
    hosts = spark_hosts.hosts
    with ZooKeeperServer(tick_ms=500, host=hosts.address("zk"),
                         command=lambda argv: hosts.command("zk", argv)) as zk:
        yield zk


class DriverPair:
    """The leader (on host ``driver``) and the standby (on ``driver2``) of one run."""

    def __init__(self, cluster: SparkHosts, zk: ZooKeeperServer, tmp_path: Path,
                 topo: Path, root: str) -> None:
        self.cluster = cluster
        self.extra = ("--ha", zk.url(root), "--ha-session-timeout", str(SESSION_TIMEOUT_S),
                      *CORES_MAX)
        self.tmp_path = tmp_path
        self.topo = topo
        self.a: Launcher | None = None
        self.b: Launcher | None = None

    def start(self) -> tuple[Launcher, Launcher]:
        self.a = Launcher("driver", self.cluster.driver_run(
            self.topo, *self.extra, jstorm_home=self.tmp_path / "home-a", host="driver"))
        self.a.wait_for(r"ha: leader; starting a fresh run", 180)
        self.b = Launcher("driver2", self.cluster.driver_run(
            self.topo, *self.extra, jstorm_home=self.tmp_path / "home-b", host="driver2"))
        self.b.wait_for(r"ha: standby; .* leads", 180)
        return self.a, self.b

    def close(self) -> None:
        self.cluster.hosts.heal("driver")
        self.cluster.hosts.kill_host("driver")
        self.cluster.hosts.kill_host("driver2")
        for launcher in (self.a, self.b):
            if launcher is not None:
                launcher.close()


def wait_leader_output(a: Launcher, out: Path, at_least: int = 1000) -> None:
    deadline = time.monotonic() + 240
    while not ((out / "sums").exists() and len(read_committed(out / "sums")) >= at_least):
        assert a.proc.poll() is None, a.output()[-4000:]
        assert time.monotonic() < deadline, \
            f"the leader committed too little output:\n{a.output()[-4000:]}"
        time.sleep(0.2)  # polling interval of the condition above


def wait_new_output(b: Launcher, out: Path, before: set[str], since: float) -> float:
    """The time the new leader's first committed part file appeared."""
    while not set(committed_parts(out / "sums")) - before:
        assert b.proc.poll() is None, b.output()[-4000:]
        assert time.monotonic() - since < 300, \
            f"no new output after the takeover:\n{b.output()[-4000:]}"
        time.sleep(0.1)  # polling interval of the condition above
    return time.monotonic()


def wait_application_gone(cluster: SparkHosts, app_id: str, timeout: float) -> None:
    """Wait until the Spark master no longer lists ``app_id`` as active."""
    url = f"http://{cluster.hosts.address('master')}:8080/json/"
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(url, timeout=5) as resp:
            active = [a["id"] for a in json.load(resp).get("activeapps", [])]
        if app_id not in active:
            return
        assert time.monotonic() < deadline, f"{app_id} still active: {active}"
        time.sleep(0.5)  # polling interval of the condition above


def test_killing_the_driver_host_hands_the_run_to_the_standby_driver(
        spark_hosts: SparkHosts, zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    hosts = spark_hosts.hosts
    out = tmp_path / "out"
    topo = topology_file(tmp_path / "standby.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=600)
    pair = DriverPair(spark_hosts, zookeeper, tmp_path, topo, "/jstorm-kill")
    try:
        a, b = pair.start()
        wait_leader_output(a, out)
        before = set(committed_parts(out / "sums"))
        assert hosts.kill_host("driver") >= 1
        killed = time.monotonic()
        took_over = b.wait_for(r"ha: leader; taking over run", 120)
        resumed = wait_new_output(b, out, before, killed)
        assert b.finish(400) == 0, b.output()[-4000:]
    finally:
        pair.close()
    print(f"\ndriver host killed (session timeout {SESSION_TIMEOUT_S} s): standby leads after "
          f"{took_over - killed:.1f} s, first new committed output after "
          f"{resumed - killed:.1f} s")
    assert a.proc.returncode != LOST_EXIT_CODE  # it died with its host, it did not step down
    assert "ha: the run ended" in b.output()
    assert check_windowed(out, KEYS, PER_KEY) == ""


def test_a_partitioned_leader_host_is_deposed_and_commits_nothing_after_the_heal(
        spark_hosts: SparkHosts, zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """The leader's host is cut off (its link down: from ZooKeeper, the Spark cluster and
    the storage alike) past the ZooKeeper session; the standby takes over on Spark; then
    the link comes back. The old leader's launcher lost its lease during the cut (its TM
    and the Spark application's driver go with it) and exits 3; no commit point of its
    epoch is written after the cut, and the output holds nothing without a commit point."""
    hosts = spark_hosts.hosts
    out = tmp_path / "out"
    # every checkpoint kept: the test reads each commit point's run epoch afterwards
    topo = topology_file(tmp_path / "partition.py", out, spark_hosts.hdfs_url, KEYS, PER_KEY,
                         rate=600, checkpoints_retained=100_000)
    pair = DriverPair(spark_hosts, zookeeper, tmp_path, topo, "/jstorm-partition")
    try:
        a, b = pair.start()
        wait_leader_output(a, out)
        before = set(committed_parts(out / "sums"))
        hosts.partition("driver")
        cut, cut_wall = time.monotonic(), time.time()
        took_over = b.wait_for(r"ha: leader; taking over run", 120)
        # not before the old leader's lease (a share of its session) has run out
        assert took_over - cut > SESSION_TIMEOUT_S * LEASE_FRACTION, took_over - cut
        hosts.heal("driver")
        healed = time.monotonic()
        resumed = wait_new_output(b, out, before, cut)
        assert a.finish(180) == LOST_EXIT_CODE, a.output()[-4000:]
        assert b.finish(400) == 0, b.output()[-4000:]
        # back on the network, the old leader's Spark application (its executors, and the
        # jstorm workers of the old epoch in them) is removed by the Spark master
        app = re.search(r"spark: master \S+, application (\S+)", a.output())
        assert app is not None, a.output()[-4000:]
        wait_application_gone(spark_hosts, app.group(1), 120)
    finally:
        pair.close()
    print(f"\ndriver host partitioned (session timeout {SESSION_TIMEOUT_S} s): standby leads "
          f"after {took_over - cut:.1f} s, healed at {healed - cut:.1f} s, first new "
          f"committed output after {resumed - cut:.1f} s; the old leader's last line at "
          f"{a.lines[-1][0] - cut:.1f} s: {a.lines[-1][1][:120]}")
    assert "ha: lost the leadership" in a.output(), a.output()[-4000:]
    assert "ha: the run ended" in b.output()
    assert check_windowed(out, KEYS, PER_KEY) == ""
    # the checkpoint store: which epoch wrote each commit point
    taken = re.search(r"taking over run (\S+) \(epoch (\d+)", b.output())
    assert taken is not None
    job_id, old_epoch = taken.group(1), int(taken.group(2))
    backend = open_backend(f"{spark_hosts.hdfs_url}/jstorm/partition")
    try:
        metas = {cid: backend.read_metadata(cid) for cid in backend.list_completed()}
    finally:
        backend.close()
    epochs = {cid: (m["run"]["job_id"], m["run"]["epoch"]) for cid, m in metas.items()}
    # one run; the old epoch and the new leader's (a TM it restarted would add another)
    assert {j for j, _e in epochs.values()} == {job_id}, epochs
    old = [cid for cid, (_j, e) in epochs.items() if e == old_epoch]
    new = [cid for cid, (_j, e) in epochs.items() if e > old_epoch]
    assert old and new and len(old) + len(new) == len(epochs), epochs
    assert max(old) < min(new), f"commit points of the old epoch above the new one's: {epochs}"
    late = {cid: metas[cid]["completed_at"] - cut_wall for cid in old
            if metas[cid]["completed_at"] > cut_wall}
    assert not late, f"old-epoch checkpoints completed after the cut (s after): {late}"
    # the output: every committed part belongs to a checkpoint with a commit point
    parts = {*committed_parts(out / "sums").values(), *committed_parts(out / "windows").values()}
    assert parts <= set(metas), f"output committed without a commit point: {parts - set(metas)}"
    print(f"commit points: epoch {old_epoch} #{min(old)}..#{max(old)} (the last "
          f"{cut_wall - metas[max(old)]['completed_at']:.1f} s before the cut), epoch "
          f"{old_epoch + 1}+ #{min(new)}..#{max(new)}")
