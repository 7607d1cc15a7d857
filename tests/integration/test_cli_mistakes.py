"""`jstorm` used the way a new user does (issue 28): helper modules, stale runs, stops."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from jstormpy import read_committed

from .helpers import JSTORM

pytestmark = pytest.mark.timeout(180)



def jstorm(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JSTORM, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, cwd=cwd, env=dict(os.environ))


HELPER = '''
"""A helper module next to the topology file (like a user's own code)."""
from jstormpy import Bolt, Spout


class Numbers(Spout):
    outputs = ("n",)

    def open(self, conf, context):
        self.i = 0

    def next_tuple(self):
        if self.i >= 30:
            self.finish()
            return
        self.emit((self.i,))
        self.i += 1

    def snapshot(self):
        return self.i

    def restore(self, snap):
        self.i = snap


class Square(Bolt):
    outputs = ("n", "sq")

    def execute(self, tup):
        self.emit((tup["n"], tup["n"] ** 2))
'''

TOPOLOGY = '''
from jstormpy import Config, FileSink, TopologyBuilder

from mysquares import Numbers, Square

b = TopologyBuilder("helper-module")
b.set_spout("numbers", Numbers)
b.set_bolt("square", Square, parallelism=2).shuffle_grouping("numbers")
b.set_bolt("out", FileSink({out!r}), parallelism=1).global_grouping("square")
topology = b
config = Config(workers=2, checkpoint_interval_ms=200)
'''


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked", "cold-start"])
def test_run_imports_a_helper_module_next_to_the_file(tmp_path, monkeypatch, forkserver):
    """`python app/topo.py` finds app/mysquares.py; `jstorm run app/topo.py` must too,
    and the workers (other processes) must unpickle components of that module."""
    monkeypatch.setenv("JSTORM_FORKSERVER", forkserver)
    app = tmp_path / "app"
    app.mkdir()
    out = tmp_path / "out"
    (app / "mysquares.py").write_text(textwrap.dedent(HELPER))
    (app / "topo.py").write_text(TOPOLOGY.format(out=str(out)))
    res = jstorm("run", "app/topo.py", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted((r["n"], r["sq"]) for r in read_committed(out)) == \
        [(n, n * n) for n in range(30)]


FOREVER = '''
from jstormpy import Bolt, Config, Spout, TopologyBuilder


class Ticks(Spout):
    outputs = ("n",)

    def __init__(self):
        self.n = 0

    def next_tuple(self):
        import time
        time.sleep(0.01)  # pacing
        self.emit((self.n,))
        self.n += 1

    def snapshot(self):
        return self.n

    def restore(self, snap):
        self.n = snap


class Drop(Bolt):
    outputs = ("n",)

    def execute(self, tup):
        pass


b = TopologyBuilder("orphan")
b.set_spout("ticks", Ticks)
b.set_bolt("drop", Drop).shuffle_grouping("ticks")
topology = b
config = Config(workers=1, checkpoint_interval_ms=300)
'''


def test_a_topology_whose_launcher_died_is_explained_and_can_be_forgotten(tmp_path):
    import psutil

    from .helpers import wait_until

    (tmp_path / "orphan.py").write_text(FOREVER)
    launcher = subprocess.Popen([*JSTORM, "run", "orphan.py"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: "running" in jstorm("list", cwd=tmp_path).stdout, timeout=60,
                   what="the topology running")
        children = psutil.Process(launcher.pid).children(recursive=True)
    finally:
        launcher.kill()  # the launcher dies (kill -9, a closed terminal, an OOM kill)
        launcher.wait()
    # the Topology Master and workers notice and stop by themselves
    wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                               for p in children), timeout=60, what="the orphans to stop")

    listed = jstorm("list", cwd=tmp_path)
    assert "orphan" in listed.stdout and "gone" in listed.stdout
    assert "jstorm forget NAME" in listed.stdout
    for cmd in ("status", "kill", "metrics"):
        res = jstorm(cmd, "orphan", cwd=tmp_path)
        assert res.returncode != 0
        assert "UNAVAILABLE" not in res.stderr, res.stderr  # no raw gRPC error
        assert "is gone" in res.stderr and "jstorm forget orphan" in res.stderr, res.stderr
    forgot = jstorm("forget", "orphan", cwd=tmp_path)
    assert forgot.returncode == 0 and "forgot orphan" in forgot.stdout, forgot.stderr
    assert "no topologies" in jstorm("list", cwd=tmp_path).stdout


def test_run_names_a_typo_in_the_files_config_dict(tmp_path):
    (tmp_path / "mysquares.py").write_text(textwrap.dedent(HELPER))
    text = TOPOLOGY.format(out=str(tmp_path / "out")).replace(
        "config = Config(workers=2, checkpoint_interval_ms=200)",
        "config = {'workers': 1, 'chekpoint_interval_ms': 200}")
    (tmp_path / "topo.py").write_text(text)
    res = jstorm("run", "topo.py", cwd=tmp_path)
    assert res.returncode != 0
    assert "topo.py: `config`: unknown Config key(s) 'chekpoint_interval_ms'" in res.stderr
    assert "did you mean 'checkpoint_interval_ms'" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("stop", [["kill", "orphan"], ["savepoint", "orphan", "--stop"]],
                         ids=["kill", "savepoint-stop"])
def test_a_planned_stop_ends_jstorm_run_as_a_stop_not_an_error(tmp_path, stop):
    from .helpers import wait_until

    (tmp_path / "orphan.py").write_text(FOREVER)
    run = subprocess.Popen([*JSTORM, "run", "orphan.py"], cwd=tmp_path, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: "running" in jstorm("list", cwd=tmp_path).stdout, timeout=60,
                   what="the topology running")
        if stop[0] == "savepoint":  # a savepoint needs a completed checkpoint to start from
            wait_until(lambda: "#" in jstorm("status", "orphan", cwd=tmp_path).stdout,
                       timeout=30, what="a checkpoint")
        res = jstorm(*stop, cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, out + err
    assert "error" not in err.lower(), err
    assert "stopped on request" in out and "jstorm run orphan.py --resume" in out, out


def test_ctrl_c_says_how_to_continue(tmp_path):
    import signal

    from .helpers import start_as_terminal_job, wait_until

    (tmp_path / "orphan.py").write_text(FOREVER)
    run = start_as_terminal_job([*JSTORM, "run", "orphan.py"], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: "running" in jstorm("list", cwd=tmp_path).stdout, timeout=60,
                   what="the topology running")
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 130, out + err
    assert "jstorm run orphan.py --resume" in out, out


def test_run_names_a_class_attribute_that_cannot_be_pickled(tmp_path):
    """A topology file's classes travel by value: a class-level lock is named at submit."""
    (tmp_path / "mysquares.py").write_text(textwrap.dedent(HELPER))
    text = TOPOLOGY.format(out=str(tmp_path / "out")).replace(
        "from mysquares import Numbers, Square\n",
        "import threading\n\nfrom mysquares import Numbers\nfrom mysquares import Square as "
        "_Square\n\n\nclass Square(_Square):\n    guard = threading.Lock()\n")
    (tmp_path / "topo.py").write_text(text)
    res = jstorm("run", "topo.py", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "component 'square' (class Square) cannot be sent to the workers: attribute " \
           "'guard' holds a _thread.lock" in res.stderr, res.stderr
    assert "prepare()" in res.stderr
