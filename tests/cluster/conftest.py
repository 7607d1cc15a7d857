"""A Spark standalone cluster across network-namespace hosts (issue 27).

Hosts: ``master`` (the Spark master), ``worker1`` and ``worker2`` (a Spark worker daemon
each, 2 cores), ``storage`` (the WebHDFS test server holding the checkpoints),
``driver`` (where ``jstorm run --spark-master`` runs, so the Topology Master lives there),
``driver2`` (a standby driver, ``--ha``) and ``zk`` (ZooKeeper, started by the test that
elects through it).
Every process starts from the pyspark wheel's ``spark-class``; nothing is downloaded.

CI runs as root and must run these. Where namespaces cannot be made, the tests fail with
the reason, unless ``JSTORM_SKIP_CLUSTER=1`` says to skip them (a local choice).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jstormpy.testing.netns import HostCluster, NetnsUnavailableError, check_netns_available

HOSTS = ["master", "worker1", "worker2", "storage", "driver", "driver2", "zk"]
SPARK_PORT = 7077
WEBHDFS_PORT = 9870


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkHosts:
    """The running cluster and how to reach its parts."""

    hosts: HostCluster
    work: Path
    master_url: str
    hdfs_url: str
    env: dict[str, str]
    daemons: dict[str, subprocess.Popen]

    def driver_run(self, topology_file: Path, *extra: str, timeout: float = 300,
                   jstorm_home: Path | None = None, host: str = "driver") -> subprocess.Popen:
        """``jstorm run FILE --spark-master`` on a driver host (stdout/stderr piped)."""
        env = dict(self.env, SPARK_LOCAL_IP=self.hosts.address(host),
                   JSTORM_HOME=str(jstorm_home or self.work / "jstorm-home"),
                   PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "jstormpy.cli.main", "run", str(topology_file),
                "--spark-master", self.master_url, "--timeout", str(timeout), *extra]
        return self.hosts.popen(host, argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=self.work)


def wait_port(hosts: HostCluster, host: str, port: int, timeout: float, what: str) -> None:
    """Wait until ``host:port`` accepts connections (seen from the root namespace)."""
    deadline = time.monotonic() + timeout
    address = hosts.address(host)
    while True:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not listen on {address}:{port} "
                                     f"within {timeout:.0f} s") from None
            time.sleep(0.2)  # polling interval of the condition above


def wait_spark_workers(hosts: HostCluster, n: int, timeout: float) -> None:
    """Wait until the master's JSON status lists ``n`` ALIVE workers. A master that is
    listening but has not attached its JSON handler yet answers ``/json/`` with its HTML
    page: not yet, as a refused connection is."""
    import json
    import urllib.request

    url = f"http://{hosts.address('master')}:8080/json/"
    deadline = time.monotonic() + timeout
    alive = 0
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                workers = json.load(resp).get("workers", [])
            alive = sum(1 for w in workers if w.get("state") == "ALIVE")
            if alive >= n:
                return
        except (OSError, ValueError):  # not listening yet, or its HTML page (above)
            pass
        time.sleep(0.3)  # polling interval of the condition above
    raise AssertionError(f"{alive} of {n} Spark workers registered within {timeout:.0f} s")


def start_worker(cluster: SparkHosts, host: str) -> subprocess.Popen:
    """A Spark worker daemon on ``host`` (2 cores), registered with the master."""
    addr = cluster.hosts.address(host)
    env = dict(cluster.env, SPARK_LOCAL_IP=addr)
    log = open(cluster.work / f"{host}.log", "ab")  # noqa: SIM115 - closed with the process
    return cluster.hosts.popen(
        host, [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
               "--host", addr, "--cores", "2", "--memory", "2g",
               "--work-dir", str(cluster.work / f"{host}-work"), "--webui-port", "8081",
               cluster.master_url], env=env, stdout=log, stderr=subprocess.STDOUT)


def start_workers(cluster: SparkHosts, names: list[str], timeout: float = 60.0) -> None:
    """A Spark worker daemon on each host of ``names``, waited for until the master lists
    them ALIVE. Once in many CI runs both worker JVMs of the fixture stopped before their
    first log line and never registered (the master was up). Workers still missing after
    ``timeout`` are asked for a thread dump (SIGQUIT: the JVM writes it to its log, so the
    next occurrence shows where they hang), killed and started once more; a second
    timeout fails with the tails of their logs."""
    for attempt in (1, 2):
        for host in names:
            cluster.daemons[host] = start_worker(cluster, host)
        try:
            wait_spark_workers(cluster.hosts, len(names), timeout)
            return
        except AssertionError as exc:
            logs = {h: cluster.work / f"{h}.log" for h in names}
            sizes = {h: log.stat().st_size for h, log in logs.items()}
            for host in names:
                for pid in cluster.hosts.pids(host):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGQUIT)
            deadline = time.monotonic() + 10  # the dumps reach the logs
            while time.monotonic() < deadline and \
                    any(log.stat().st_size == sizes[h] for h, log in logs.items()):
                time.sleep(0.1)  # polling interval of the condition above
            for host in names:
                cluster.hosts.kill_host(host)
            tails = "\n".join(f"--- {h}.log:\n" + log.read_text(errors="replace")[-3000:]
                               for h, log in logs.items())
            if attempt == 2:
                raise AssertionError(f"{exc}, twice\n{tails}") from None
            print(tails, file=sys.stderr)
            warnings.warn(f"Spark workers not registered, started once more (their thread "
                          f"dumps are in the captured stderr): {exc}", stacklevel=2)


@pytest.fixture(scope="package")
def spark_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkHosts]:
    if os.environ.get("JSTORM_SKIP_CLUSTER") == "1":
        pytest.skip("JSTORM_SKIP_CLUSTER=1 skips the network-namespace cluster tests")
    try:
        check_netns_available()
    except NetnsUnavailableError as exc:
        pytest.fail(f"cannot build the test cluster: {exc} (JSTORM_SKIP_CLUSTER=1 skips)")
    work = tmp_path_factory.mktemp("cluster")
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_DRIVER")}
    env.update(SPARK_HOME=str(spark_home()), PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=str(repo), SPARK_LOG_DIR=str(work / "spark-logs"),
               SPARK_NO_DAEMONIZE="1",
               # a dead worker host is declared lost after 5 s instead of 60; the workers
               # heartbeat every timeout / 4, so they must be told it too (with their
               # default 60 s they heartbeat every 15 s and the master keeps dropping them)
               SPARK_MASTER_OPTS="-Dspark.worker.timeout=5",
               SPARK_WORKER_OPTS="-Dspark.worker.timeout=5")
    with HostCluster(HOSTS) as hosts:
        master_url = f"spark://{hosts.address('master')}:{SPARK_PORT}"
        cluster = SparkHosts(hosts, work, master_url,
                             f"hdfs://{hosts.address('storage')}:{WEBHDFS_PORT}", env, {})
        master_log = open(work / "master.log", "ab")  # noqa: SIM115
        cluster.daemons["master"] = hosts.popen(
            "master", [str(spark_home() / "bin" / "spark-class"),
                       "org.apache.spark.deploy.master.Master",
                       "--host", hosts.address("master"), "--port", str(SPARK_PORT),
                       "--webui-port", "8080"],
            env=dict(env, SPARK_LOCAL_IP=hosts.address("master")), stdout=master_log,
            stderr=subprocess.STDOUT)
        storage_log = open(work / "storage.log", "ab")  # noqa: SIM115
        cluster.daemons["storage"] = hosts.popen(
            "storage", [sys.executable, "-m", "jstormpy.testing.servers.webhdfs",
                        "--host", hosts.address("storage"), "--port", str(WEBHDFS_PORT),
                        "--root", str(work / "hdfs")],
            env=env, stdout=storage_log, stderr=subprocess.STDOUT)
        wait_port(hosts, "master", SPARK_PORT, 60, "the Spark master")
        wait_port(hosts, "storage", WEBHDFS_PORT, 30, "the WebHDFS server")
        start_workers(cluster, ["worker1", "worker2"])
        yield cluster
        for proc in cluster.daemons.values():
            proc.kill()
