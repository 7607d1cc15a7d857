"""What `jstorm run` prints at the end of a small job, and what its final status keeps
(issue 40 items 2 and 8): a short table of what each component did, without the rate
columns that read 0 once a run is over, and the records a join dropped as late -- in the
table and in `jstorm status NAME --json` after the run."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .helpers import JSTORM

pytestmark = pytest.mark.timeout(120)


JOB = '''
from jstormpy import FileSink
from jstormpy.dataflow import Dataflow
from jstormpy.testing import TestingSource
from jstormpy.window import TumblingWindows

EVENTS = ([{"kind": "order", "id": f"o{i}", "ts": i * 10_000} for i in range(5)]
          + [{"kind": "payment", "id": f"o{i}", "ts": i * 10_000 + 500} for i in range(5)]
          + [{"kind": "payment", "id": "o0", "ts": 2_500}])  # after both sides passed 40,500

flow = Dataflow("paid")
events = flow.source("events", TestingSource(EVENTS))
orders = events.filter(lambda e: e["kind"] == "order").key_by(lambda e: e["id"])
payments = events.filter(lambda e: e["kind"] == "payment").key_by(lambda e: e["id"])
joined = orders.join(payments, window=TumblingWindows(size_ms=10_000),
                     timestamp=(lambda e: e["ts"], lambda e: e["ts"]), name="pay")
joined.sink("paid", FileSink("out"))
topology = flow.build()
'''


def test_a_small_join_ends_with_a_short_table_and_keeps_its_late_count(tmp_path: Path) -> None:
    (tmp_path / "paid.py").write_text(JOB)
    res = subprocess.run([*JSTORM, "run", "paid.py", "--workers", "1"], cwd=tmp_path,
                         text=True, capture_output=True, timeout=90, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "emit/s" not in out and "exec/s" not in out, out  # 0 once the run is over
    table = out[out.index("\ncomponent ") + 1:].strip().splitlines()
    assert len(table) == 2 + 5 + 1 + 1, out  # head, rule, 5 components, (topology), workers
    head = table[0].split()
    assert head[:3] == ["component", "emitted", "executed"] and head[-1] == "late", out
    pay = next(line.split() for line in table if line.startswith("pay "))
    assert pay[-1] == "1", out  # the late payment

    res = subprocess.run([*JSTORM, "status", "paid", "--json"], cwd=tmp_path, text=True,
                         capture_output=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    status = json.loads(res.stdout)
    assert status["state"] == "drained"
    assert status["late_records"] == {"pay": 1}, status
    res = subprocess.run([*JSTORM, "status", "paid"], cwd=tmp_path, text=True,
                         capture_output=True, timeout=60, check=False)
    assert re.search(r"^late records\s+pay 1$", res.stdout, re.M), res.stdout
