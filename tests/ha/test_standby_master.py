"""A standby Topology Master elected through a real ZooKeeper (issue 27): two
``jstorm run --ha`` launchers, each its own process group with its own JSTORM_HOME (its
"host"), sharing the checkpoint store and the output directory.

- the leader's process group is SIGKILLed mid-run: the standby takes the run over and
  drains it, every key exactly once; the time from the kill to the first new committed
  output is printed;
- the leader's process group is frozen (SIGSTOP) past the ZooKeeper session timeout:
  the standby takes over; the old leader, thawed, commits nothing and exits 3.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from jstormpy.cli_ha import LOST_EXIT_CODE
from jstormpy.connectors.file_parts import read_committed
from jstormpy.state_backends.file import FileBackend
from tests.ha.conftest import SESSION_TIMEOUT_S, Launcher
from tests.ha.topologies import check_sums, committed_parts, topology_file

pytestmark = pytest.mark.slow

KEYS = 6
PER_KEY = 1500
RATE = 250.0  # events/s per spout task: about 18 s of input


def _start_pair(tmp_path: Path, zookeeper, launchers: list[Launcher]) -> tuple[
        Launcher, Launcher, Path, str]:
    out = tmp_path / "out"
    store = f"file://{tmp_path / 'checkpoints'}"
    topo = topology_file(tmp_path / "ha_sums.py", out, store, KEYS, PER_KEY, RATE)
    url = zookeeper.url("/jstorm")
    a = Launcher("A", topo, url, tmp_path / "host-a")
    launchers.append(a)
    a.wait_for(r"ha: leader; starting a fresh run", 120)
    b = Launcher("B", topo, url, tmp_path / "host-b")
    launchers.append(b)
    b.wait_for(r"ha: standby; .* leads", 120)
    return a, b, out, store


def _wait_output(out: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not committed_parts(out):
        assert time.monotonic() < deadline, "the leader committed no output"
        time.sleep(0.05)  # polling interval of the condition above


def test_standby_takes_over_when_the_leader_is_killed(tmp_path: Path, zookeeper,
                                                      launchers: list[Launcher]) -> None:
    a, b, out, _store = _start_pair(tmp_path, zookeeper, launchers)
    _wait_output(out, 120)
    a.signal_group(signal.SIGKILL)  # the leader's "host" dies: launcher, TM, workers
    killed = time.monotonic()
    before = set(committed_parts(out))
    took_over = b.wait_for(r"ha: leader; taking over run", 60)
    while not set(committed_parts(out)) - before:
        assert time.monotonic() - killed < 120, f"no new output; B:\n{b.output()}"
        time.sleep(0.02)  # polling interval of the condition above
    resumed = time.monotonic()
    assert b.finish(240) == 0, b.output()
    print(f"\nfailover (ZooKeeper session timeout {SESSION_TIMEOUT_S} s): standby leads "
          f"{took_over - killed:.2f} s after the SIGKILL, first new output after "
          f"{resumed - killed:.2f} s")
    assert "drained" in b.output(), b.output()
    problems = check_sums(read_committed(out), KEYS, PER_KEY)
    assert not problems, problems


def test_frozen_old_leader_commits_nothing_after_the_takeover(
        tmp_path: Path, zookeeper, launchers: list[Launcher]) -> None:
    a, b, out, store = _start_pair(tmp_path, zookeeper, launchers)
    _wait_output(out, 120)
    # every process of A's "host": a record produced by one of them in a checkpoint A had
    # not completed before the freeze would be output committed by a fenced leader
    a_pids = _group_pids(a.proc.pid)
    a.signal_group(signal.SIGSTOP)
    frozen = time.monotonic()
    completed_before = max(FileBackend(store).list_completed(), default=0)
    b.wait_for(r"ha: leader; taking over run", 60)
    thaw_after = SESSION_TIMEOUT_S + 1.0  # well past A's session (already expired)
    while time.monotonic() - frozen < thaw_after:
        time.sleep(0.05)  # the freeze lasts past the session timeout
    a.signal_group(signal.SIGCONT)
    assert a.finish(60) == LOST_EXIT_CODE, a.output()
    assert "lost the leadership" in a.output(), a.output()
    assert b.finish(240) == 0, b.output()
    problems = check_sums(read_committed(out), KEYS, PER_KEY)
    assert not problems, problems
    late = []
    for name, cid in committed_parts(out).items():
        if cid <= completed_before:
            continue
        for line in (out / name).read_text().splitlines():
            pid = json.loads(line)["pid"]
            if pid in a_pids:
                late.append((name, pid))
    assert not late, (f"output of A's processes {sorted(a_pids)} committed in checkpoints "
                      f"above {completed_before}, the last A completed before it froze: "
                      f"{late[:5]}; A:\n{a.output()}")


def _group_pids(pgid: int) -> set[int]:
    """Every process of a process group (launcher, zygote, TM, workers)."""
    import os

    import psutil

    pids = set()
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                pids.add(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return pids
