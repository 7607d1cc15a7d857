"""How a LocalCluster starts processes (issue 12: the fixed cost of a run), with real
processes.

- ``LocalCluster()`` starts one pre-imported zygote and ``submit`` forks the TM and the
  workers from it; a launch environment changed in between is still honoured (the
  topology then gets a zygote of its own).
- Every process of a topology hashes ``str`` the same way (one engine-wide
  PYTHONHASHSEED), forked or started cold, so a user's ``hash()`` agrees across workers.
- ``TopologyHandle.wait()`` long-polls the TM instead of asking for the status 100 times
  a second.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, FileSink, LocalCluster, TopologyBuilder, read_committed

from .components import NumberSpout
from .helpers import fast_config

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


class WhoAmI(Bolt):
    """Emits, per input, what its process looks like: pid, parent pid, the marker
    variable of the launch environment, and ``hash()`` of a fixed string."""

    outputs = ("seq", "pid", "ppid", "marker", "hashed")

    def execute(self, tup: Any) -> None:
        self.emit((tup.values[0], os.getpid(), os.getppid(),
                   os.environ.get("JSTORM_TEST_MARKER", ""), hash("jstormpy-key")))


def build(out: Path, name: str, n: int = 40, pause_s: float = 0.0) -> Any:
    b = TopologyBuilder(name)
    b.set_spout("numbers", NumberSpout(n=n, pause_s=pause_s), parallelism=2)
    b.set_bolt("who", WhoAmI, parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("sink", FileSink(str(out)), parallelism=1).global_grouping("who")
    return b.build()


def rows(out: Path) -> list[dict[str, Any]]:
    return [dict(r) for r in read_committed(out)]


def test_submit_forks_from_the_zygote_the_cluster_started(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        zygote = cluster._zygote
        assert zygote is not None and zygote.alive(), "LocalCluster() started no zygote"
        handle = cluster.submit(build(out, "zygote-adopt"), fast_config())
        handle.wait(timeout=60)
    got = rows(out)
    assert sorted(r["seq"] for r in got) == list(range(40))
    # the bolt's processes are workers forked by the zygote LocalCluster() started
    assert {r["ppid"] for r in got} == {zygote.proc.pid}
    assert len({r["pid"] for r in got}) == 2


def test_an_environment_changed_after_the_cluster_started_is_honoured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        zygote = cluster._zygote
        assert zygote is not None
        monkeypatch.setenv("JSTORM_TEST_MARKER", "set-after-start")
        handle = cluster.submit(build(out, "zygote-env"), fast_config())
        handle.wait(timeout=60)
        assert not zygote.alive(), "the stale zygote was not stopped"
    got = rows(out)
    assert sorted(r["seq"] for r in got) == list(range(40))
    assert {r["marker"] for r in got} == {"set-after-start"}
    assert zygote.proc.pid not in {r["ppid"] for r in got}


def test_str_hash_agrees_between_workers_forked_and_cold(tmp_path: Path) -> None:
    hashes = set()
    for fork in (True, False):
        out = tmp_path / f"out-{fork}"
        with LocalCluster(home=tmp_path / f"home-{fork}", fork=fork) as cluster:
            cluster.submit(build(out, f"hash-{fork}"), fast_config()).wait(timeout=60)
        got = rows(out)
        assert len({r["pid"] for r in got}) == 2  # both workers took part
        hashes |= {r["hashed"] for r in got}
    assert len(hashes) == 1, f"hash() differs between worker processes: {hashes}"


def test_wait_long_polls_instead_of_asking_a_hundred_times_a_second(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        # 40 tuples, 5 per call, 0.25 s per call and 2 spout tasks: about 1 s of input
        handle = cluster.submit(build(out, "long-poll", pause_s=0.25), fast_config())
        calls = []
        status = handle.client.status

        def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs.get("wait_terminal_s", 0.0))
            return status(*args, **kwargs)

        handle.client.status = counted  # type: ignore[method-assign]
        import time

        started = time.monotonic()
        final = handle.wait(timeout=60)
        took = time.monotonic() - started
    assert final["state"] == "drained"
    assert sorted(r["seq"] for r in rows(out)) == list(range(40))
    assert took > 0.5  # the run really lasted (else the count below proves nothing)
    # one held call per 0.5 s at most (plus the last one), not one per 10 ms
    assert len(calls) <= took / 0.5 + 2, (len(calls), took)
    assert all(hold > 0 for hold in calls)


def test_a_clean_run_logs_no_warning(tmp_path: Path) -> None:
    """A run that drains normally says nothing an operator must look at: the workers
    leaving after ``drained`` is logged at INFO, not as "worker lost" WARNINGs."""
    out = tmp_path / "out"
    home = tmp_path / "home"
    with LocalCluster(home=home) as cluster:
        handle = cluster.submit(build(out, "clean-logs"), fast_config())
        assert handle.wait(timeout=60)["state"] == "drained"
    assert sorted(r["seq"] for r in rows(out)) == list(range(40))
    logs = sorted((home / "runs" / "clean-logs" / "logs").glob("*.log"))
    assert {p.name for p in logs} >= {"master.log", "worker-0.log", "worker-1.log"}
    noisy = [f"{p.name}: {line}" for p in logs for line in p.read_text().splitlines()
             if " WARNING " in line or " ERROR " in line]
    assert noisy == []
    master = (home / "runs" / "clean-logs" / "logs" / "master.log").read_text()
    assert "worker 0 left" in master and "worker 1 left" in master
