"""Per-task CPU time in the metrics (real TM and worker processes): the task whose user
code burns CPU shows it, a task that only forwards shows little; the same figures reach
the JSON API and Prometheus (``jstorm_task_cpu_seconds_total``)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from opstopo import get_text, ui_base, wait_for
from prometheus_client.parser import text_string_to_metric_families

from jstormpy import Bolt, Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder

pytestmark = pytest.mark.timeout(120)


class Burn(Bolt):
    """Spends about 1 ms of CPU per tuple."""

    outputs = ("key", "seq")

    def execute(self, tup: Any) -> None:
        end = time.thread_time() + 0.001
        while time.thread_time() < end:
            pass
        self.emit((tup["key"], tup["seq"]))


class Forward(Bolt):
    """Only forwards."""

    outputs = ("key", "seq")

    def execute(self, tup: Any) -> None:
        self.emit((tup["key"], tup["seq"]))


def test_the_busy_task_shows_its_cpu(tmp_path: Any) -> None:
    b = TopologyBuilder("cpu-per-task")
    b.set_spout("events", SequenceSpout(keys=4, per_key=10**9, batch=20, rate_per_s=400.0),
                parallelism=1)
    b.set_bolt("burn", Burn, parallelism=1).shuffle_grouping("events")
    b.set_bolt("forward", Forward, parallelism=1).shuffle_grouping("events")
    b.set_bolt("sink", FileSink(str(tmp_path / "out")), parallelism=1) \
        .shuffle_grouping("burn").shuffle_grouping("forward")
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(b.build(), Config(workers=2, checkpoint_interval_ms=500,
                                                  heartbeat_interval_ms=200))
        comps = wait_for(lambda: (m := handle.metrics()["components"]).get("burn", {})
                         .get("cpu_seconds", 0) >= 0.3 and m, 60,
                         "0.3 s of CPU in the burning task")
        assert comps["forward"]["cpu_seconds"] < comps["burn"]["cpu_seconds"] / 3, comps
        busy = wait_for(lambda: handle.metrics()["components"]["burn"]["cpu_busy"] or None, 30,
                        "the burning task's busy share")
        assert 0.1 < busy <= 1.0
        fams = {f.name: f for f in text_string_to_metric_families(
            get_text(f"{ui_base(handle)}/metrics"))}
        scraped = {s.labels["component"]: s.value
                   for s in fams["jstorm_task_cpu_seconds"].samples
                   if s.name == "jstorm_task_cpu_seconds_total"}
        assert scraped["burn"] >= 0.3
        assert scraped["forward"] < scraped["burn"]
