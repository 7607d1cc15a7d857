"""``jstorm testing cluster up|down|list``: a cluster of hosts on this machine, to try
jstormpy across hosts (docs/cluster.md). Root only.

    jstorm testing cluster up                  # hosts master, worker1, worker2, driver
    jstorm testing cluster up --spark          # ... plus a Spark standalone cluster on them
    ip netns exec NAME-driver jstorm run FILE --spark-master spark://ADDR:7077
    jstorm testing cluster down NAME           # or --all

The hosts stay up after ``up`` returns, until ``down`` removes them (and kills every
process on them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from jstormpy.api.errors import JStormError
from jstormpy.testing.netns import STATE_DIR, HostCluster, recorded_clusters, remove_cluster

DEFAULT_HOSTS = "master,worker1,worker2,storage,driver"
SPARK_PORT = 7077
WEBHDFS_PORT = 9870


def _spark_class() -> str:
    try:
        import pyspark
    except ImportError as exc:
        raise JStormError("--spark needs pyspark (pip install pyspark): its wheel ships "
                          "spark-class") from exc
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _start_spark(cluster: HostCluster, workers: list[str]) -> str:
    """A Spark master on ``master`` and a worker daemon on each of ``workers``; its URL."""
    logs = STATE_DIR / cluster.name
    logs.mkdir(parents=True, exist_ok=True)
    spark_class = _spark_class()
    master = cluster.address("master")
    url = f"spark://{master}:{SPARK_PORT}"
    # a dead worker host is declared lost after 5 s instead of 60; the workers must know the
    # timeout too: they heartbeat every timeout / 4 (with their default 60 s, every 15 s,
    # and a master expecting one every 5 s drops them again and again)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_NO_DAEMONIZE="1",
               SPARK_MASTER_OPTS="-Dspark.worker.timeout=5",
               SPARK_WORKER_OPTS="-Dspark.worker.timeout=5")
    with open(logs / "master.log", "ab") as log:
        cluster.popen("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                 "--host", master, "--port", str(SPARK_PORT)],
                      env=dict(env, SPARK_LOCAL_IP=master), stdout=log,
                      stderr=subprocess.STDOUT)
    for host in workers:
        address = cluster.address(host)
        with open(logs / f"{host}.log", "ab") as log:
            cluster.popen(host, [spark_class, "org.apache.spark.deploy.worker.Worker",
                                 "--host", address, "--work-dir", str(logs / f"{host}-work"),
                                 url],
                          env=dict(env, SPARK_LOCAL_IP=address), stdout=log,
                          stderr=subprocess.STDOUT)
    return url


def _start_storage(cluster: HostCluster) -> str:
    """The WebHDFS test server on host ``storage``; the state-backend URI of its root."""
    logs = STATE_DIR / cluster.name
    logs.mkdir(parents=True, exist_ok=True)
    address = cluster.address("storage")
    with open(logs / "storage.log", "ab") as log:
        cluster.popen("storage", [sys.executable, "-m", "jstormpy.testing.servers.webhdfs",
                                  "--host", address, "--port", str(WEBHDFS_PORT),
                                  "--root", str(logs / "hdfs")],
                      stdout=log, stderr=subprocess.STDOUT)
    return f"hdfs://{address}:{WEBHDFS_PORT}/jstorm"


def cmd_up(args: argparse.Namespace) -> int:
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if args.spark and "master" not in hosts:
        raise JStormError("--spark needs a host named 'master' (see --hosts)")
    cluster = HostCluster(hosts, name=args.name).up()
    info = cluster.describe()
    if args.spark:
        info["spark_master"] = _start_spark(cluster, [h for h in hosts
                                                      if h.startswith("worker")])
    if "storage" in hosts:  # shared checkpoint storage: the WebHDFS test server
        info["state_backend"] = _start_storage(cluster)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"cluster {cluster.name}: bridge {cluster.bridge} ({cluster.gateway}/24)")
    for name, host in info["hosts"].items():
        print(f"  {name:10s} {host['address']:15s} ip netns exec {host['namespace']} ...")
    if "state_backend" in info:
        print(f"  checkpoints: WebHDFS test server, --state-backend {info['state_backend']}")
    if args.spark:
        print(f"  Spark master {info['spark_master']} (logs in {STATE_DIR / cluster.name})")
        if "driver" in hosts:
            backend = f" --state-backend {info['state_backend']}/NAME" \
                if "state_backend" in info else ""
            # executors of a non-local master run PYSPARK_PYTHON (default python3): here,
            # the Python that has jstormpy
            print(f"run a topology: ip netns exec {cluster.name}-driver env "
                  f"SPARK_LOCAL_IP={cluster.address('driver')} "
                  f"PYSPARK_PYTHON={sys.executable} jstorm run FILE "
                  f"--spark-master {info['spark_master']}{backend}")
    print(f"remove it: jstorm testing cluster down {cluster.name}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    names = list(recorded_clusters()) if args.all else [args.name]
    if not names or names == [None]:
        raise JStormError("name a cluster or pass --all (jstorm testing cluster list)")
    for name in names:
        remove_cluster(name)
        print(f"removed cluster {name}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    clusters = recorded_clusters()
    if not clusters:
        print("no host clusters on this machine")
    for name, record in clusters.items():
        print(f"{name}: hosts {', '.join(record['hosts'])} (made by pid {record['pid']})")
    return 0


def build_parser(prog: str = "jstorm testing cluster") -> argparse.ArgumentParser:
    """The command-line parser of ``jstorm testing cluster`` (exposed for docs tests)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="make the hosts (network namespaces on a bridge)")
    up.add_argument("--hosts", default=DEFAULT_HOSTS,
                    help=f"comma-separated host names (default: {DEFAULT_HOSTS})")
    up.add_argument("--name", default=None, help="the cluster's name (default: random)")
    up.add_argument("--spark", action="store_true",
                    help="start a Spark standalone master on 'master' and a worker daemon "
                         "on every host named worker*")
    up.add_argument("--json", action="store_true", help="print the hosts as JSON")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="kill every process on the hosts and remove them")
    down.add_argument("name", nargs="?", default=None, help="the cluster to remove")
    down.add_argument("--all", action="store_true", help="every cluster on this machine")
    down.set_defaults(func=cmd_down)
    sub.add_parser("list", help="the clusters made here").set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None, prog: str = "jstorm testing cluster") -> int:
    """Entry point of ``jstorm testing cluster``."""
    args = build_parser(prog).parse_args(argv)
    try:
        return int(args.func(args))
    except JStormError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
