"""`jstorm` used the way a new user does (issue 28): helper modules, stale runs, stops."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jstormpy import read_committed

pytestmark = pytest.mark.timeout(180)

_SCRIPT = Path(sys.executable).parent / "jstorm"
JSTORM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jstormpy.cli"]


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
