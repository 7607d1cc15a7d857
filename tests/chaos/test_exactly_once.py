"""Exactly-once under real SIGKILLs: seeded kill schedules over the topologies of
topologies.py (one with a Storm multilang spout and bolt in the path).

Each scenario runs a topology to completion while workers (and sometimes the Topology
Master) are SIGKILLed at random times or at precise protocol points, then checks the
committed output per key: no loss, no duplicate, no reordering, and final state equal
to a batch recomputation.
"""

from __future__ import annotations

import pytest
from topologies import (
    chained,
    check_keyed_sums,
    check_word_counts,
    diamond,
    linear,
    linear_batch,
    multilang,
    wordcount,
    write_corpus,
)

from jstormpy import Config
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 20, 2500
ML_KEYS, ML_PER_KEY = 10, 400  # through two subprocess hops

# (topology, schedule): random seeded schedules plus the hard protocol moments.
SCENARIOS = [
    ("linear", ChaosSchedule.random(seed=1, kills=1, workers=3)),
    ("linear", ChaosSchedule.random(seed=2, kills=2, workers=3)),
    ("linear", ChaosSchedule.random(seed=3, kills=2, workers=3, points=True)),
    ("linear", ChaosSchedule(4, (Kill("point", point="after_snapshot", checkpoint=2, worker=1),))),
    ("linear", ChaosSchedule(5, (Kill("point", point="sink_before_commit", checkpoint=2),))),
    ("linear", ChaosSchedule(6, (Kill("point", point="sink_after_commit", checkpoint=3),))),
    ("linear", ChaosSchedule(7, (Kill("master", at_s=0.9),))),
    ("linear", ChaosSchedule(8, (Kill("point", point="master_after_metadata", checkpoint=2),))),
    ("linear_batch", ChaosSchedule.random(seed=9, kills=2, workers=3)),
    ("linear_batch", ChaosSchedule(10, (Kill("point", point="after_snapshot", checkpoint=2,
                                             worker=1),))),
    ("diamond", ChaosSchedule.random(seed=11, kills=1, workers=3)),
    ("diamond", ChaosSchedule.random(seed=12, kills=2, workers=3)),
    ("diamond", ChaosSchedule.random(seed=13, kills=2, workers=3, points=True)),
    ("diamond", ChaosSchedule(14, (Kill("point", point="after_snapshot", checkpoint=3, worker=0),))),
    ("diamond", ChaosSchedule(15, (Kill("point", point="sink_before_commit", checkpoint=2),))),
    ("diamond", ChaosSchedule(16, (Kill("master", at_s=1.1), Kill("worker", at_s=1.8, worker=1)))),
    ("diamond", ChaosSchedule.random(seed=17, kills=3, workers=3, master=True)),
    ("chained", ChaosSchedule.random(seed=31, kills=2, workers=3)),
    ("chained", ChaosSchedule.random(seed=32, kills=2, workers=3, points=True)),
    ("chained", ChaosSchedule(33, (Kill("point", point="sink_before_commit", checkpoint=2),))),
    ("chained", ChaosSchedule(34, (Kill("point", point="after_snapshot", checkpoint=2,
                                        worker=2),))),
    ("chained", ChaosSchedule(35, (Kill("master", at_s=0.9),))),
    ("multilang", ChaosSchedule.random(seed=41, kills=1, workers=3)),
    ("multilang", ChaosSchedule.random(seed=42, kills=2, workers=3, points=True)),
    ("multilang", ChaosSchedule(43, (Kill("point", point="after_snapshot", checkpoint=2,
                                          worker=1),))),
    ("multilang", ChaosSchedule(44, (Kill("master", at_s=0.9),))),
    # the same pystorm classes as `python -m streamparse.run`: our pystorm runner
    ("multilang-runner", ChaosSchedule.random(seed=45, kills=2, workers=3, points=True)),
    ("multilang-runner", ChaosSchedule(46, (Kill("point", point="after_snapshot",
                                                 checkpoint=2, worker=1),))),
    ("wordcount", ChaosSchedule.random(seed=21, kills=1, workers=3)),
    ("wordcount", ChaosSchedule.random(seed=22, kills=2, workers=3)),
    ("wordcount", ChaosSchedule.random(seed=23, kills=2, workers=3, points=True)),
    ("wordcount", ChaosSchedule(24, (Kill("point", point="sink_after_commit", checkpoint=2),))),
    ("wordcount", ChaosSchedule(25, (Kill("point", point="master_after_metadata", checkpoint=3),))),
    ("wordcount", ChaosSchedule(26, (Kill("master", at_s=0.7),))),
    ("wordcount", ChaosSchedule.random(seed=27, kills=3, workers=3, master=True, points=True)),
]


def _config(tmp_path):
    return Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                  worker_timeout_ms=5000)


@pytest.mark.parametrize("kind,schedule", SCENARIOS,
                         ids=[f"{k}-seed{s.seed}" for k, s in SCENARIOS])
def test_exactly_once_under_sigkill(tmp_path, kind, schedule):
    out = tmp_path / "out"
    if kind == "wordcount":
        expected = write_corpus(tmp_path / "corpus")
        topo = wordcount(out, tmp_path / "corpus")
    elif kind in ("multilang", "multilang-runner"):
        topo = multilang(out, tmp_path / "acks", ML_KEYS, ML_PER_KEY,
                         runner=kind == "multilang-runner")
    else:
        topo = {"linear": linear, "linear_batch": linear_batch, "diamond": diamond,
                "chained": chained}[kind](out, KEYS, PER_KEY)
    status, kills, _ = run_with_chaos(topo, _config(tmp_path), schedule, timeout=120,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    fired = [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))]
    assert fired, f"no kill happened: {kills}"
    assert status["restarts"] >= 1 or any("master" in k for k in fired), (kills, status["recoveries"])
    if kind == "wordcount":
        problems = check_word_counts(out, expected)
    elif kind in ("multilang", "multilang-runner"):
        problems = check_keyed_sums(out, ML_KEYS, ML_PER_KEY)
    else:
        problems = check_keyed_sums(out, KEYS, PER_KEY, per_parity_order=kind == "diamond")
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"
    if kind == "chained":  # the run did chain (forward into events, out into sum)
        logs = "".join(p.read_text() for p in
                       (tmp_path / "home" / "runs" / "chaos-chained" / "logs").glob("worker-*.log"))
        assert "(forward) runs chained into task" in logs
        assert "(out) runs chained into task" in logs
