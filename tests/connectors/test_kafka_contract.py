"""KafkaSink passes the two-phase-commit sink contract (tests/connectors/contract.py).

On librdkafka's mock cluster (default) a ``read_committed`` consumer also returns aborted
and open records, so the harness never trusts it: it decides what is committed and what is
staged from the transaction markers in the partition logs
(:mod:`jstormpy.connectors.kafka_markers`), and the sink reads its own commit log the same
way (``commit_log_read="markers"``). With ``JSTORM_KAFKA_BOOTSTRAP`` the sink uses its
default ``read_committed`` reader and the harness also checks that ``read_committed`` agrees.

What the harness declares Kafka cannot do (the contract's ``capability``):

* ``staged_limit = 1``: one open transaction per ``transactional.id``; later pre-committed
  transactions wait in the task's checkpoint (docs/kafka.md);
* ``recovers_unlisted = False``: a recovery commits the staged transactions the restored
  snapshot lists (the engine always gives that list), not others;
* ``fences`` only on a real cluster: the mock lets an old producer epoch still commit.

"Staged" on the log: a transaction with records (or its commit-log entry) and no marker,
written after the task's latest ``init_transactions``. A real coordinator aborts a task's
open transaction when a new producer of it initialises; the mock gives the new producer a
new producer id and leaves the old transaction open forever, so the harness records where
each task's logs ended at its latest ``prepare`` and counts open transactions below that
as aborted -- Kafka's fencing rule, applied by the reader.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from jstormpy.api.component import TopologyContext
from jstormpy.connectors.kafka import TXN_HEADER, KafkaSink
from jstormpy.connectors.kafka_markers import committed_records, records_with_states
from tests.connectors.contract import TOPOLOGY, SinkContract

ck = pytest.importorskip("confluent_kafka")

from tests.connectors.test_kafka import REAL, read_all  # noqa: E402


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark of every partition of ``topic``."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "jstorm-ends", "log_level": 3})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
                for p in parts}
    finally:
        c.close()


class KafkaSinkHarness:
    """A fresh output topic (auto-created) and its commit log.

    The sink writes records without a key and ``partitioner=consistent`` (a null key maps
    to a single partition), so offset order is commit order; the row is the JSON value.
    (The mock cluster has no controller, so topics cannot be created with one partition.)
    """

    staged_limit = 1
    recovers_unlisted = False
    fences = bool(REAL)

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.topic = f"sink-{uuid.uuid4().hex[:10]}"
        self.log = self.topic + ".jstorm-commits"
        p = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
        for t in (self.topic, self.log):
            p.list_topics(t, timeout=10)  # auto-creates it
        self.fenced_below: dict[str, dict[str, dict[int, int]]] = {}

    def make_sink(self) -> KafkaSink:
        harness = self

        class TrackedSink(KafkaSink):
            def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
                super().prepare(conf, context)
                # init_transactions done: what the task wrote so far is fenced
                harness.fenced_below[self.transactional_id] = {
                    t: end_offsets(harness.bootstrap, t) for t in (harness.topic, harness.log)}

        how = "read_committed" if REAL else "markers"
        return TrackedSink(self.topic, self.bootstrap, key_field=None, value_field=None,
                           commit_log_read=how, partitioner="consistent")

    def committed(self) -> list[dict[str, Any]]:
        rows = [json.loads(m.value()) for m in committed_records(self.bootstrap, self.topic)]
        if REAL:  # a real cluster's read_committed must agree with the markers
            real = [json.loads(m.value())
                    for m in read_all(self.bootstrap, self.topic, "read_committed")]
            assert real == rows
        return rows

    def staged(self) -> list[str]:
        names: set[str] = set()
        for topic in (self.topic, self.log):
            for m, state in records_with_states(self.bootstrap, topic):
                if state != "open":
                    continue
                if topic == self.log:
                    tid, cid = m.key().decode(), m.value().decode()
                else:
                    tid, cid = dict(m.headers())[TXN_HEADER].decode().rsplit(":", 1)
                if m.offset() < self.fenced_below.get(tid, {}).get(topic, {}).get(
                        m.partition(), 0):
                    continue  # left by an earlier producer of the task: aborted by fencing
                task = tid.rsplit("-", 1)[1]
                names.add(f"jstorm-{TOPOLOGY}-{task}-{cid}")
        return sorted(names)


class TestKafkaSinkContract(SinkContract):
    @pytest.fixture
    def harness(self, bootstrap: str) -> KafkaSinkHarness:
        return KafkaSinkHarness(bootstrap)


def test_pre_committed_transactions_queue_up_in_order(bootstrap: str) -> None:
    """Three barriers before the first completion (one Kafka transaction at a time): every
    transaction is committed once, in checkpoint order, none lost or overwritten."""
    from tests.connectors.contract import SinkDriver, rows_for, triples

    h = KafkaSinkHarness(bootstrap)
    d = SinkDriver(h)
    done = []
    for i in range(3):
        d.write(rows_for("a", range(i * 3, i * 3 + 3)))
        done.append(d.barrier())
    assert h.staged() == [f"jstorm-{TOPOLOGY}-1-{done[0]}"]  # the others wait in the state
    for n in done:
        d.complete(n)
    assert triples(h.committed()) == rows_for("a", range(9))
    assert h.staged() == []
    d.close()


def test_bad_commit_log_read_is_a_clear_error() -> None:
    from jstormpy.api.errors import SinkError

    with pytest.raises(SinkError, match="commit_log_read"):
        KafkaSink("t", "x:1", commit_log_read="sometimes")
