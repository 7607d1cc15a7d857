"""`ps` names a topology's processes (issue 28 item 21): the TM, each worker, the zygote."""

from __future__ import annotations

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
