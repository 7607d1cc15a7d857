"""A sink commit that fails with SinkUnavailableError is retried, also after the last
checkpoint of a bounded job (no later checkpoint completes to retry it at).

The sink is a FileSink whose ``commit`` of every transaction fails once as if its system
were briefly unreachable; the job must still drain, with every record committed once.
"""

from __future__ import annotations

from typing import Any

import pytest

from jstormpy import Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder
from jstormpy.api.errors import SinkUnavailableError
from jstormpy.connectors import read_committed
from jstormpy.testing.semantics import check_sequences

pytestmark = pytest.mark.slow


class CommitFailsOnceSink(FileSink):
    """Each transaction's first ``commit`` raises SinkUnavailableError (then succeeds)."""

    def commit(self, checkpoint_id: int) -> None:
        failed = self.__dict__.setdefault("_failed_once", set())
        if checkpoint_id not in failed:
            failed.add(checkpoint_id)
            raise SinkUnavailableError(f"test: commit of {checkpoint_id} fails once")
        super().commit(checkpoint_id)


def test_deferred_commit_of_the_final_checkpoint_is_retried(tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    b = TopologyBuilder("commit-retry")
    b.set_spout("s", SequenceSpout(keys=4, per_key=300, rate_per_s=1000), parallelism=1)
    b.set_bolt("out", CommitFailsOnceSink(out)).shuffle_grouping("s")
    config = Config(workers=1, guarantee="exactly_once", checkpoint_interval_ms=100)
    with LocalCluster(home=str(tmp_path / "home")) as cluster:
        status = cluster.submit(b.build(), config).wait(timeout=60)
    assert status["state"] == "drained", (
        f"the job did not drain ({status['state']}): the deferred commit of the final "
        f"checkpoint {status.get('final_checkpoint')} was never retried")
    assert status["restarts"] == 0, status["recoveries"]
    report = check_sequences(read_committed(out), key="key", seq="seq",
                             expected={f"k{i}": 300 for i in range(4)})
    assert report.ok, report.summary()
