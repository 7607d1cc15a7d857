"""KafkaSpout → KafkaSink through a running topology (real worker processes).

The mock cluster is hosted by this test process and outlives every worker (the workers
connect to it over TCP), so a worker can be SIGKILLed without losing the "broker".

On the mock, a fresh ``read_committed`` consumer also sees records of aborted and open
transactions (docs/kafka.md). So what a ``read_committed`` reader of a real cluster would
see is decided from the transaction markers in the output topic's log
(:func:`jstormpy.connectors.kafka_markers.committed_records`), and the sink reads its commit
log the same way (``commit_log_read="markers"``). With ``JSTORM_KAFKA_BOOTSTRAP`` the sink
uses its default ``read_committed`` reader and the check reads with ``read_committed`` --
and asserts that the markers agree.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from jstormpy import Config, TopologyBuilder
from jstormpy.connectors.kafka import KafkaSink, KafkaSpout
from jstormpy.connectors.kafka_markers import committed_records, records_with_states
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos
from jstormpy.testing.semantics import check_sequences
from tests.connectors.test_kafka import REAL, read_all

ck = pytest.importorskip("confluent_kafka")

KEYS, PER_KEY = 8, 1000


def produce_input(servers: str, prefix: str = "k") -> str:
    """``PER_KEY`` records ``({prefix}{i}, seq)`` per key, keyed (one partition per key)."""
    topic = f"in-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({"bootstrap.servers": servers, "log_level": 3})
    for seq in range(PER_KEY):
        for k in range(KEYS):
            p.produce(topic, key=f"{prefix}{k}", value=str(seq))
    assert p.flush(30) == 0
    return topic


class PacedKafkaSpout(KafkaSpout):
    """A few records per call and a short pause, so that a run spans several checkpoints
    and the fault points at checkpoint 2 are reached (unpaced, the whole input can drain
    within the first checkpoint interval)."""

    def next_tuple(self) -> None:
        super().next_tuple()
        time.sleep(0.005)


def build(servers: str, src: str, dst: str, name: str = "") -> Any:
    b = TopologyBuilder(name or f"kafka-{uuid.uuid4().hex[:6]}")
    b.set_spout("in", PacedKafkaSpout(src, servers, bounded=True, idle_timeout_ms=None,
                                      batch=20), parallelism=2)
    how = "read_committed" if REAL else "markers"
    b.set_bolt("out", KafkaSink(dst, servers, key_field="key", commit_log_read=how),
               parallelism=2).fields_grouping("in", ["key"])
    return b.build()


def key_and_seq(m: Any) -> dict[str, Any]:
    """A record written by :func:`build`'s sink: key ``k{i}``, value the sequence number."""
    return {"key": m.key().decode(), "seq": int(m.value())}


def committed_output(servers: str, topic: str,
                     decode: Callable[[Any], dict[str, Any]] = key_and_seq
                     ) -> list[dict[str, Any]]:
    """What a fresh ``read_committed`` reader sees, per partition in offset order, each
    record turned into a row by ``decode``. On the mock (whose ``read_committed`` returns
    aborted and open records too) the transaction markers decide; on a real cluster a
    ``read_committed`` consumer reads it, and must agree with the markers."""
    got = [decode(m) for m in committed_records(servers, topic)]
    if REAL:
        real = [decode(m) for m in read_all(servers, topic, "read_committed")]
        assert real == got, "read_committed and the transaction markers disagree"
    return got


def run(tmp_path: Any, servers: str, schedule: ChaosSchedule) -> tuple[dict[str, Any], list[str],
                                                                       str]:
    src = produce_input(servers)
    dst = f"out-{uuid.uuid4().hex[:8]}"
    config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=100,
                    worker_timeout_ms=5000)
    status, kills, _ = run_with_chaos(build(servers, src, dst), config, schedule,
                                      timeout=120, home=str(tmp_path / "home"))
    assert status["state"] == "drained", (status, kills)
    return status, kills, dst


@pytest.mark.slow
def test_kafka_to_kafka_through_the_engine(tmp_path: Any, bootstrap: str) -> None:
    _, _, dst = run(tmp_path, bootstrap, ChaosSchedule(seed=0))
    report = check_sequences(committed_output(bootstrap, dst), key="key", seq="seq",
                             expected={f"k{k}": PER_KEY for k in range(KEYS)})
    assert report.ok, report.summary()


SIGKILL_SCENARIOS = [
    ChaosSchedule.random(seed=31, kills=1, workers=2, window_s=(0.2, 0.8)),
    # the crash between pre-commit and commit: checkpoint 2 completed, a sink task dies
    # before it commits its transaction 2, which stays behind in the log (never visible)
    ChaosSchedule(32, (Kill("point", point="sink_before_commit", checkpoint=2),)),
    ChaosSchedule(33, (Kill("point", point="after_snapshot", checkpoint=2),)),
]


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SIGKILL_SCENARIOS, ids=lambda s: f"seed{s.seed}")
def test_kafka_exactly_once_under_sigkill(tmp_path: Any, bootstrap: str,
                                          schedule: ChaosSchedule) -> None:
    status, kills, dst = run(tmp_path, bootstrap, schedule)
    assert any(k.startswith(("SIGKILL", "fault point fired")) for k in kills), (kills, status)
    assert status["restarts"] >= 1, (kills, status["recoveries"])
    report = check_sequences(committed_output(bootstrap, dst), key="key", seq="seq",
                             expected={f"k{k}": PER_KEY for k in range(KEYS)})
    assert report.ok, f"{schedule.describe()}\n{kills}\n{report.summary()}"
    if schedule.seed == 32:
        # the pre-committed transaction the crash left behind is in the log, not committed
        left = [m for topic in (dst, dst + ".jstorm-commits")  # output, its commit log
                for m, state in records_with_states(bootstrap, topic)
                if state in ("open", "aborted")]
        assert left, "the crash between pre-commit and commit left no transaction behind"


@pytest.mark.slow
def test_fresh_run_into_a_used_commit_log_loses_nothing(tmp_path: Any, bootstrap: str) -> None:
    """Issue 23, hole 3: a second, fresh run of the same topology into the same topic (so
    the same transactional ids and commit log). Its checkpoint ids restart at 1 while the
    commit log still holds the first run's entries; a crash between complete(2) and
    commit(2) must re-send transaction 2, not take it for the first run's committed 2."""
    name = f"kafka-{uuid.uuid4().hex[:6]}"
    dst = f"out-{uuid.uuid4().hex[:8]}"
    home = str(tmp_path / "home")
    config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=100,
                    worker_timeout_ms=5000)
    first = build(bootstrap, produce_input(bootstrap, "a"), dst, name)
    status, kills, _ = run_with_chaos(first, config, ChaosSchedule(seed=0), timeout=120,
                                      home=home)
    assert status["state"] == "drained", (status, kills)
    second = build(bootstrap, produce_input(bootstrap, "b"), dst, name)
    crash = ChaosSchedule(41, (Kill("point", point="sink_before_commit", checkpoint=2),))
    status, kills, _ = run_with_chaos(second, config, crash, timeout=120, home=home)
    assert status["state"] == "drained", (status, kills)
    assert any(k.startswith("fault point fired") for k in kills), kills
    expected = {f"{p}{k}": PER_KEY for p in "ab" for k in range(KEYS)}
    report = check_sequences(committed_output(bootstrap, dst), key="key", seq="seq",
                             expected=expected)
    assert report.ok, f"{kills}\n{report.summary()}"
