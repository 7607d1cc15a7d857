"""A zombie worker (issue 13 hole 6), with a real SIGSTOP/SIGCONT of a worker process.

Worker 0 is frozen (SIGSTOP) for longer than ``worker_timeout_ms``; the TM declares it
lost and a replacement process for worker 0 is started (what Spark does when an executor
is cut off from the driver: it runs the task elsewhere while the old one may still be
alive). The topology recovers to a new generation. Then the frozen process is woken
(SIGCONT): it still holds tasks, queued data and an open sink transaction of the old
generation. It must not publish anything: the FileSink output stays exactly-once, and the
TM keeps the replacement (the zombie's reconnection with its stale generation is fenced).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from jstormpy import Config, LocalCluster

from .helpers import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
from topologies import check_keyed_sums, linear  # noqa: E402

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]
KEYS = 10


def test_a_woken_zombie_worker_publishes_nothing(tmp_path):
    out = tmp_path / "out"
    per_key = 1500
    conf = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=150,
                  heartbeat_interval_ms=100, worker_timeout_ms=1500,
                  checkpoint_timeout_ms=30_000)
    zombie_pid = 0
    try:
        with LocalCluster(home=tmp_path / "home") as cluster:
            handle = cluster.submit(linear(out, KEYS, per_key, rate=1200), conf)
            wait_until(lambda: (handle.status()["last_completed_checkpoint"] or {}).get("id", 0)
                       >= 3, 60, "three completed checkpoints")
            gen = handle.status()["generation"]
            zombie_pid = next(w.pid for w in handle.workers() if w.id == 0)
            os.kill(zombie_pid, signal.SIGSTOP)
            wait_until(lambda: handle.status()["state"] == "recovering", 30,
                       "worker 0 declared lost")
            launcher = handle._launcher
            with launcher.lock:  # the replacement, while the old process is still there
                launcher.start_worker(0)
            wait_until(lambda: handle.status()["state"] == "running"
                       and handle.status()["generation"] > gen, 60,
                       "recovery with the replacement worker")
            replacement = next(w.pid for w in handle.workers() if w.id == 0)
            assert replacement != zombie_pid
            os.kill(zombie_pid, signal.SIGCONT)  # the zombie wakes up mid-transaction
            final = handle.wait(timeout=180)
            assert final["state"] == "drained", final["state"]
            assert next(w["pid"] for w in final["workers"] if w["id"] == 0) == replacement
    finally:
        if zombie_pid:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                os.kill(zombie_pid, signal.SIGCONT)
                psutil.Process(zombie_pid).wait(30)  # it exits once told it was replaced
    problems = check_keyed_sums(out, KEYS, per_key)
    assert not problems, problems
