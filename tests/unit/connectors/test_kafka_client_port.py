"""KafkaSink's client port (``connectors/kafka_client.py``): every Kafka call of its commit
protocol goes through ``KafkaSink.client``, and a failed call becomes the sink's own error.

The sink's behaviour against a Kafka-protocol broker is tested in tests/connectors
(librdkafka's mock cluster); here a recording client shows which calls the protocol makes
and that a client error anywhere in it, the re-send of a restored pending transaction
included, is a SinkError (FencedError when the client says the producer was fenced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jstormpy.api.component import TopologyContext, Tuple, restore_managed_states
from jstormpy.api.errors import FencedError, SinkError
from jstormpy.connectors.kafka import ConfluentKafkaClient, KafkaSink
from jstormpy.connectors.kafka_client import ClientError


class _Err:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name

    def fatal(self) -> bool:
        return self._name == "PRODUCER_FENCED"

    def __str__(self) -> str:
        return f"KafkaError{{code={self._name}}}"


class _Producer:
    def __init__(self, client: _Client) -> None:
        self.client = client

    def _call(self, what: str) -> None:
        self.client.calls.append(what)
        if self.client.fail.get(what):
            raise ClientError(_Err(self.client.fail[what]))

    def init_transactions(self, timeout: float) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def produce(self, topic: str, value: bytes | None, key: bytes | None,
                headers: list[tuple[str, bytes]] | None,
                on_delivery: Callable[[Any, Any], None]) -> None:
        self._call(f"produce {topic} {value!r}")
        on_delivery(None, None)

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        self._call("flush")
        return 0

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit_transaction")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort_transaction")


class _Client:
    def __init__(self, committed: tuple[int, ...] = (),
                 fail: dict[str, str] | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail or {}
        self.committed = list(committed)

    def producer(self, settings: dict[str, Any]) -> _Producer:
        self.calls.append(f"producer {settings['transactional.id']}")
        return _Producer(self)

    def read_commit_log(self, bootstrap_servers: str, log_topic: str, key: str,
                        how: str) -> list[int]:
        self.calls.append(f"read {log_topic} {key}")
        return self.committed


def _sink(client: _Client, pending: dict[int, list[Any]] | None = None) -> KafkaSink:
    sink = KafkaSink("out", "broker:9092")
    sink.client = client
    if pending is not None:
        restore_managed_states(sink, {"kafka_sink_pending": dict(pending)})
    sink.prepare({}, TopologyContext(topology="t", component="k", task_id=3, task_index=0,
                                     worker_id=0))
    return sink


def test_production_talks_to_confluent_kafka() -> None:
    assert isinstance(KafkaSink.client, ConfluentKafkaClient)


def test_a_checkpoint_goes_through_the_client() -> None:
    client = _Client()
    sink = _sink(client)
    sink.begin(1)
    sink.write(Tuple(("a",), {"value": 0}, "src"))
    sink.pre_commit(1)
    sink.commit(1)
    assert client.calls == ["producer jstorm-t-k-3", "init_transactions", "begin_transaction",
                            "produce out b'a'", "produce out.jstorm-commits b'1'", "flush",
                            "commit_transaction"]


@pytest.mark.parametrize("fail, error", [("commit_transaction", SinkError),
                                         ("begin_transaction", SinkError)])
def test_a_failed_call_in_the_resend_of_a_pending_transaction_is_a_sink_error(
        fail: str, error: type[Exception]) -> None:
    """A restored pending transaction the commit log does not hold is re-sent in a new
    transaction; before the port, its begin and commit let confluent-kafka's
    KafkaException out as it was."""
    client = _Client(fail={fail: "_TIMED_OUT"})
    sink = _sink(client, pending={2: [(None, b"x")]})
    with pytest.raises(error, match=r"KafkaSink jstorm-t-k-3: .*(transaction 2|2).*_TIMED_OUT"):
        sink.commit(2)
    assert "read out.jstorm-commits jstorm-t-k-3" in client.calls


def test_a_fenced_commit_is_a_fenced_error() -> None:
    client = _Client(fail={"commit_transaction": "PRODUCER_FENCED"})
    sink = _sink(client, pending={2: [(None, b"x")]})
    with pytest.raises(FencedError, match="newer producer of this task took over"):
        sink.commit(2)


def test_a_pending_transaction_the_commit_log_holds_is_not_sent_again() -> None:
    client = _Client(committed=(2,))
    sink = _sink(client, pending={2: [(None, b"x")]})
    sink.commit(2)
    assert not [c for c in client.calls if c.startswith(("begin_", "produce ", "commit_"))]


def test_a_failed_init_is_a_sink_error_naming_the_broker() -> None:
    with pytest.raises(SinkError, match="init_transactions failed at broker:9092"):
        _sink(_Client(fail={"init_transactions": "_TRANSPORT"}))
