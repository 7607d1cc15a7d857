"""`ps` names a topology's processes (issue 28 item 21): the TM, each worker, the zygote;
`top -H` / `ps -L` name their threads."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import psutil
import pytest

from jstormpy import LocalCluster, TopologyBuilder

from .components import NumberSpout, PassThrough
from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(120)


def cmdline(pid: int) -> str:
    return " ".join(psutil.Process(pid).cmdline()).strip()  # as `ps -o args` shows it


def living_cmdline(proc: psutil.Process) -> str:
    """A child's title; "" for one that has exited (an earlier test's unreaped zombie has none)."""
    try:
        return cmdline(proc.pid)
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked", "cold-start"])
def test_processes_are_named_after_their_role_and_topology(monkeypatch, forkserver):
    monkeypatch.setenv("JSTORM_FORKSERVER", forkserver)
    b = TopologyBuilder("titled")
    b.set_spout("numbers", NumberSpout(10**9, per_call=1, pause_s=0.01), parallelism=2)
    b.set_bolt("work", PassThrough, parallelism=2).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        h = cluster.submit(b.build(), fast_config(workers=2))
        workers = wait_until(lambda: [w for w in h.workers() if w.pid] if
                             len([w for w in h.workers() if w.pid]) == 2 else None,
                             timeout=60, what="two workers")
        titles = {w.id: wait_until(lambda w=w: "titled" in cmdline(w.pid) and cmdline(w.pid),
                                   timeout=30, what=f"worker {w.id}'s title")
                  for w in workers}
        names = [living_cmdline(p) for p in psutil.Process().children(recursive=True)]
    for wid, title in titles.items():
        assert title == f"jstorm worker {wid} titled", title
    assert "jstorm TM titled" in names, names


def thread_titles(pid: int) -> list[str]:
    """The OS names of process ``pid``'s threads, as ``top -H`` and ``ps -L`` show them."""
    return [psutil.Process(th.id).name() for th in psutil.Process(pid).threads()]


def titles_once(pid: int, ready: Callable[[list[str]], bool]) -> list[str] | None:
    """``pid``'s thread names once ``ready`` holds of them (for ``wait_until``)."""
    names = thread_titles(pid)
    return names if ready(names) else None


def test_threads_carry_their_names_for_top_and_ps():
    b = TopologyBuilder("threads")
    b.set_spout("numbers", NumberSpout(10**6, per_call=1, pause_s=0.01), parallelism=2)
    b.set_bolt("work", PassThrough, parallelism=2).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        h = cluster.submit(b.build(), fast_config(workers=2))
        workers = wait_until(lambda: [w for w in h.workers() if w.pid and w.alive] if
                             len([w for w in h.workers() if w.pid and w.alive]) == 2
                             else None, timeout=60, what="two workers")
        tm = wait_until(lambda: next((p for p in psutil.Process().children(recursive=True)
                                      if living_cmdline(p) == "jstorm TM threads"), None),
                        timeout=30, what="the TM")
        per_worker = {w.id: wait_until(
            lambda w=w: titles_once(w.pid, lambda names: sum(
                name.startswith("task-") for name in names) == 2),
            timeout=30, what=f"worker {w.id}'s two task threads") for w in workers}
        wait_until(lambda: titles_once(tm.pid, lambda names: {"control-0", "control-1"}
                                       <= set(names)),
                   timeout=30, what="the TM's control stream threads, by name")
    tasks: Counter[str] = Counter()
    for names in per_worker.values():
        assert "heartbeat" in names, names
        for name in names:
            if name.startswith("task-"):
                m = re.fullmatch(r"task-\d+-(numbers|work)", name)
                assert m, name
                tasks[m.group(1)] += 1
    assert tasks == {"numbers": 2, "work": 2}, per_worker
