"""KafkaSpout → KafkaSink through a running topology (real worker processes).

The mock cluster is hosted by this test process and outlives every worker (the workers
connect to it over TCP), so a worker can be SIGKILLed without losing the "broker".

On the mock, a fresh consumer also sees records of aborted transactions (docs/kafka.md),
so the SIGKILL scenario, whose proof is exactly that aborted records stay invisible, runs
only against a real cluster (``JSTORM_KAFKA_BOOTSTRAP``). Without kills nothing is ever
aborted, so the run through the engine is checked on the mock too.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from jstormpy import Config, TopologyBuilder
from jstormpy.connectors.kafka import KafkaSink, KafkaSpout
from jstormpy.testing.chaos import ChaosSchedule, run_with_chaos
from jstormpy.testing.semantics import check_sequences
from tests.connectors.test_kafka import REAL, bootstrap, read_all  # noqa: F401 - fixture

ck = pytest.importorskip("confluent_kafka")

KEYS, PER_KEY = 8, 400


def produce_input(servers: str) -> str:
    """``PER_KEY`` records ``(k{i}, seq)`` per key, keyed (one partition per key)."""
    topic = f"in-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({"bootstrap.servers": servers, "log_level": 3})
    for seq in range(PER_KEY):
        for k in range(KEYS):
            p.produce(topic, key=f"k{k}", value=str(seq))
    assert p.flush(30) == 0
    return topic


def build(servers: str, src: str, dst: str) -> Any:
    b = TopologyBuilder(f"kafka-{uuid.uuid4().hex[:6]}")
    b.set_spout("in", KafkaSpout(src, servers, bounded=True, idle_timeout_ms=None),
                parallelism=2)
    b.set_bolt("out", KafkaSink(dst, servers, key_field="key"),
               parallelism=2).fields_grouping("in", ["key"])
    return b.build()


def committed_output(servers: str, topic: str) -> list[dict[str, Any]]:
    iso = "read_committed" if REAL else "read_uncommitted"
    return [{"key": m.key().decode(), "seq": int(m.value())}
            for m in read_all(servers, topic, iso)]


def run(tmp_path: Any, servers: str, schedule: ChaosSchedule) -> tuple[dict[str, Any], list[str],
                                                                       str]:
    src = produce_input(servers)
    dst = f"out-{uuid.uuid4().hex[:8]}"
    config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000)
    status, kills, _ = run_with_chaos(build(servers, src, dst), config, schedule,
                                      timeout=120, home=str(tmp_path / "home"))
    assert status["state"] == "drained", (status, kills)
    return status, kills, dst


@pytest.mark.slow
def test_kafka_to_kafka_through_the_engine(tmp_path: Any, bootstrap: str) -> None:  # noqa: F811
    _, _, dst = run(tmp_path, bootstrap, ChaosSchedule(seed=0))
    report = check_sequences(committed_output(bootstrap, dst), key="key", seq="seq",
                             expected={f"k{k}": PER_KEY for k in range(KEYS)})
    assert report.ok, report.summary()


@pytest.mark.slow
@pytest.mark.skipif(not REAL, reason="the mock cluster's fresh consumers also see aborted "
                    "records, so no-duplicate cannot be checked there (JSTORM_KAFKA_BOOTSTRAP)")
@pytest.mark.parametrize("seed", [31, 32])
def test_kafka_exactly_once_under_sigkill(tmp_path: Any, bootstrap: str,  # noqa: F811
                                          seed: int) -> None:
    schedule = ChaosSchedule.random(seed=seed, kills=1, workers=2)
    status, kills, dst = run(tmp_path, bootstrap, schedule)
    assert any(k.startswith("SIGKILL") for k in kills), kills
    report = check_sequences(committed_output(bootstrap, dst), key="key", seq="seq",
                             expected={f"k{k}": PER_KEY for k in range(KEYS)})
    assert report.ok, f"{schedule.describe()}\n{kills}\n{report.summary()}"
