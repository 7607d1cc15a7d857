"""Operator chaining on real worker processes (jstormpy/runtime/channel_plan.py): a bolt
that reads only its source with local_or_shuffle, paired one task per worker, runs in
its source's thread; ``Config(chaining=False)`` keeps every task in its own thread. The
output is the same either way."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, FileSink, LocalCluster, TopologyBuilder, read_committed

from .components import NumberSpout
from .helpers import fast_config

pytestmark = pytest.mark.timeout(120)


class WhereAmI(Bolt):
    """Emits each input's seq and source task with the name of the thread running it."""

    outputs = ("seq", "src_task", "thread")

    def execute(self, tup: Any) -> None:
        self.emit((tup["seq"], tup["src_task"], threading.current_thread().name))


def run(tmp_path: Path, chaining: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    out = tmp_path / "out"
    b = TopologyBuilder("chaining")
    b.set_spout("numbers", NumberSpout(n=300, per_call=7), parallelism=2)
    b.set_bolt("where", WhereAmI, parallelism=2).local_or_shuffle_grouping("numbers")
    b.set_bolt("sink", FileSink(str(out)), parallelism=2).local_or_shuffle_grouping("where")
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(b.build(), fast_config(chaining=chaining))
        status = handle.wait(timeout=60)
    return [dict(r) for r in read_committed(out)], status


def test_a_paired_local_or_shuffle_bolt_runs_in_its_sources_thread(tmp_path: Path) -> None:
    rows, status = run(tmp_path, chaining=True)
    assert sorted(r["seq"] for r in rows) == list(range(300))
    assert {r["thread"] for r in rows} == {f"task-{r['src_task']}-numbers" for r in rows}
    assert all(r["thread"] == f"task-{r['src_task']}-numbers" for r in rows)
    assert status["last_completed_checkpoint"] is not None


def test_chaining_off_keeps_every_task_in_its_own_thread(tmp_path: Path) -> None:
    rows, _ = run(tmp_path, chaining=False)
    assert sorted(r["seq"] for r in rows) == list(range(300))
    assert {r["thread"] for r in rows} <= {"task-3-where", "task-4-where"}
