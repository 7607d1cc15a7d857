"""A rescale that also changes the number of worker processes (docs/rescaling.md): the
launcher starts the new workers or stops the surplus ones, the tasks are spread over the
new count, and every key's committed output stays exactly-once (CLI and Python API)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from jstormpy import Config, LocalCluster
from jstormpy.api.errors import JStormError
from jstormpy.cli.status import format_status
from tests.chaos.topologies import check_keyed_sums
from tests.integration.helpers import committed_count, wait_until
from tests.integration.paced_spout import release
from tests.integration.savepoint_components import linear

KEYS, PER_KEY = 12, 3000


def layout(handle) -> tuple[list[int], dict[int, list[int]]]:
    """Alive worker ids, and which worker hosts each component's tasks."""
    status = handle.status()
    alive = sorted(w["id"] for w in status["workers"] if w["alive"])
    return alive, {w["id"]: sorted(w["tasks"]) for w in status["workers"]}


@pytest.mark.slow
def test_rescale_changes_the_worker_count_up_then_down(tmp_path: Path, capsys) -> None:
    from jstormpy.cli.main import main

    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        paced = linear(out, 2, per_key=PER_KEY, rate=700, release_file=tmp_path / "release")
        handle = cluster.submit(paced, conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        assert main(["rescale", "sp-linear", "sum=4", "--workers", "3"]) == 0
        assert "rescaled sp-linear to sum=4, 3 workers: spouts paused" in \
            capsys.readouterr().out
        wait_until(lambda: layout(handle)[0] == [0, 1, 2], 60, "three live workers")
        alive, tasks = layout(handle)
        assert all(tasks[w] for w in alive), tasks  # every worker hosts tasks
        assert sorted(t for ts in tasks.values() for t in ts) == list(range(1, 9))
        before = committed_count(out)
        wait_until(lambda: committed_count(out) > before + 1500, 60, "output on three workers")
        record = handle.rescale({}, workers=1)
        assert record["error"] == "" and record["workers"] == 1
        assert layout(handle)[0] == [0]
        assert len(handle.status()["workers"]) == 1
        shown = format_status(handle.status())
        assert "rescale    sum=4, 3 workers: spouts paused" in shown, shown
        assert "rescale    1 workers: spouts paused" in shown, shown
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the second rescale"
        with pytest.raises(JStormError, match="nothing to change"):
            handle.rescale({"sum": 4}, workers=1)
        release(tmp_path / "release")  # the scenario is over: the rest at full speed
        status = handle.wait(timeout=240)
        assert status["restarts"] == 0, status["recoveries"]
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


@pytest.mark.slow
def test_two_phase_commit_sink_rescales_in_place(tmp_path: Path) -> None:
    """The FileSink ``out`` goes 2 -> 3 -> 1 tasks under load: the rescale waits until every
    sink task committed the quiescent checkpoint, so no transaction is open when the task
    ids change, and every key's committed output stays exactly-once."""
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        paced = linear(out, 2, per_key=PER_KEY, rate=700, release_file=tmp_path / "release")
        handle = cluster.submit(paced, conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        up = handle.rescale({"out": 3})
        assert up["error"] == "" and up["changes"] == {"out": 3}
        sinks = next(c for c in handle.status()["components"] if c["name"] == "out")
        assert len(sinks["tasks"]) == 3
        before = committed_count(out)
        wait_until(lambda: committed_count(out) > before + 1500, 60, "output from three sink tasks")
        assert handle.rescale({"out": 1})["error"] == ""
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the second rescale"
        release(tmp_path / "release")  # the scenario is over: the rest at full speed
        status = handle.wait(timeout=240)
        assert status["restarts"] == 0, status["recoveries"]
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
    parts = {p.name.rsplit("-", 1)[-1] for p in out.iterdir() if p.name.startswith("part-")}
    assert len(parts) >= 3, parts  # files of the old, the scaled-up and the scaled-down tasks


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (an exited, unreaped child counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_surplus_worker_that_outlived_a_master_crash_stops_at_once(tmp_path: Path) -> None:
    """3 -> 1 workers, the Topology Master SIGKILLed right after the rescale's commit point
    (before it told any worker): the restarted TM adopts the new layout, and the surplus
    workers 1 and 2, which survived with the old one, are told at their re-registration
    that they are not part of the plan and stop (exit 0) -- within seconds, not after
    their 60 s reconnect time-out -- while every key stays exactly-once."""
    out = tmp_path / "out"
    env = {"JSTORM_FAULTS": "rescale_after_commit", "JSTORM_FAULT_DIR": str(tmp_path)}
    conf = Config(workers=3, checkpoint_interval_ms=300)
    with LocalCluster(env=env) as cluster:
        paced = linear(out, 2, per_key=PER_KEY, rate=700, release_file=tmp_path / "release")
        handle = cluster.submit(paced, conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        surplus = {w.id: w.pid for w in handle.workers() if w.id > 0}
        assert sorted(surplus) == [1, 2]
        old_master = handle.master_pid
        handle.rescale({}, workers=1)
        assert (tmp_path / "rescale_after_commit@0@None").exists(), "the fault did not fire"
        assert handle.master_pid != old_master
        wait_until(lambda: not any(map(_running, surplus.values())), 20,
                   "the surplus workers to stop (not after their 60 s reconnect time-out)")
        assert layout(handle)[0] == [0]
        run_dir = handle.run_dir
        assert run_dir is not None
        for wid in surplus:
            log = (run_dir / "logs" / f"worker-{wid}.log").read_text()
            assert f"worker id {wid} is not part of the plan" in log, log[-2000:]
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the rescale"
        release(tmp_path / "release")  # the scenario is over: the rest at full speed
        handle.wait(timeout=240)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
