"""The SIGKILL chaos scenarios again, with checkpoints in HDFS (WebHDFS) and HBase (Thrift).

The protocol-level test servers run inside the test process; the Topology Master and the
worker processes reach them over loopback, exactly as they would reach a real NameNode or
HBase Thrift gateway. The exactly-once checks are the ones of ``test_exactly_once``.
"""

from __future__ import annotations

import pytest
from topologies import check_keyed_sums, check_word_counts, diamond, linear, wordcount, write_corpus

from jstormpy import Config
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 20, 2500


def _point(point: str, checkpoint: int, worker: int | None = None) -> Kill:
    return Kill("point", point=point, checkpoint=checkpoint, worker=worker)


# every scenario is run once per backend: worker kills at random times, a worker killed
# during a checkpoint (after its snapshot was stored), sink commit, TM commit point, TM kills
SCENARIOS = [
    ("linear", ChaosSchedule.random(seed=101, kills=1, workers=3)),
    ("linear", ChaosSchedule(102, (_point("after_snapshot", 2, worker=1),))),
    ("linear", ChaosSchedule(103, (Kill("master", at_s=0.9),))),
    ("diamond", ChaosSchedule(104, (_point("sink_before_commit", 2),))),
    ("diamond", ChaosSchedule(105, (_point("after_snapshot", 3, worker=0),
                                    Kill("worker", at_s=1.6, worker=2)))),
    ("wordcount", ChaosSchedule(106, (_point("master_after_metadata", 3),))),
    ("wordcount", ChaosSchedule(107, (Kill("master", at_s=0.7),
                                      Kill("worker", at_s=1.5, worker=1)))),
]


def _run(tmp_path, kind, schedule, backend_uri):
    out = tmp_path / "out"
    expected = None
    if kind == "wordcount":
        expected = write_corpus(tmp_path / "corpus")
        topo = wordcount(out, tmp_path / "corpus")
    else:
        topo = (linear if kind == "linear" else diamond)(out, KEYS, PER_KEY)
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000, state_backend=backend_uri)
    status, kills, _ = run_with_chaos(topo, config, schedule, timeout=150,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained", (kills, status)
    assert status["state_backend"] == backend_uri
    fired = [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))]
    assert fired, f"no kill happened: {kills}"
    assert status["restarts"] >= 1 or any("master" in k for k in fired), \
        (kills, status["recoveries"])
    completed = [c for c in status["checkpoints"] if c["status"] == "completed"]
    assert completed, status["checkpoints"]
    if kind == "wordcount":
        problems = check_word_counts(out, expected)
    else:
        problems = check_keyed_sums(out, KEYS, PER_KEY, per_parity_order=kind == "diamond")
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"


@pytest.mark.parametrize("kind,schedule", SCENARIOS,
                         ids=[f"{k}-seed{s.seed}" for k, s in SCENARIOS])
def test_exactly_once_hdfs_backend(tmp_path, webhdfs_server, kind, schedule):
    uri = f"hdfs://127.0.0.1:{webhdfs_server.port}/jstorm/ckpt"
    _run(tmp_path, kind, schedule, uri)
    # the checkpoints really live in the (test) HDFS namespace
    assert any((tmp_path / "hdfs").rglob("_metadata")), "no checkpoint metadata in HDFS"


@pytest.mark.parametrize("kind,schedule", SCENARIOS,
                         ids=[f"{k}-seed{s.seed}" for k, s in SCENARIOS])
def test_exactly_once_hbase_backend(tmp_path, hbase_server, kind, schedule):
    uri = f"hbase://127.0.0.1:{hbase_server.port}/jstorm_ckpt"
    _run(tmp_path, kind, schedule, uri)
    assert b"jstorm_ckpt" in hbase_server.handler.tables, "no checkpoint table in HBase"
