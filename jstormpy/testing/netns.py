"""Hosts on one machine: Linux network namespaces on a private bridge (root only).

A :class:`HostCluster` makes one network namespace per host, each with its own address on a
bridge it creates, so processes started "on" a host bind and advertise a real, distinct
address, and a host can be cut off (its link down) or killed whole. It is how the test
suite runs a Spark standalone cluster across hosts (``tests/cluster/``) and what
``jstorm testing cluster up|down`` gives a user to try one.

Addresses come from ``10.213.0.0/16``, used only inside these namespaces and the bridge:
nothing is routed off the machine. Everything is removed by :meth:`HostCluster.down`
(also after a failed test; the namespaces' processes are killed first), and a cluster is
recorded under its name in ``/run/jstormpy-netns/`` so ``jstorm testing cluster down``
removes one whose creator died.

    with HostCluster(["master", "worker1", "worker2", "driver"]) as cluster:
        proc = cluster.popen("worker1", ["python", "-c", "print('hi')"])
        cluster.partition("worker1")   # its link down: no packet in or out
        cluster.heal("worker1")
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jstormpy.api.errors import JStormError

NETWORK = "10.213"
"""The /16 the clusters take their /24 from (private, used only inside them)."""
STATE_DIR = Path(os.environ.get("JSTORM_NETNS_STATE", "/run/jstormpy-netns"))


class NetnsUnavailableError(JStormError):
    """This machine cannot make network namespaces (not root, or no ``ip``)."""


def check_netns_available() -> None:
    """Raise :class:`NetnsUnavailableError`, naming what is missing, unless namespaces
    can be made here."""
    if os.geteuid() != 0:
        raise NetnsUnavailableError("network-namespace hosts need root (ip netns add); "
                                    "run as root or skip these tests")
    if shutil.which("ip") is None:
        raise NetnsUnavailableError("network-namespace hosts need the `ip` command "
                                    "(Debian: apt-get install iproute2)")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise JStormError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


@dataclass(frozen=True)
class Host:
    """One host of a cluster: its namespace, its address and the host end of its link."""

    name: str
    namespace: str
    address: str
    link: str  # the veth end on the bridge (in the root namespace)


class HostCluster:
    """Named hosts as network namespaces on one bridge; see the module docstring.

    Args:
        hosts: Host names (letters, digits, ``-``), at most 200.
        name: The cluster's name (default: random); its namespaces are ``NAME-HOST``.
    """

    def __init__(self, hosts: Sequence[str], name: str | None = None,
                 subnet: int | None = None) -> None:
        if not hosts or len(hosts) > 200 or len(set(hosts)) != len(hosts):
            raise JStormError(f"a host cluster needs 1..200 distinct host names, got {hosts}")
        for h in hosts:
            if not h.replace("-", "").isalnum():
                raise JStormError(f"host name {h!r}: use letters, digits and '-'")
        self.name = name or f"js{secrets.token_hex(3)}"
        token = self.name[-6:]
        self.bridge = f"jb{token}"
        self.subnet = self._free_subnet() if subnet is None else subnet
        self.gateway = f"{NETWORK}.{self.subnet}.1"
        self.hosts = {h: Host(h, f"{self.name}-{h}", f"{NETWORK}.{self.subnet}.{10 + i}",
                              f"jv{token}{i}") for i, h in enumerate(hosts)}
        self._up = False

    # -- lifecycle -----------------------------------------------------------------------
    def up(self) -> HostCluster:
        """Create the bridge, the namespaces and their links."""
        check_netns_available()
        self._record()
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in self.hosts.values():
                _ip("netns", "add", host.namespace)
                _ip("-n", host.namespace, "link", "set", "lo", "up")
                _ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0",
                    "netns", host.namespace)
                _ip("link", "set", host.link, "master", self.bridge)
                _ip("link", "set", host.link, "up")
                _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
                _ip("-n", host.namespace, "link", "set", "eth0", "up")
        except BaseException:
            self.down()
            raise
        self._up = True
        return self

    def down(self) -> None:
        """Kill every process in the namespaces, remove them and the bridge (idempotent)."""
        for host in self.hosts.values():
            self.kill_host(host.name)
            _ip("netns", "del", host.namespace, check=False)
        _ip("link", "del", self.bridge, check=False)
        (STATE_DIR / f"{self.name}.json").unlink(missing_ok=True)
        self._up = False

    def __enter__(self) -> HostCluster:
        return self.up()

    def __exit__(self, *exc: Any) -> None:
        self.down()

    # -- using hosts ---------------------------------------------------------------------
    def address(self, host: str) -> str:
        """The host's address on the bridge."""
        return self._host(host).address

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self._host(host).namespace, *argv]

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` on ``host`` (its own process group, so it can be killed whole)."""
        kwargs.setdefault("start_new_session", True)
        return subprocess.Popen(self.command(host, argv), **kwargs)

    def pids(self, host: str) -> list[int]:
        """Every process running in ``host``'s namespace."""
        proc = _ip("netns", "pids", self._host(host).namespace, check=False)
        return [int(p) for p in proc.stdout.split()]

    def kill_host(self, host: str) -> int:
        """SIGKILL every process of ``host`` (the host dies); returns how many."""
        killed = 0
        for _ in range(5):  # a dying parent may fork once more
            pids = self.pids(host)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.05)  # the kernel reaps them; then look again
        return killed

    def partition(self, host: str) -> None:
        """Cut ``host`` off: its link goes down, no packet in or out."""
        _ip("link", "set", self._host(host).link, "down")

    def heal(self, host: str) -> None:
        """Bring ``host``'s link back up."""
        _ip("link", "set", self._host(host).link, "up")

    @contextmanager
    def partitioned(self, host: str) -> Iterator[None]:
        """``host`` is cut off for the ``with`` block."""
        self.partition(host)
        try:
            yield
        finally:
            self.heal(host)

    def describe(self) -> dict[str, Any]:
        """Name, bridge and hosts with their addresses (``jstorm testing cluster up``)."""
        return {"name": self.name, "bridge": self.bridge, "gateway": self.gateway,
                "hosts": {h.name: {"namespace": h.namespace, "address": h.address}
                          for h in self.hosts.values()}}

    # -- helpers -------------------------------------------------------------------------
    def _host(self, host: str) -> Host:
        try:
            return self.hosts[host]
        except KeyError:
            raise JStormError(f"no host {host!r} in cluster {self.name} "
                              f"(hosts: {', '.join(self.hosts)})") from None

    def _record(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / f"{self.name}.json").write_text(json.dumps(
            {"hosts": list(self.hosts), "subnet": self.subnet, "pid": os.getpid()}))

    @classmethod
    def attach(cls, name: str) -> HostCluster:
        """The recorded cluster ``name`` (made by another process, e.g. ``jstorm testing
        cluster up``), to use or remove."""
        record = recorded_clusters().get(name)
        if record is None:
            raise JStormError(f"no host cluster {name!r} on this machine "
                              f"(known: {', '.join(recorded_clusters()) or 'none'})")
        cluster = cls(record["hosts"], name=name, subnet=record.get("subnet"))
        cluster._up = True
        return cluster

    @staticmethod
    def _free_subnet() -> int:
        used = _ip("-4", "-o", "addr", "show", check=False).stdout
        for _ in range(200):
            candidate = secrets.randbelow(250) + 1
            if f" {NETWORK}.{candidate}." not in used:
                return candidate
        raise JStormError(f"no free /24 left in {NETWORK}.0.0/16")


def recorded_clusters() -> dict[str, dict[str, Any]]:
    """Clusters made on this machine and not yet removed: name -> record."""
    if not STATE_DIR.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(STATE_DIR.glob("*.json"))}


def remove_cluster(name: str) -> None:
    """Remove a recorded cluster by name (its creator may be gone)."""
    HostCluster.attach(name).down()
