"""A real ZooKeeper server (Debian's ``zookeeper``) for the standby Topology Master tests,
and ``jstorm run --ha`` launchers as real process groups."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jstormpy.testing.servers.zookeeper import ZooKeeperServer, find_zookeeper

SESSION_TIMEOUT_S = 3.0  # within the test server's 0.5..5 s (250 ms ticks)


@pytest.fixture
def zookeeper() -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper in a temp dir, on a free port."""
    if find_zookeeper() is None:
        pytest.skip("Debian's zookeeper is not installed (run scripts/setup.sh as root)")
    with ZooKeeperServer() as server:
        yield server


class Launcher:
    """A ``jstorm run --ha`` process (its own process group, "its host") whose output is
    collected line by line with the monotonic time of each."""

    def __init__(self, name: str, proc: subprocess.Popen, home: Path | None = None) -> None:
        self.name = name
        self.home = home
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def start(cls, name: str, topology_file: Path, ha_url: str, home: Path,
              *extra: str) -> Launcher:
        """``jstorm run FILE --ha URL`` here, with its own JSTORM_HOME."""
        env = dict(os.environ, JSTORM_HOME=str(home), PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "jstormpy.cli.main", "run", str(topology_file),
                "--ha", ha_url, "--ha-session-timeout", str(SESSION_TIMEOUT_S),
                "--timeout", "240", *extra]
        return cls(name, subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True), home)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip()))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> float:
        """The time the first line matching ``pattern`` was printed (waits for it)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for t, line in self.lines:
                    if regex.search(line):
                        return t
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reading()):
                    raise AssertionError(f"{self.name}: no line matching {pattern!r} within "
                                         f"{timeout} s; output:\n{self.output()}")
                self.cond.wait(min(left, 0.5))

    def _reading(self) -> bool:
        return self.proc.stdout is not None and not self.proc.stdout.closed and \
            self.proc.poll() is None

    def output(self) -> str:
        return "\n".join(line for _t, line in self.lines)

    def signal_group(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        time.sleep(0)  # let the reader take the last lines
        return code

    def close(self) -> None:
        if self.proc.poll() is None or _group_alive(self.proc.pid):
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(30)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def launchers() -> Iterator[list[Launcher]]:
    """Launchers a test starts; every process group is killed afterwards."""
    started: list[Launcher] = []
    yield started
    for launcher in started:
        launcher.close()
