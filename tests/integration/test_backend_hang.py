"""A state backend that hangs (accepts connections, never answers) — issue 13 hole 8.

The hdfs:// backend points at a :class:`~jstormpy.testing.servers.fault_proxy.FaultProxy` in front
of the protocol-level WebHDFS server; ``proxy.hang()`` turns it into a server that accepts
and never replies. The per-request HTTP timeout is set far above the test's length, so
only ``Config.state_backend_timeout_ms`` can bound a call. The Topology Master must keep
answering ``status`` at once (it never holds its lock over a backend call), checkpoints
must fail with an error naming the deadline, and once the backend answers again
checkpoints complete and the output is exactly-once.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Config, LocalCluster
from jstormpy.testing.servers.fault_proxy import FaultProxy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))
from topologies import check_keyed_sums, linear  # noqa: E402

from .helpers import wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]
KEYS = 10
DEADLINE_MS = 6000


def checkpoints(handle: Any, *status: str) -> list[dict[str, Any]]:
    return [c for c in handle.status()["checkpoints"] if c["status"] in status]


def test_hung_backend_aborts_checkpoints_and_never_stalls_the_master(tmp_path, webhdfs_server):
    proxy = FaultProxy(("127.0.0.1", webhdfs_server.port))
    port = proxy.start()
    out = tmp_path / "out"
    per_key = 1500
    conf = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=200,
                  heartbeat_interval_ms=100, worker_timeout_ms=60_000,
                  checkpoint_timeout_ms=60_000, state_backend=f"hdfs://127.0.0.1:{port}/ckpt",
                  state_backend_options={"timeout_s": 600, "retries": 0},
                  state_backend_timeout_ms=DEADLINE_MS)
    try:
        with LocalCluster(home=tmp_path / "home") as cluster:
            handle = cluster.submit(linear(out, KEYS, per_key, rate=1500), conf)
            wait_until(lambda: len(checkpoints(handle, "completed")) >= 2, 60,
                       "two completed checkpoints")
            proxy.hang()
            slowest = [0.0]

            def quick_status() -> dict[str, Any]:
                t0 = time.monotonic()
                status = handle.status()
                slowest[0] = max(slowest[0], time.monotonic() - t0)
                return status

            failed = wait_until(
                lambda: [c for c in quick_status()["checkpoints"]
                         if c["status"] in ("failed", "timed_out")
                         and ("did not answer" in c["error"]
                              or "still have no answer" in c["error"])],
                60, "a checkpoint failed by the backend deadline")
            assert "state_backend_timeout_ms" in failed[0]["error"], failed
            assert quick_status()["state"] == "running"
            # a recovery while the backend hangs: listing the checkpoints cannot finish,
            # the TM must go on answering (and retry the listing, never give up on it)
            gen = quick_status()["generation"]
            os.kill(handle.workers()[0].pid, signal.SIGKILL)
            wait_until(lambda: quick_status()["generation"] > gen, 30, "a recovery")
            until = time.monotonic() + DEADLINE_MS / 1000 * 2
            while time.monotonic() < until:
                assert quick_status()["state"] == "recovering"
                time.sleep(0.1)  # polling interval
            assert slowest[0] < DEADLINE_MS / 1000 / 2, \
                f"status took {slowest[0]:.1f} s while the backend hung"
            proxy.heal()
            last_failed = max(c["id"] for c in checkpoints(handle, "failed", "timed_out"))
            wait_until(lambda: [c for c in checkpoints(handle, "completed")
                                if c["id"] > last_failed], 90,
                       "a completed checkpoint once the backend answers again")
            final = handle.wait(timeout=150)
        assert final["state"] == "drained", final["state"]
    finally:
        proxy.close()
    problems = check_keyed_sums(out, KEYS, per_key)
    assert not problems, problems
