"""A real ZooKeeper server for tests and examples (Debian's ``zookeeper``), in a temp dir.

Standalone (``ZooKeeperServerMain``) on 127.0.0.1 on a free port, with a short tick so
that tests can use session timeouts of a few seconds (ZooKeeper allows sessions between
2 and 20 ticks). ``stop()`` then ``start()`` keeps the data (snapshots and the
transaction log live in the temp dir).

Example:
    >>> with ZooKeeperServer() as zk:  # doctest: +SKIP
    ...     url = zk.url("/jstorm")       # zk://127.0.0.1:PORT/jstorm, for --ha
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jstormpy.api.errors import JStormError
from jstormpy.testing.servers.process import ServerProcess

__all__ = ["ZOOKEEPER_JAR", "ZooKeeperServer", "find_zookeeper"]

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
"""Debian's server jar; its manifest's Class-Path names the libraries it needs."""


def find_zookeeper() -> tuple[str, str] | None:
    """``(java, jar)`` when Java and Debian's ``zookeeper`` package are installed, else
    None."""
    java = shutil.which("java")
    if java is None or not Path(ZOOKEEPER_JAR).exists():
        return None
    return java, ZOOKEEPER_JAR


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ruok(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


class ZooKeeperServer(ServerProcess):
    """A throw-away standalone ZooKeeper; ``start()``/``stop()`` may be repeated.

    Args:
        tick_ms: ZooKeeper's tick; sessions may last 2 to 20 ticks (default 250 ms:
            0.5 s to 5 s, so a test sees a session expire within seconds).
        host: The address to listen on (reachable from this process).
        command: Wraps the server's argv, e.g. to run it on a network-namespace host
            (``HostCluster.command``).
    """

    def __init__(self, tick_ms: int = 250, host: str = "127.0.0.1",
                 command: Callable[[list[str]], list[str]] | None = None) -> None:
        found = find_zookeeper()
        if found is None:
            raise JStormError("ZooKeeper not found: install Debian's 'zookeeper' package "
                              f"(and Java); {ZOOKEEPER_JAR} is its server jar "
                              "(scripts/setup.sh installs it)")
        self.java, self.jar = found
        self.tick_ms = tick_ms
        self.host = host
        self.command = command or (lambda argv: argv)
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="jstorm-zk-"))
        (self.root / "data").mkdir()
        (self.root / "zoo.cfg").write_text(
            f"tickTime={tick_ms}\n"
            f"dataDir={self.root / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,stat,mntr\n")
        (self.root / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.root / 'zookeeper.log'}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d %p %c{1}: %m%n\n")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        """``HOST:PORT`` (a kazoo ``hosts`` string)."""
        return f"{self.host}:{self.port}"

    def url(self, path: str = "/jstorm") -> str:
        """``zk://127.0.0.1:PORT/path``: what ``jstorm run --ha`` takes."""
        return f"zk://{self.hosts}/{path.strip('/')}"

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and wait until it answers ``ruok``."""
        self.proc = subprocess.Popen(self.command(
            [self.java, "-Xmx256m", f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}",
             "-Dzookeeper.jmx.log4j.disable=true", "-cp", self.jar,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.root / "zoo.cfg")]),
            stdout=open(self.root / "stdout.log", "ab"),  # noqa: SIM115 - the child's
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not _ruok(self.host, self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise JStormError(f"ZooKeeper on port {self.port} did not start: see "
                                  f"{self.root / 'zookeeper.log'} and "
                                  f"{self.root / 'stdout.log'}")
            time.sleep(0.05)  # polling interval of the readiness probe above
