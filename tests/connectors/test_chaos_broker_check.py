"""The chaos harness's Redis stream and Kafka topic checks (``fresh_run_into_used`` writes
the stateful job's output there too, :mod:`jstormpy.testing.chaos.brokers`): two runs'
exactly-once output passes, each run checked between marks; a re-committed span and a lost
entry in the second run are reported against that run only; aborted Kafka transactions do
not count; a Redis transaction left staged is reported. On a real redis-server and
librdkafka's mock Kafka cluster."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from jstormpy import SequenceSpout
from jstormpy.testing.chaos import Verdict
from jstormpy.testing.chaos.brokers import BrokerOutputs
from jstormpy.testing.chaos.topologies import KEYS, PER_KEY, STATEFUL_FIELDS
from jstormpy.testing.servers.redis_server import RedisServer, append_json

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.slow  # real servers, two runs of output each


def _rows() -> list[dict[str, Any]]:
    """One run's exactly-once output, key after key."""
    rows = []
    for k in range(KEYS):
        total = 0
        for s in range(PER_KEY):
            total += SequenceSpout.value_of(s)
            rows.append(dict(zip(STATEFUL_FIELDS, (f"k{k}", s, SequenceSpout.value_of(s),
                                                   total, s + 1), strict=True)))
    return rows


def _broken(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with k0 seq 100..129 committed twice and k1 seq 7 lost."""
    rows = list(rows)
    span = rows[100:130]
    del rows[PER_KEY + 7]
    return rows[:130] + span + rows[130:]


def _assert_broken(v: Verdict) -> None:
    assert (v.lost, v.duplicated) == (1, 30), v
    assert any("k0" in p for p in v.state_problems), v.state_problems


def _redis_write(url: str, stream: str, rows: list[dict[str, Any]]) -> None:
    append_json(url, [(stream, r) for r in rows])


def test_redis_runs_between_marks(redis_server: RedisServer) -> None:
    out = BrokerOutputs(redis_url=redis_server.url, redis_stream="s1")
    _redis_write(redis_server.url, "s1", _rows())
    first = out.mark()
    _redis_write(redis_server.url, "s1", _broken(_rows()))
    assert out.check(upto=first) == [("in Redis", Verdict())]
    [(where, second)] = out.check(after=first)
    assert where == "in Redis"
    _assert_broken(second)
    [(_, both)] = out.check()
    assert both.duplicated >= KEYS * PER_KEY  # both runs read as one: every event twice


def test_a_redis_transaction_left_staged_is_reported(redis_server: RedisServer) -> None:
    import redis

    out = BrokerOutputs(redis_url=redis_server.url, redis_stream="s2")
    _redis_write(redis_server.url, "s2", _rows())
    with redis.Redis.from_url(redis_server.url) as client:
        client.sadd("jstorm:2pc:chaos-stateful:7:staged", 4)
    [(_, v)] = out.check()
    assert (v.lost, v.duplicated) == (0, 0)
    assert any("chaos-stateful:7:staged" in p for p in v.state_problems), v.state_problems


def _kafka_write(bootstrap: str, topic: str, rows: list[dict[str, Any]],
                 commit: bool = True) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3,
                     "transactional.id": f"t-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for r in rows:
        p.produce(topic, key=r["key"], value=json.dumps(r))
    p.flush(30)
    (p.commit_transaction if commit else p.abort_transaction)(30)


def test_kafka_runs_between_marks_and_aborted_records_do_not_count(bootstrap: str) -> None:
    topic = f"chaos-{uuid.uuid4().hex[:8]}"
    out = BrokerOutputs(kafka_bootstrap=bootstrap, kafka_topic=topic)
    _kafka_write(bootstrap, topic, _rows())
    _kafka_write(bootstrap, topic, _rows()[:500], commit=False)  # aborted: invisible
    first = out.mark()
    assert first.kafka_ends and all(end > 0 for _, end in first.kafka_ends)
    _kafka_write(bootstrap, topic, _broken(_rows()))
    assert out.check(upto=first) == [("in Kafka", Verdict())]
    [(where, second)] = out.check(after=first)
    assert where == "in Kafka"
    _assert_broken(second)
