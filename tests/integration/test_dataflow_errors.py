"""Mistakes in dataflow code, met under `jstorm run` (issue 40 items 5 and 6): an error
the dataflow raises while the file builds it names the user's file and line; a record
that makes the user's function raise is shown in the failure report as that record, not
as the batch it came in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

_SCRIPT = Path(sys.executable).parent / "jstorm"
JSTORM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jstormpy.cli.main"]

EARLY_LATE = '''
from jstormpy import FileSink
from jstormpy.dataflow import Dataflow
from jstormpy.testing import TestingSource
from jstormpy.window import Count, TumblingWindows

flow = Dataflow("early")
w = (flow.source("events", TestingSource([{"k": "a", "ts": 1}]))
         .key_by(lambda e: e["k"])
         .window(TumblingWindows(size_ms=1_000), timestamp=lambda e: e["ts"]))
too_late = w.late()  # before aggregate
w.aggregate(Count()).sink("counts", FileSink("out"))
topology = flow.build()
'''

BAD_FIELD = '''
from jstormpy import FileSink
from jstormpy.dataflow import Dataflow
from jstormpy.testing import TestingSource

flow = Dataflow("field")
(flow.source("events", TestingSource([{"k": "a", "ts": 1}]))
     .key_by("user")
     .reduce(lambda a, b: b)
     .sink("out", FileSink("out")))
topology = flow.build()
'''

DIVIDE = '''
from jstormpy import Config, FileSink
from jstormpy.dataflow import Dataflow
from jstormpy.testing import TestingSource

flow = Dataflow("divide")
(flow.source("events", TestingSource([{"n": n, "d": 1 if n != 7 else 0} for n in range(10)],
                                     batch_size=10))
     .map(lambda e: {"q": e["n"] // e["d"]})  # the bug: d is 0 for n == 7
     .sink("out", FileSink("out")))
topology = flow.build()
config = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100)
'''

REDUCE = DIVIDE.replace(
    '''     .map(lambda e: {"q": e["n"] // e["d"]})  # the bug: d is 0 for n == 7''',
    '''     .key_by(lambda e: e["n"] % 2)
     .reduce(lambda a, e: {"n": e["n"], "d": a["n"] // e["d"]})  # d is 0 for n == 7''')


def _run(tmp_path: Path, text: str, name: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / name).write_text(text)
    return subprocess.run([*JSTORM, "run", name], cwd=tmp_path, text=True,
                          capture_output=True, timeout=150, check=False)


@pytest.mark.parametrize(("text", "line", "message"), [
    (EARLY_LATE, "too_late = w.late()  # before aggregate",
     "late() needs the window's aggregate(...) first"),
    (BAD_FIELD, "topology = flow.build()", "have no field 'user'"),
])
def test_a_build_time_dataflow_error_names_the_users_line(tmp_path: Path, text: str,
                                                          line: str, message: str) -> None:
    res = _run(tmp_path, text, "job.py")
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr, res.stderr
    number = 1 + text.splitlines().index(line)
    assert f"job.py, line {number}" in res.stderr, res.stderr
    assert line.split("  #", maxsplit=1)[0] in res.stderr, res.stderr
    assert "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("text", [DIVIDE, REDUCE], ids=["map", "reduce"])
def test_the_failure_report_shows_the_failing_record_not_its_batch(tmp_path: Path,
                                                                   text: str) -> None:
    assert text.count("d is 0 for n == 7") == 1
    res = _run(tmp_path, text, "divide.py")
    console = res.stdout + res.stderr
    assert res.returncode != 0, console
    assert "ZeroDivisionError" in console, console
    tuple_line = next(x for x in console.splitlines() if x.strip().startswith("tuple:"))
    assert "'n': 7" in tuple_line and "'d': 0" in tuple_line, tuple_line
    assert not tuple_line.split("tuple:", 1)[1].strip().startswith("Batch("), tuple_line
