"""The client port of :class:`~jstormpy.connectors.kafka.KafkaSink`: the transactional
producer calls its commit protocol makes, and the read of its commit log.

Production's port is :class:`~jstormpy.connectors.kafka.ConfluentKafkaClient`
(confluent-kafka's ``Producer`` and :func:`~jstormpy.connectors.kafka.read_commit_log`,
the calls the sink always made). The simulator (``jstorm simulate``) gives the same sink a
simulated broker (a transactional log per partition with ``read_committed`` visibility,
producer epochs and fencing), so the sink it tests is the one production runs (issue 37):
its transactions, pre-commit, commit, the re-send of a restored pending transaction
guarded by the commit log, abort and recovery are not a copy.

A failed call raises :class:`ClientError` carrying what the client reported (an object
with ``name()``, ``fatal()`` and a message: confluent-kafka's ``KafkaError``); the sink
turns it into its own errors (:class:`~jstormpy.api.errors.SinkError`,
:class:`~jstormpy.api.errors.FencedError` when the error says a newer producer of the
``transactional.id`` fenced this one). ``produce`` raises ``BufferError`` while the
client's queue is full (the sink polls and retries).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["ClientError", "KafkaSinkClient", "TransactionalProducer"]


class ClientError(Exception):
    """A client call failed; :attr:`error` is what the client reported."""

    def __init__(self, error: Any) -> None:
        super().__init__(error)
        self.error = error
        """``name()`` (e.g. ``"_FENCED"``), ``fatal()`` and ``str`` (a ``KafkaError``)."""


class TransactionalProducer(Protocol):
    """A producer with a ``transactional.id``: one open transaction at a time."""

    def init_transactions(self, timeout: float) -> None:
        """Register the ``transactional.id`` with a new producer epoch: an older producer
        of it is fenced, and its open transaction aborted."""

    def begin_transaction(self) -> None:
        """Open a transaction (the records produced next belong to it)."""

    def produce(self, topic: str, value: bytes | None, key: bytes | None,
                headers: list[tuple[str, bytes]] | None,
                on_delivery: Callable[[Any, Any], None]) -> None:
        """Queue one record of the open transaction; ``on_delivery(err, msg)`` is called
        once the broker acknowledged it (``err`` None) or it failed."""

    def poll(self, timeout: float) -> int:
        """Serve delivery callbacks for up to ``timeout`` seconds."""

    def flush(self, timeout: float) -> int:
        """Send every queued record and serve its callback; how many are left unsent."""

    def commit_transaction(self, timeout: float) -> None:
        """Flush, then commit the open transaction (its records become visible)."""

    def abort_transaction(self, timeout: float) -> None:
        """Abort the open transaction (its records are never visible)."""


class KafkaSinkClient(Protocol):
    """What :class:`~jstormpy.connectors.kafka.KafkaSink` needs of Kafka."""

    def producer(self, settings: dict[str, Any]) -> TransactionalProducer:
        """A transactional producer with librdkafka ``settings`` (``bootstrap.servers``,
        ``transactional.id``, ...)."""

    def read_commit_log(self, bootstrap_servers: str, log_topic: str, key: str,
                        how: str) -> list[int]:
        """The checkpoint ids of the committed entries under ``key`` in ``log_topic``
        (:func:`~jstormpy.connectors.kafka.read_commit_log`)."""
