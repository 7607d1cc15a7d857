"""``jstorm testing cluster up --spark`` gives a user hosts with a Spark standalone cluster
and shared checkpoint storage; an example runs across them; ``down`` removes everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jstormpy.testing.netns import HostCluster
from tests.cluster.conftest import wait_spark_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def jstorm(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jstormpy.cli.main", *args], capture_output=True,
                          text=True, timeout=kwargs.pop("timeout", 120), check=False, **kwargs)


def test_cluster_up_runs_an_example_across_hosts_and_down_removes_it(tmp_path: Path) -> None:
    if os.environ.get("JSTORM_SKIP_CLUSTER") == "1":
        pytest.skip("JSTORM_SKIP_CLUSTER=1 skips the network-namespace cluster tests")
    up = jstorm("testing", "cluster", "up", "--spark", "--json")
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    name = info["name"]
    try:
        cluster = HostCluster.attach(name)
        assert {h: cluster.address(h) for h in info["hosts"]} == \
            {h: e["address"] for h, e in info["hosts"].items()}
        wait_spark_workers(cluster, 2, 90)
        run = subprocess.run(
            cluster.command("driver", [
                sys.executable, "-m", "jstormpy.cli.main", "run", str(REPO / "examples/wordcount.py"),
                "--spark-master", info["spark_master"],
                "--state-backend", info["state_backend"] + "/wordcount", "--timeout", "240"]),
            env=dict(os.environ, SPARK_LOCAL_IP=info["hosts"]["driver"]["address"],
                     PYSPARK_PYTHON=sys.executable, JSTORM_HOME=str(tmp_path / "home")),
            capture_output=True, text=True, timeout=300, check=False)
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        assert "drained" in run.stdout
    finally:
        down = jstorm("testing", "cluster", "down", name)
    assert down.returncode == 0, down.stderr
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                check=True).stdout
    assert name not in namespaces
    listed = jstorm("testing", "cluster", "list")
    assert name not in listed.stdout
