"""The transaction-marker reader tells committed, aborted, open and plain records apart.

Against librdkafka's mock cluster (whose ``read_committed`` cannot), or a real cluster with
``JSTORM_KAFKA_BOOTSTRAP`` (where it must agree with ``read_committed``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from jstormpy.connectors.kafka_markers import (
    committed_records,
    partition_batches,
    records_with_states,
)

ck = pytest.importorskip("confluent_kafka")

from tests.connectors.test_kafka import REAL, read_all  # noqa: E402


def _txn_producer(bootstrap: str, tid: str) -> Any:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(10)
    return p


def test_every_outcome_is_told_apart(bootstrap: str) -> None:
    topic = f"m-{uuid.uuid4().hex[:8]}"
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    plain = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    plain.list_topics(topic, timeout=10)
    plain.produce(topic, key="plain", value="0", partition=0)
    assert plain.flush(10) == 0
    a = _txn_producer(bootstrap, tid)
    for key, end in (("committed", "commit"), ("aborted", "abort"), ("left-open", None)):
        a.begin_transaction()
        a.produce(topic, key=key, value="1", partition=0)
        assert a.flush(10) == 0
        if end == "commit":
            a.commit_transaction(10)
        elif end == "abort":
            a.abort_transaction(10)
    b = _txn_producer(bootstrap, tid)  # the task restarts: fences a, aborts its open txn
    b.begin_transaction()
    b.produce(topic, key="after-restart", value="2", partition=0)
    assert b.flush(10) == 0
    b.commit_transaction(10)

    states = {m.key().decode(): s for m, s in records_with_states(bootstrap, topic)}
    assert states["plain"] == "plain"
    assert states["committed"] == "committed"
    assert states["aborted"] == "aborted"
    # a real coordinator aborts it at b's init_transactions; the mock leaves it open
    assert states["left-open"] in ("open", "aborted")
    assert states["after-restart"] == "committed"
    visible = [m.key().decode() for m in committed_records(bootstrap, topic)]
    assert visible == ["plain", "committed", "after-restart"]
    markers = [b.marker for b in partition_batches(bootstrap, topic) if b.state == "marker"]
    assert markers.count("COMMIT") == 2 and "ABORT" in markers
    if REAL:
        assert [m.key().decode() for m in read_all(bootstrap, topic, "read_committed")] == visible
    else:  # the mock's read_committed returns aborted records: why this reader exists
        mock_view = [m.key().decode() for m in read_all(bootstrap, topic, "read_committed")]
        assert "aborted" in mock_view


def test_an_empty_topic_has_no_committed_records(bootstrap: str) -> None:
    topic = f"m-{uuid.uuid4().hex[:8]}"
    ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(topic, timeout=10)
    assert committed_records(bootstrap, topic) == []
