"""Rescaling a topology whose sink writes into a real external system (docs/rescaling.md).

PostgresSink (true two-phase commit: PREPARE TRANSACTION per task and checkpoint, a fencing
row per task), RedisStreamSink (staged transactions per task) and KafkaSink (a Kafka
transaction per task and checkpoint, ``transactional.id`` named after the task id) go
2 -> 3 -> 1 tasks together with their upstream stateful bolt, under load. Task ids shift
with each layout, so a transaction left prepared by an old task id, or a fence of the old
layout, would show up as a lost, duplicated or stuck row. A fresh connection then reads
what the system holds: every key's sequence complete, in order and once, running totals
recomputed from the input, and no prepared/staged/open transaction left behind.

Kafka runs on librdkafka's mock cluster hosted by the test process (or the real cluster of
``JSTORM_KAFKA_BOOTSTRAP``); what is committed is read as in test_kafka_topology.py: from
the transaction markers on the mock, whose ``read_committed`` consumer does not filter
aborted records, and with a ``read_committed`` consumer, checked against the markers, on
a real cluster (docs/kafka.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import psycopg
import pytest
import redis

from jstormpy import Config, LocalCluster, TopologyBuilder
from jstormpy.connectors import KafkaSink, PostgresSink, RedisStreamSink
from jstormpy.connectors.kafka import COMMIT_LOG_SUFFIX
from jstormpy.connectors.kafka_markers import partition_batches, transaction_states
from jstormpy.testing.servers.redis_server import RedisServer, read_json_stream
from tests.connectors.contract import wait_for
from tests.connectors.test_connectors_chaos import (
    KEYS,
    RunningSum,
    _check,
    _pg_prepared,
    _pg_rows,
    _pg_table,
)
from tests.connectors.test_kafka import REAL
from tests.connectors.test_kafka_topology import committed_output
from tests.integration.paced_spout import ReleasableSequenceSpout, release

pytestmark = pytest.mark.slow

PER_KEY = 3000  # 30,000 events at 1,400/s: the run outlasts both rescales


def _release_file(tmp_path: Path) -> Path:
    """Paced until both rescales are done, then the rest at full speed
    (tests/integration/paced_spout.py)."""
    return tmp_path / "release"


def _topology(name: str, sink: Any, tmp_path: Path) -> Any:
    b = TopologyBuilder(name)
    b.set_spout("events", ReleasableSequenceSpout(_release_file(tmp_path), keys=KEYS,
                                                  per_key=PER_KEY, rate_per_s=700),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", sink, parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


def _parallelism(handle: Any, component: str) -> int:
    return next(c["parallelism"] for c in handle.status()["components"]
                if c["name"] == component)


def _rescale_up_then_down(tmp_path: Path, topology: Any, committed: Callable[[], int]) -> None:
    """Run ``topology``; rescale sum and out 2 -> 3 -> 1 while rows keep coming."""
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster(home=str(tmp_path / "home")) as cluster:
        handle = cluster.submit(topology, conf)
        wait_for(lambda: committed() > 1500, 60, "some committed rows")
        up = handle.rescale({"sum": 3, "out": 3})
        assert up["error"] == "", up
        assert (_parallelism(handle, "sum"), _parallelism(handle, "out")) == (3, 3)
        before = committed()
        wait_for(lambda: committed() > before + 1500, 60, "rows from three sink tasks")
        down = handle.rescale({"sum": 1, "out": 1})
        assert down["error"] == "", down
        assert (_parallelism(handle, "sum"), _parallelism(handle, "out")) == (1, 1)
        assert committed() < KEYS * PER_KEY, "the run ended before the second rescale"
        release(_release_file(tmp_path))  # the scenario is over: the rest at full speed
        status = handle.wait(timeout=240)
    assert status["state"] == "drained", status
    assert status["restarts"] == 0, status["recoveries"]


def test_postgres_sink_rescales_with_its_upstream(tmp_path: Path, pg_dsn: str) -> None:
    _pg_table(pg_dsn)

    def committed() -> int:
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM totals").fetchone()
        return int(row[0]) if row else 0

    sink = PostgresSink(pg_dsn, "totals", ["key", "seq", "value", "total"])
    _rescale_up_then_down(tmp_path, _topology("pg-rescale", sink, tmp_path), committed)
    rows = _pg_rows(pg_dsn)
    assert len(rows) == KEYS * PER_KEY
    _check(rows, PER_KEY)
    assert _pg_prepared(pg_dsn) == [], "prepared transactions left behind"


def test_redis_sink_rescales_with_its_upstream(tmp_path: Path,
                                               redis_server: RedisServer) -> None:
    url = redis_server.url

    def committed() -> int:
        with redis.Redis.from_url(url) as client:
            return int(client.xlen("out"))

    sink = RedisStreamSink(url, "out")
    _rescale_up_then_down(tmp_path, _topology("redis-rescale", sink, tmp_path), committed)
    rows = read_json_stream(url, "out")
    assert len(rows) == KEYS * PER_KEY
    _check(rows, PER_KEY)
    with redis.Redis.from_url(url, decode_responses=True) as client:
        assert list(client.scan_iter("jstorm:2pc:*:txn:*")) == [], \
            "staged transactions left behind"


def test_kafka_sink_rescales_with_its_upstream(tmp_path: Path, bootstrap: str) -> None:
    topic = f"rescale-{uuid.uuid4().hex[:8]}"
    log = topic + COMMIT_LOG_SUFFIX
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for t in (topic, log):
        producer.list_topics(t, timeout=10)  # auto-creates it: the probe below reads it

    def committed() -> int:
        return sum(1 for state in transaction_states(bootstrap, topic).values()
                   if state == "committed")

    sink = KafkaSink(topic, bootstrap, key_field="key", value_field=None,
                     commit_log_read="read_committed" if REAL else "markers")
    _rescale_up_then_down(tmp_path, _topology("kafka-rescale", sink, tmp_path), committed)
    rows = committed_output(bootstrap, topic, decode=lambda m: json.loads(m.value()))
    assert len(rows) == KEYS * PER_KEY
    _check(rows, PER_KEY)
    left = [(t, b) for t in (topic, log) for b in partition_batches(bootstrap, t)
            if b.state == "open"]
    assert left == [], "Kafka transactions left open (neither committed nor aborted)"
