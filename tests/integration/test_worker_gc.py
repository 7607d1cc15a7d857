"""A worker runs its tasks under ``Config.worker_gc`` (jstormpy/runtime/collector.py)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, LocalCluster, TopologyBuilder

from .components import NumberSpout
from .helpers import fast_config

pytestmark = pytest.mark.timeout(120)


class CollectorProbe(Bolt):
    """Writes its worker's collector settings, as its tasks run, to ``folder``."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.task = context.task_id

    def execute(self, tup: Any) -> None:
        Path(self.folder, f"task-{self.task}.json").write_text(json.dumps(
            {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}))


@pytest.mark.parametrize("policy", ["tuned", "default"])
def test_workers_run_their_tasks_under_the_configured_collector(tmp_path, policy):
    b = TopologyBuilder("gc")
    b.set_spout("numbers", NumberSpout(40), parallelism=2)
    b.set_bolt("probe", CollectorProbe(str(tmp_path)), parallelism=2).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        cluster.submit(b.build(), fast_config(worker_gc=policy)).wait(timeout=90)
    seen = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("task-*.json"))]
    assert len(seen) == 2, seen
    if policy == "tuned":
        assert all(s["young"] == 10_000 and s["frozen"] > 0 for s in seen), seen
    else:
        assert all(s["young"] == 700 and s["frozen"] == 0 for s in seen), seen
