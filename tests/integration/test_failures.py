"""Failures on real processes: a SIGKILLed worker, a bolt that raises, a refused spout."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import TopologyError

from .components import FailOn, NonReplayableSpout, NumberSpout, PassThrough, StallOnce
from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(150)


def pipeline(name: str, out: Path, spout: NumberSpout, bolt: Any = PassThrough):
    b = TopologyBuilder(name)
    b.set_spout("numbers", spout, parallelism=2)
    b.set_bolt("work", bolt, parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("work")
    return b.build()


@pytest.mark.parametrize("victim", [1, 0], ids=["worker1", "worker0-with-sink"])
def test_at_most_once_worker_sigkill_is_detected_respawned_and_drains(tmp_path, victim):
    n = 2000
    survivor = 1 - victim
    out = tmp_path / "out"
    topo = pipeline("f-kill", out, NumberSpout(n, per_call=2, pause_s=0.004))
    config = fast_config(guarantee="at_most_once")  # default checkpoint_timeout_ms (60 s)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, config)
        wait_until(lambda: handle.status()["state"] == "running", what="running")
        # kill a worker mid-run: after some output, before the spouts are done
        wait_until(lambda: handle.metrics("numbers")["topology"]["emitted"] >= 200,
                   what="the spouts emitting")
        before = {w.id: w.pid for w in handle.workers()}
        proc = handle._launcher.workers[victim]
        assert proc.pid == before[victim]
        assert handle.status()["spouts_finished"] == []  # really mid-run
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

        def respawned() -> bool:
            ws = {w.id: w for w in handle.workers()}
            return ws[victim].alive and ws[victim].pid not in (None, before[victim])

        wait_until(respawned, timeout=30, what=f"worker {victim} respawned with a new pid")
        status = handle.status()
        assert status["state"] == "running"  # at-most-once: the others kept running
        assert any(f"worker {victim} lost" in e["message"] for e in status["errors"]), \
            status["errors"]
        assert not psutil.pid_exists(before[victim])
        ws = {w.id: w for w in handle.workers()}
        assert ws[survivor].pid == before[survivor]  # the survivor was left alone

        status = handle.wait(timeout=90)
        assert status["state"] == "drained"
    records = read_committed(out)
    got = [r["seq"] for r in records]
    assert got, "nothing committed"
    assert set(got) <= set(range(n))
    # the survivor's spout task (task 1 on worker 0: even seqs, task 2 on worker 1: odd
    # seqs) never restarted: each of its tuples is committed at most once
    mine = [s for s in got if s % 2 == survivor]
    assert mine and len(mine) == len(set(mine))


def test_at_most_once_bolt_error_is_reported_and_the_tuple_skipped(tmp_path):
    n = 200
    out = tmp_path / "out"
    topo = pipeline("f-raise-amo", out, NumberSpout(n), FailOn(bad=17))
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config(guarantee="at_most_once"))
        status = handle.wait(timeout=60)
    assert status["state"] == "drained"
    assert status["restarts"] == 0
    (err,) = [e for e in status["errors"] if "poisoned" in e["message"]]
    work_tasks = topo.task_ids()["work"]
    assert err["component"] == "work" and err["task"] in work_tasks
    assert err["message"] == "ValueError: poisoned tuple seq=17"
    assert "[17, 'k3'" in err["tuple"]
    assert "ValueError" in err["traceback"] and "execute" in err["traceback"]
    assert sorted(r["seq"] for r in read_committed(out)) == [s for s in range(n) if s != 17]


def test_exactly_once_bolt_error_rolls_back_and_output_stays_exact(tmp_path):
    n = 600
    out = tmp_path / "out"
    marker = tmp_path / "failed-once"
    topo = pipeline("f-raise-eo", out, NumberSpout(n, per_call=2, pause_s=0.002),
                    FailOn(bad=401, marker=str(marker)))
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config(guarantee="exactly_once"))
        status = handle.wait(timeout=90)
    assert marker.exists()  # it did raise once
    assert status["state"] == "drained"
    assert status["restarts"] >= 1
    errors = [e for e in status["errors"] if "poisoned" in e["message"]]
    assert len(errors) == 1, status["errors"]
    assert errors[0]["task"] in topo.task_ids()["work"]
    assert "401" in errors[0]["tuple"]
    assert any("raised" in r["reason"] for r in status["recoveries"]), status["recoveries"]
    got = sorted(r["seq"] for r in read_committed(out))
    assert got == list(range(n))  # rolled back and replayed: no loss, no duplicate


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_non_replayable_spout_is_refused_at_submit(tmp_path, guarantee):
    b = TopologyBuilder("f-refused")
    b.set_spout("src", NonReplayableSpout)
    b.set_bolt("out", FileSink(str(tmp_path / "out"))).shuffle_grouping("src")
    with LocalCluster() as cluster:
        with pytest.raises(TopologyError) as err:
            cluster.submit(b.build(), fast_config(guarantee=guarantee))
        assert cluster.handles == []  # nothing was started
    msg = str(err.value)
    assert "'src'" in msg and "NonReplayableSpout" in msg and "not replayable" in msg
    assert "snapshot() and restore()" in msg and guarantee in msg
    assert "at_most_once" in msg  # says what would work


def checkpoints_with(handle: Any, status: str) -> list[Any]:
    return [c for c in handle.status()["checkpoints"] if c["status"] == status]


@pytest.mark.slow
def test_checkpoint_timeouts_escalate_to_recovery_naming_the_stalled_task(tmp_path):
    n = 400
    out = tmp_path / "out"
    release = tmp_path / "release"
    topo = pipeline("f-stall", out, NumberSpout(n, per_call=2, pause_s=0.002),
                    StallOnce(at=101, marker=str(tmp_path / "stalled"), release=str(release)))
    config = fast_config(guarantee="exactly_once", checkpoint_timeout_ms=800,
                         tolerable_failed_checkpoints=1)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, config)
        wait_until(lambda: handle.status()["state"] == "running", what="running")
        try:
            wait_until(lambda: len(checkpoints_with(handle, "timed_out")) >= 2
                       and handle.status()["state"] == "recovering", timeout=60,
                       what="a recovery after two checkpoint timeouts")
        finally:
            release.touch()  # the stalled bolt goes on, so its worker can stop it
        wait_until(lambda: [r for r in handle.status()["recoveries"]
                            if "timed out" in r["reason"]], timeout=60,
                   what=f"the recovery {handle.status()['recoveries']} {handle.status()['state']} {handle.status()['checkpoints'][-3:]}")
        status = handle.status()
        timed_out = [c for c in status["checkpoints"] if c["status"] == "timed_out"]
        assert len(timed_out) >= 2, (status["recoveries"], status["checkpoints"][-4:])
        assert all("stalled: " in c["error"] for c in timed_out)
        (reason,) = [r["reason"] for r in status["recoveries"] if "timed out" in r["reason"]]
        assert "tolerable_failed_checkpoints=1" in reason
        assert "work[task" in reason  # the stalled bolt, by component and task id
        final = handle.wait(timeout=90)
    assert final["state"] == "drained"
    assert sorted(r["seq"] for r in read_committed(out)) == list(range(n))


def test_workers_lost_together_cost_one_restart_and_keep_the_first_reason(tmp_path):
    """Two workers killed at once (as a failed Spark barrier stage takes every worker down)
    are one failure: one restart against max_restarts, recorded with the first loss."""
    n = 3000
    out = tmp_path / "out"
    topo = pipeline("f-kill-two", out, NumberSpout(n, per_call=2, pause_s=0.004))
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config(guarantee="exactly_once", workers=3))
        wait_until(lambda: handle.status()["state"] == "running", what="running")
        wait_until(lambda: handle.metrics("numbers")["topology"]["emitted"] >= 200,
                   what="the spouts emitting")
        victims = [handle._launcher.workers[1], handle._launcher.workers[2]]
        for proc in victims:
            proc.send_signal(signal.SIGKILL)
        for proc in victims:
            proc.wait(10)
        status = handle.wait(timeout=120)
    assert status["state"] == "drained"
    assert status["restarts"] == 1, status["recoveries"]
    assert len(status["recoveries"]) == 1, status["recoveries"]
    assert status["recoveries"][0]["reason"].startswith(("worker 1 lost", "worker 2 lost"))
    got = sorted(r["seq"] for r in read_committed(out))
    assert got == list(range(n))  # rolled back and replayed: no loss, no duplicate
