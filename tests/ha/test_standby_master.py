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
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from jstormpy.cli.ha import LOST_EXIT_CODE
from jstormpy.connectors.file_parts import read_committed
from jstormpy.state_backends.file import FileBackend
from tests.ha.conftest import SESSION_TIMEOUT_S, Launcher
from tests.ha.topologies import NAME, check_sums, committed_parts, topology_file
from tests.integration.paced_spout import release

pytestmark = pytest.mark.slow

KEYS = 6
PER_KEY = 4500
RATE = 250.0  # events/s per spout task: about 54 s of input (each test releases it once its
# scenario is over: under load a failover took long enough to meet the end of 18 s of input)
RELEASE = "release"  # once a test's scenario is over, the rest at full speed (paced_spout)


def _start_pair(tmp_path: Path, zookeeper, launchers: list[Launcher]) -> tuple[
        Launcher, Launcher, Path, str]:
    out = tmp_path / "out"
    store = f"file://{tmp_path / 'checkpoints'}"
    topo = topology_file(tmp_path / "ha_sums.py", out, store, KEYS, PER_KEY, RATE,
                         release_file=tmp_path / RELEASE)
    url = zookeeper.url("/jstorm")
    a = Launcher.start("A", topo, url, tmp_path / "host-a")
    launchers.append(a)
    a.wait_for(r"ha: leader; starting a fresh run", 120)
    b = Launcher.start("B", topo, url, tmp_path / "host-b")
    launchers.append(b)
    b.wait_for(r"ha: standby; .* leads", 120)
    return a, b, out, store


def _identity(launcher: Launcher) -> str:
    return f"{socket.gethostname()} pid={launcher.proc.pid}"


def _status(home: Path, *extra: str) -> str:
    """``jstorm status NAME`` on a launcher's "host" (its JSTORM_HOME)."""
    done = subprocess.run([sys.executable, "-m", "jstormpy.cli.main", "status", NAME, *extra],
                          env=dict(os.environ, JSTORM_HOME=str(home)), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _wait_output(out: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not committed_parts(out):
        assert time.monotonic() < deadline, "the leader committed no output"
        time.sleep(0.05)  # polling interval of the condition above


def test_standby_takes_over_when_the_leader_is_killed(tmp_path: Path, zookeeper,
                                                      launchers: list[Launcher]) -> None:
    a, b, out, _store = _start_pair(tmp_path, zookeeper, launchers)
    _wait_output(out, 120)
    # on the standby's host (no TM there): ZooKeeper's view
    before_kill = _status(tmp_path / "host-b", "--ha", zookeeper.url("/jstorm"))
    assert f"leader {_identity(a)}; standby {_identity(b)}" in before_kill, before_kill
    assert "recorded: running run" in before_kill and "epoch 1" in before_kill, before_kill
    # the leader's web UI shows the same, through HTTP
    ui = _ui_ha(tmp_path / "host-a", lambda ha: bool(ha["standby"]))
    assert (ui["leader"], ui["standby"]) == (_identity(a), [_identity(b)]), ui
    assert ui["epoch"] == 1 and ui["run"]["state"] == "running", ui
    a.signal_group(signal.SIGKILL)  # the leader's "host" dies: launcher, TM, workers
    killed = time.monotonic()
    before = set(committed_parts(out))
    took_over = b.wait_for(r"ha: leader; taking over run", 60)
    while not set(committed_parts(out)) - before:
        assert time.monotonic() - killed < 120, f"no new output; B:\n{b.output()}"
        time.sleep(0.02)  # polling interval of the condition above
    resumed = time.monotonic()
    after = _status(tmp_path / "host-b")  # the new leader's TM, and ZooKeeper's view
    assert f"leader {_identity(b)}; standby none" in after, after
    assert re.search(r"^run +\S+ epoch 2$", after, re.M), after
    ui = _ui_ha(tmp_path / "host-b", lambda ha: ha["leader"] == _identity(b))
    assert ui["standby"] == [] and ui["epoch"] == 2 and ui["run"]["epoch"] == 2, ui
    release(tmp_path / RELEASE)
    assert b.finish(240) == 0, b.output()
    print(f"\nfailover (ZooKeeper session timeout {SESSION_TIMEOUT_S} s): standby leads "
          f"{took_over - killed:.2f} s after the SIGKILL, first new output after "
          f"{resumed - killed:.2f} s")
    assert "drained" in b.output(), b.output()
    problems = check_sums(read_committed(out), KEYS, PER_KEY)
    assert not problems, problems


def _ui_ha(home: Path, ready: Callable[[dict], bool], timeout: float = 30) -> dict:
    """The ``ha`` part of a launcher's TM web UI (``GET /api/status``), with the TM's own
    epoch as ``epoch``, once ``ready`` holds; the page has the elements that show it."""
    run_dir = home / "runs" / NAME
    deadline = time.monotonic() + timeout
    while True:
        port = int((run_dir / "ui.port").read_text())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as r:
            status = json.load(r)
        ha = status.get("ha")
        if ha is not None and ready(ha):
            break
        assert time.monotonic() < deadline, f"the UI shows {ha!r}"
        time.sleep(0.2)  # polling interval of the condition above
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
        page = r.read().decode()
    assert all(f'id="{e}"' in page for e in ("ha", "ha-epoch", "ha-leader", "ha-standby"))
    return {**ha, "epoch": status["run"]["epoch"]}


def test_a_standby_exits_when_the_leader_drains_the_run(tmp_path: Path, zookeeper,
                                                       launchers: list[Launcher]) -> None:
    a, b, out, _store = _start_pair(tmp_path, zookeeper, launchers)
    release(tmp_path / RELEASE)  # the standby is up: the leader may drain at once
    assert a.finish(240) == 0, a.output()
    assert b.finish(60) == 0, b.output()
    assert "ha: the leader closed the run (drained)" in b.output(), b.output()
    # closing its own session at the end is not losing the leadership
    assert "lost the leadership" not in a.output(), a.output()
    assert "taking over" not in b.output()
    problems = check_sums(read_committed(out), KEYS, PER_KEY)
    assert not problems, problems
    # ZooKeeper's record of the run, from anywhere
    view = _status(tmp_path / "host-b", "--ha", zookeeper.url("/jstorm"))
    assert "recorded: drained run" in view and "leader none; standby none" in view, view


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
    release(tmp_path / RELEASE)
    assert b.finish(240) == 0, b.output()
    problems = check_sums(read_committed(out), KEYS, PER_KEY)
    assert not problems, problems
    late = _records_of(out, a_pids, above=completed_before)
    assert not late, (f"output of A's processes {sorted(a_pids)} committed in checkpoints "
                      f"above {completed_before}, the last A completed before it froze: "
                      f"{late[:5]}; A:\n{a.output()}")


def _group_pids(pgid: int) -> set[int]:
    """Every process of a process group (launcher, zygote, TM, workers)."""
    import psutil

    pids = set()
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                pids.add(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return pids


def test_leader_cut_off_from_zookeeper_stops_committing_before_the_takeover(
        tmp_path: Path, zookeeper, launchers: list[Launcher]) -> None:
    """Only the leader's launcher (its ZooKeeper session) freezes; its TM and workers run
    on, as on a host cut off from ZooKeeper but not from the storage. The TM's lease runs
    out before the session does: it stops committing before the standby can lead."""
    a, b, out, store = _start_pair(tmp_path, zookeeper, launchers)
    _wait_output(out, 120)
    a_pids = _group_pids(a.proc.pid) - {a.proc.pid}  # TM, workers (and the zygote)
    watch = _CompletedWatch(tmp_path / "host-a")
    os.kill(a.proc.pid, signal.SIGSTOP)
    took_over = b.wait_for(r"ha: leader; taking over run", 60)
    completed_at_takeover = max(FileBackend(store).list_completed(), default=0)
    time.sleep(1.0)  # a second of A's TM running on after the takeover, watched
    seen = watch.stop()
    os.kill(a.proc.pid, signal.SIGCONT)
    late_commit_points = [(round(t - took_over, 2), cid) for t, cid in seen
                          if t > took_over and cid > max((c for t2, c in seen
                                                          if t2 <= took_over), default=0)]
    assert not late_commit_points, (
        f"A's Topology Master completed checkpoints after B took over (s after, id): "
        f"{late_commit_points}")
    assert a.finish(60) == LOST_EXIT_CODE, a.output()
    release(tmp_path / RELEASE)
    assert b.finish(240) == 0, b.output()
    problems = check_sums(read_committed(out), KEYS, PER_KEY)
    assert not problems, problems
    late = _records_of(out, a_pids, above=completed_at_takeover)
    assert not late, (f"output of A's processes committed in checkpoints above "
                      f"{completed_at_takeover} (completed when B took over): {late[:5]}")
    master_log = (tmp_path / "host-a" / "runs" / NAME / "logs" / "master.log").read_text()
    assert "fenced: its leader lease expired" in master_log, master_log[-3000:]


class _CompletedWatch:
    """Polls a launcher's Topology Master (through its registration) for its latest
    completed checkpoint: (monotonic time, id) whenever it changes."""

    def __init__(self, home: Path) -> None:
        import threading

        from jstormpy.cli.client import MasterClient, Registration

        self.client = MasterClient.for_registration(Registration.load(NAME, home))
        self.seen: list[tuple[float, int]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        from jstormpy.api.errors import JStormError

        last = None
        while not self.done.wait(0.05):
            try:
                cid = (self.client.status(timeout=1.0).get("last_completed_checkpoint")
                       or {}).get("id")
            except JStormError:
                continue  # fenced and gone, or busy
            if cid is not None and cid != last:
                self.seen.append((time.monotonic(), int(cid)))
                last = cid

    def stop(self) -> list[tuple[float, int]]:
        self.done.set()
        self.thread.join(5)
        self.client.close()
        return self.seen


def _records_of(out: Path, pids: set[int], above: int) -> list[tuple[str, int]]:
    """(part file, pid) of committed records produced by ``pids`` in checkpoints above
    ``above``."""
    found = []
    for name, cid in committed_parts(out).items():
        if cid <= above:
            continue
        for line in (out / name).read_text().splitlines():
            pid = json.loads(line)["pid"]
            if pid in pids:
                found.append((name, pid))
    return found
