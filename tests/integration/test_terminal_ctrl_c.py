"""Ctrl-C in a terminal: SIGINT to the whole foreground process group of `jstorm run`
(the launcher, its zygote, the Topology Master and the workers), as a terminal sends it
(issue 40 item 1). The launcher owns the stop: it reports the checkpoint the state is
kept at, the TM and the workers end without tracebacks, and `jstorm status NAME`
still answers for the run afterwards (item 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import JSTORM, start_as_terminal_job, wait_until

pytestmark = pytest.mark.timeout(180)


COUNTER = '''
from jstormpy import Bolt, Config, FileSink, Spout, TopologyBuilder


class Ticks(Spout):
    outputs = ("n",)

    def __init__(self):
        self.n = 0

    def next_tuple(self):
        import time
        time.sleep(0.005)  # pacing: an unbounded source
        self.emit((self.n,))
        self.n += 1

    def snapshot(self):
        return self.n

    def restore(self, snap):
        self.n = snap


class Count(Bolt):
    outputs = ("n", "count")

    def prepare(self, conf, context):
        self.counts = self.state("counts")

    def execute(self, tup):
        self.counts["all"] = self.counts.get("all", 0) + 1
        self.emit((tup["n"], self.counts["all"]))


b = TopologyBuilder("counter")
b.set_spout("ticks", Ticks, parallelism=1)
b.set_bolt("count", Count, parallelism=2).shuffle_grouping("ticks")
b.set_bolt("out", FileSink("out"), parallelism=1).global_grouping("count")
topology = b
config = Config(workers=2, checkpoint_interval_ms=200, heartbeat_interval_ms=100)
'''


def _status(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JSTORM, "status", "counter", "--json"], cwd=cwd, text=True,
                          capture_output=True, timeout=60, check=False)


def _completed(cwd: Path) -> int:
    res = _status(cwd)
    if res.returncode != 0:
        return 0
    return int((json.loads(res.stdout).get("last_completed_checkpoint") or {}).get("id") or 0)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked", "cold-started"])
def test_ctrl_c_to_the_process_group_keeps_the_state_and_leaves_no_traceback(
        tmp_path: Path, forkserver: str) -> None:
    (tmp_path / "counter.py").write_text(COUNTER)
    env = dict(os.environ, JSTORM_FORKSERVER=forkserver)  # TM and workers forked or not
    run = start_as_terminal_job([*JSTORM, "run", "counter.py"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # its own group, as in a terminal
    try:
        seen = wait_until(lambda: _completed(tmp_path) >= 2, timeout=90,
                          what="checkpoint #2 completed")
        assert seen
        sent = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        out, err = run.communicate(timeout=60)
        took = time.monotonic() - sent
        wait_until(lambda: not _group_alive(run.pid), timeout=30,
                   what="every process of the run's group to end")
    finally:
        if _group_alive(run.pid):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(30)
    assert run.returncode == 130, out + err
    assert "no checkpoint completed yet" not in out, out
    line = next((x for x in out.splitlines() if x.startswith("interrupted:")), "")
    assert line.startswith("interrupted: stopping the topology; its state is kept at "
                           "checkpoint #"), out
    kept = int(line.rsplit("#", 1)[1])
    assert kept >= 2, out
    assert "jstorm run counter.py --resume" in out, out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    logs = tmp_path / "jstorm-home" / "runs" / "counter" / "logs"
    assert (logs / "master.log").exists(), sorted(p.name for p in logs.parent.rglob("*"))
    for log in sorted(logs.glob("*.log")):
        text = log.read_text(errors="replace")
        assert "KeyboardInterrupt" not in text and "Traceback" not in text, \
            f"{log.name}:\n{text[-3000:]}"
    assert took < 10, f"jstorm run took {took:.1f} s to exit after Ctrl-C"

    # item 7: the interrupted run still answers `jstorm status NAME`
    res = subprocess.run([*JSTORM, "status", "counter"], cwd=tmp_path, text=True,
                         capture_output=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "interrupted" in res.stdout, res.stdout
    assert f"#{kept}" in res.stdout, res.stdout
    status = json.loads(_status(tmp_path).stdout)
    assert status["state"] == "interrupted", status
    assert status["last_completed_checkpoint"]["id"] == kept, status
