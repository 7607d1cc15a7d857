"""The ``stateful`` chaos job's outputs in log brokers: a Redis stream and a Kafka topic
(the ``fresh_run_into_used`` fault class, issue 23 hole 3; used by
:mod:`jstormpy.testing.chaos.scenarios` and :mod:`jstormpy.testing.chaos.reuse`).

:func:`start_brokers` starts a real ``redis-server`` (when installed:
:class:`~jstormpy.testing.servers.redis_server.RedisServer`, on a free port in a temp dir)
and librdkafka's mock Kafka cluster, hosted by this process (the chaos runner), so it
outlives every worker it SIGKILLs. The job then also writes its ``sum`` stream through a
two-phase-commit :class:`~jstormpy.connectors.RedisStreamSink` into a stream
(:data:`REDIS_STREAM`) and a transactional :class:`~jstormpy.connectors.kafka.KafkaSink`
into a topic (:data:`KAFKA_TOPIC`; keyed by the event key, so a key's records stay in one
partition, in order; its commit log read through the transaction markers, which is exact
on the mock).

:meth:`BrokerOutputs.mark` says where the output written so far ends (the last Redis entry
id; each Kafka partition's end offset); :meth:`BrokerOutputs.check` checks one run's
committed output, between two marks, per key as the FileSink's is checked: no event lost,
duplicated or reordered, running sums equal to a recomputation. What a reader of a real
cluster would see of Kafka is decided by the transaction markers
(:func:`jstormpy.connectors.kafka_markers.committed_records`); a transaction still staged
in Redis is a state problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jstormpy.testing.chaos.topologies import STATEFUL_FIELDS, Verdict, stateful_verdict

if TYPE_CHECKING:
    from jstormpy import TopologyBuilder

REDIS_STREAM = "chaos_out"
"""The Redis stream the ``stateful`` job writes."""
KAFKA_TOPIC = "chaos-out"
"""The Kafka topic the ``stateful`` job writes (auto-created by the mock cluster)."""


@dataclass(frozen=True)
class BrokerMark:
    """Where the brokers' output ended at some moment.

    Attributes:
        redis_last: The last entry id of the stream ("" if there was none or no Redis).
        kafka_ends: ``(partition, end offset)`` of the topic (records at or after it were
            written later).
    """

    redis_last: str = ""
    kafka_ends: tuple[tuple[int, int], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class BrokerOutputs:
    """The brokers the ``stateful`` job writes to (None: not written).

    Attributes:
        redis_url: ``redis://host:port/db`` of the Redis server.
        kafka_bootstrap: The Kafka bootstrap servers.
        redis_stream: The stream written.
        kafka_topic: The topic written.
    """

    redis_url: str | None = None
    kafka_bootstrap: str | None = None
    redis_stream: str = REDIS_STREAM
    kafka_topic: str = KAFKA_TOPIC

    def add_sinks(self, builder: TopologyBuilder, upstream: str, key: str,
                  parallelism: int) -> None:
        """Add the sinks ``redis`` and ``kafka`` to ``builder``, fed by ``upstream``
        grouped by ``key``."""
        if self.redis_url is not None:
            from jstormpy.connectors import RedisStreamSink

            builder.set_bolt("redis", RedisStreamSink(self.redis_url, self.redis_stream,
                                                      list(STATEFUL_FIELDS)),
                             parallelism=parallelism).fields_grouping(upstream, [key])
        if self.kafka_bootstrap is not None:
            from jstormpy.connectors.kafka import KafkaSink

            builder.set_bolt("kafka", KafkaSink(self.kafka_topic, self.kafka_bootstrap,
                                                key_field=key, value_field=None,
                                                commit_log_read="markers"),
                             parallelism=parallelism).fields_grouping(upstream, [key])

    def mark(self) -> BrokerMark:
        """Where the output written so far ends."""
        last = ""
        if self.redis_url is not None:
            import redis

            with redis.Redis.from_url(self.redis_url, decode_responses=True) as client:
                entries = client.xrevrange(self.redis_stream, count=1)
            last = str(entries[0][0]) if entries else ""
        ends: tuple[tuple[int, int], ...] = ()
        if self.kafka_bootstrap is not None:
            ends = _kafka_ends(self.kafka_bootstrap, self.kafka_topic)
        return BrokerMark(last, ends)

    def check(self, after: BrokerMark | None = None,
              upto: BrokerMark | None = None) -> list[tuple[str, Verdict]]:
        """``(where, verdict)`` of each broker's committed output after ``after`` up to
        ``upto`` (None: from the start / to the end): one run's output."""
        out = []
        if self.redis_url is not None:
            out.append(("in Redis", self._check_redis(after, upto)))
        if self.kafka_bootstrap is not None:
            out.append(("in Kafka", self._check_kafka(after, upto)))
        return out

    def _check_redis(self, after: BrokerMark | None, upto: BrokerMark | None) -> Verdict:
        import redis

        assert self.redis_url is not None
        low = f"({after.redis_last}" if after is not None and after.redis_last else "-"
        high = upto.redis_last if upto is not None and upto.redis_last else "+"
        with redis.Redis.from_url(self.redis_url, decode_responses=True) as client:
            entries = [] if upto is not None and not upto.redis_last else \
                client.xrange(self.redis_stream, min=low, max=high)
            staged = sorted(k for k in client.scan_iter(match="jstorm:2pc:*:staged")
                            if client.scard(k))
        verdict = stateful_verdict([{k: json.loads(v) for k, v in kv.items()}
                                    for _, kv in entries])
        if not staged:
            return verdict
        return _with_problem(verdict, f"transactions left staged: {staged}")

    def _check_kafka(self, after: BrokerMark | None, upto: BrokerMark | None) -> Verdict:
        from jstormpy.connectors.kafka_markers import committed_records

        assert self.kafka_bootstrap is not None
        low = dict(after.kafka_ends) if after is not None else {}
        high = dict(upto.kafka_ends) if upto is not None else None
        rows = [json.loads(m.value()) for m in committed_records(self.kafka_bootstrap,
                                                                 self.kafka_topic)
                if m.offset() >= low.get(m.partition(), 0)
                and (high is None or m.offset() < high.get(m.partition(), 0))]
        return stateful_verdict(rows)


def _with_problem(verdict: Verdict, problem: str) -> Verdict:
    return Verdict(lost=verdict.lost, duplicated=verdict.duplicated,
                   reordered=verdict.reordered, detail=verdict.detail,
                   state_problems=(*verdict.state_problems, problem))


def _kafka_ends(bootstrap: str, topic: str) -> tuple[tuple[int, int], ...]:
    """``(partition, high watermark)`` of ``topic`` (empty if it does not exist)."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "jstorm-chaos-mark",
                     "enable.auto.commit": False, "log_level": 3})
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return ()
        return tuple((p, int(c.get_watermark_offsets(ck.TopicPartition(topic, p),
                                                     timeout=10)[1]))
                     for p in sorted(meta.partitions))
    finally:
        c.close()


class BrokerServers:
    """The brokers started for a scenario (:func:`start_brokers`); :meth:`close` stops
    them."""

    def __init__(self) -> None:
        self.redis: Any = None
        self.kafka: Any = None
        """The producer that hosts the mock cluster (it lives as long as this does)."""
        self.outputs = BrokerOutputs()
        self.notes: tuple[str, ...] = ()

    def close(self) -> None:
        """Stop the Redis server and drop the mock Kafka cluster."""
        if self.redis is not None:
            self.redis.close()
            self.redis = None
        self.kafka = None


def start_brokers() -> BrokerServers:
    """Start a Redis server (if ``redis-server`` is installed; else a note says so) and a
    mock Kafka cluster in this process."""
    from jstormpy.connectors.kafka import kafka_bootstrap_of_mock
    from jstormpy.testing.servers.redis_server import RedisServer, find_redis_server

    servers = BrokerServers()
    notes = []
    redis_url = None
    try:
        if find_redis_server() is None:
            notes.append("no redis-server here: no Redis stream output")
        else:
            servers.redis = RedisServer()
            servers.redis.start()
            redis_url = servers.redis.url
            notes.append(f"output also to a Redis stream on port {servers.redis.port}")
        servers.kafka, bootstrap = kafka_bootstrap_of_mock(1)
        notes.append(f"output also to Kafka (mock cluster at {bootstrap})")
    except BaseException:
        servers.close()
        raise
    servers.outputs = BrokerOutputs(redis_url, bootstrap)
    servers.notes = tuple(notes)
    return servers


__all__ = ["KAFKA_TOPIC", "REDIS_STREAM", "BrokerMark", "BrokerOutputs", "BrokerServers",
           "start_brokers"]
