"""The end of a run and the next run (issue 13 holes 3 and 5), with real processes.

- ``drained`` means everything end of input causes is committed: a bolt's
  ``on_inputs_finished`` output is in the sink's committed files, also when checkpoints are
  triggered as fast as they can be (the trigger races the spout's last emit).
- A fresh run into a FileSink directory holding an earlier run's output is refused with an
  error naming the directory, before anything starts; the old output is untouched.
"""

from __future__ import annotations

from typing import Any

import pytest

from jstormpy import Bolt, FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import SinkError

from .components import NumberSpout
from .helpers import fast_config

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


class CountAtEnd(Bolt):
    """Counts its input; emits the total only when every input has finished."""

    outputs = ("seq", "key", "src_task", "src_worker")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts = self.state("counts")

    def execute(self, tup: Any) -> None:
        self.counts["n"] = self.counts.get("n", 0) + 1
        self.emit(tup.values)

    def on_inputs_finished(self) -> None:
        self.emit((-1, "total", self.counts.get("n", 0), -1))


class SlowCloseSpout(NumberSpout):
    """NumberSpout whose last call takes a while between its last emit and ``finish()``
    (a source closing its reader): checkpoint triggers arrive in between."""

    def next_tuple(self) -> None:
        if self.offset < len(self.mine) and not self.emit_next_call():
            return
        import time

        time.sleep(0.3)  # the slow close itself, not a wait for a condition
        self.finish()


def build(out: str, n: int) -> Any:
    b = TopologyBuilder("endofrun")
    b.set_spout("numbers", SlowCloseSpout(n=n, per_call=3), parallelism=2)
    b.set_bolt("count", CountAtEnd(), parallelism=1).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(out), parallelism=1).global_grouping("count")
    return b.build()


def test_drained_includes_what_end_of_input_emits_and_a_rerun_is_refused(tmp_path):
    out = tmp_path / "out"
    n = 300
    with LocalCluster(home=tmp_path / "home") as cluster:
        # a checkpoint every 10 ms: triggers keep arriving while the spouts emit their last
        handle = cluster.submit(build(str(out), n),
                                fast_config(checkpoint_interval_ms=10, workers=2))
        status = handle.wait(timeout=90)
        assert status["state"] == "drained"
    rows = read_committed(out)
    assert sorted(r["seq"] for r in rows if r["seq"] >= 0) == list(range(n))
    totals = [r for r in rows if r["key"] == "total"]
    assert [t["src_task"] for t in totals] == [n], "on_inputs_finished output not committed"

    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with LocalCluster(home=tmp_path / "home") as cluster, \
            pytest.raises(SinkError) as err:
        cluster.submit(build(str(out), n), fast_config())
    assert str(out) in str(err.value)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
