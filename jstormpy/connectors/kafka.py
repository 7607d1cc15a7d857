"""Kafka connectors (``confluent-kafka``): a replayable spout and a transactional sink.

``KafkaSpout``: partitions are the splits; the offset reached on each partition lives in
the checkpoint (the spout's snapshot) and is never committed to the broker ahead of it --
the consumer has ``enable.auto.commit=false`` and reads by explicit ``assign`` at the
restored offsets, so a rollback rewinds exactly. Watermarks come from the record
timestamps (minimum over the partitions that are not idle); a partition that delivered
nothing for ``idle_timeout_ms`` marks itself idle (see :mod:`jstormpy.connectors.splits`).

``KafkaSink``: Kafka transactions, one ``transactional.id`` per sink task, stable across
restarts (``jstorm-{topology}-{component}-{task_id}``), one transaction per checkpoint.
See docs/kafka.md for the protocol and for what happens to a pre-committed transaction
across a crash (confluent-kafka cannot resume another process's transaction, so the sink
keeps the pre-committed records in its checkpoint and re-sends them in a new transaction,
guarded by a commit log written inside each transaction, whose entries are kept per run:
:func:`commit_log_key`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import FencedError, SinkError, SourceError
from jstormpy.barrier.twophase import Sink
from jstormpy.connectors.kafka_client import ClientError, KafkaSinkClient
from jstormpy.connectors.splits import ReplayableSpout, SplitRecord
from jstormpy.run_identity import RunIdentity

__all__ = ["ConfluentKafkaClient", "KafkaSink", "KafkaSpout", "commit_log_key",
           "kafka_bootstrap_of_mock", "read_commit_log"]

_log = logging.getLogger(__name__)

TXN_HEADER = "jstorm-txn"
"""Header on every record the sink writes: ``{transactional_id}:{checkpoint_id}``."""

COMMIT_LOG_SUFFIX = ".jstorm-commits"
"""The sink's commit log topic is ``{topic}{COMMIT_LOG_SUFFIX}`` unless ``commit_log_topic``."""

STABLE_TIMEOUT_S = 120.0
"""How long :func:`read_commit_log` waits for open transactions in the commit log to end:
more than Kafka's default ``transaction.timeout.ms`` (60 s), after which the broker aborts
the transaction of a producer that is gone."""

COMMIT_LOG_READS = ("read_committed", "markers")
"""How a restarted sink reads its commit log: a ``read_committed`` consumer (default), or
the transaction markers themselves (:mod:`jstormpy.connectors.kafka_markers`; plaintext
listeners only), which is exact on librdkafka's mock cluster too."""

_FENCED_CODES = ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH",
                 "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")


def _ck() -> Any:
    try:
        import confluent_kafka
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise SourceError("the Kafka connectors need confluent-kafka "
                          "(pip install confluent-kafka)") from exc
    return confluent_kafka


def kafka_bootstrap_of_mock(num_brokers: int = 1) -> tuple[Any, str]:
    """Start librdkafka's mock cluster in this process; ``(handle, bootstrap_servers)``.

    The cluster lives as long as ``handle`` (a producer) does; other processes reach it
    over TCP at ``bootstrap_servers``. For tests only (docs/kafka.md says what it lacks).
    """
    ck = _ck()
    handle = ck.Producer({"test.mock.num.brokers": num_brokers, "log_level": 3})
    md = handle.list_topics(timeout=10)
    servers = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    return handle, servers


class KafkaSpout(ReplayableSpout):
    """Read a Kafka topic; emit ``(key, value, partition, offset, timestamp)``.

    ``key``/``value`` are decoded as UTF-8 (``None`` stays ``None``; bytes that are not
    UTF-8 are emitted as bytes). ``timestamp`` is the record's timestamp in ms (event time,
    used for watermarks). Partition ``p`` goes to task ``p_index % parallelism``.

    Args:
        topic: The topic to read.
        bootstrap_servers: ``host:port[,host:port]``.
        **consumer_conf: Extra librdkafka consumer settings; the jstorm-specific keys
            ``start`` (``"earliest"`` (default) or ``"latest"``: where a partition no
            checkpoint knows starts), ``batch``, ``idle_timeout_ms``, ``max_lag_ms``,
            ``bounded`` (finish once every partition is drained) and ``connect_timeout_ms``
            (how long ``open`` waits for the broker and the topic, default 30 000, then
            the topology fails naming them) are taken out first.

    Example:
        >>> spout = KafkaSpout("orders", "localhost:9092", idle_timeout_ms=5000)  # doctest: +SKIP
    """

    outputs = ("key", "value", "partition", "offset", "timestamp")

    def __init__(self, topic: str, bootstrap_servers: str, **consumer_conf: Any) -> None:
        if not topic or not isinstance(topic, str):
            raise SourceError(f"KafkaSpout needs a topic name, got {topic!r}")
        if not bootstrap_servers:
            raise SourceError("KafkaSpout needs bootstrap_servers (host:port[,...])")
        conf = dict(consumer_conf)
        self.start = str(conf.pop("start", "earliest"))
        if self.start not in ("earliest", "latest"):
            raise SourceError(f"KafkaSpout start={self.start!r} must be 'earliest' or 'latest'")
        self.batch = int(conf.pop("batch", 500))
        self.idle_timeout_ms = conf.pop("idle_timeout_ms", 10_000.0)
        self.connect_timeout_ms = float(conf.pop("connect_timeout_ms", 30_000.0))
        self.max_lag_ms = float(conf.pop("max_lag_ms", 0.0))
        # bounded: finish once every owned partition reached its end offset (checked against
        # the broker, not "one empty poll", which a slow first fetch would also give)
        self.drain_and_finish = bool(conf.pop("bounded", False))
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self.consumer_conf = conf
        self._consumer: Any = None
        self._assigned: dict[int, int] = {}

    def connect(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Create the consumer (no group subscription, no offset commits)."""
        ck = _ck()
        settings: dict[str, Any] = {
            "group.id": f"jstorm-{context.topology}-{context.component}",
                    "session.timeout.ms": 6000, "log_level": 3}
        settings.update(self.consumer_conf)
        settings.update({"bootstrap.servers": self.bootstrap_servers,
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "enable.partition.eof": False})
        self._consumer = ck.Consumer(settings)

    def describe_source(self) -> str:
        """Broker and topic, for the messages of ``open``'s wait."""
        return f"KafkaSpout: Kafka broker(s) {self.bootstrap_servers} (topic {self.topic!r})"

    def _call_timeout_s(self) -> float:
        # a few tries (each logged by ReplayableSpout.open) within connect_timeout_ms
        return max(0.5, min(10.0, self.connect_timeout_ms / 3000.0))

    def list_splits(self) -> list[Any]:
        """The topic's partition numbers."""
        md = self._consumer.list_topics(self.topic, timeout=self._call_timeout_s())
        meta = md.topics.get(self.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise SourceError(f"KafkaSpout: topic {self.topic!r} not found at "
                              f"{self.bootstrap_servers} ({getattr(meta, 'error', None)})")
        return sorted(meta.partitions)

    def initial_offset(self, split: Any) -> Any:
        """Earliest (or latest) offset of a partition the checkpoint does not know."""
        ck = _ck()
        low, high = self._consumer.get_watermark_offsets(
            ck.TopicPartition(self.topic, int(split)), timeout=self._call_timeout_s())
        return int(low if self.start == "earliest" else high)

    def read_splits(self, offsets: Mapping[Any, Any],
                    limit: int) -> list[tuple[Any, SplitRecord]]:
        """Consume up to ``limit`` records at the checkpointed offsets (no broker commit)."""
        ck = _ck()
        wanted = {int(p): int(o) for p, o in offsets.items()}
        if wanted != self._assigned:
            # (re-)assign at exactly the offsets held by the spout (after a restore, too)
            self._consumer.assign([ck.TopicPartition(self.topic, p, o)
                                   for p, o in sorted(wanted.items())])
            self._assigned = dict(wanted)
        msgs = self._consumer.consume(num_messages=limit, timeout=0.05)
        out: list[tuple[Any, SplitRecord]] = []
        for m in msgs:
            if m.error() is not None:
                # confluent-kafka's documented name for librdkafka's internal EOF event
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    continue
                raise SourceError(f"KafkaSpout {self.topic!r}: {m.error()}")
            p, off = m.partition(), m.offset()
            ts_type, ts = m.timestamp()
            ts_ms = float(ts) if ts_type != ck.TIMESTAMP_NOT_AVAILABLE else None
            values = (_decode(m.key()), _decode(m.value()), p, off, ts)
            out.append((p, SplitRecord(values, off + 1, ts_ms)))
            self._assigned[p] = off + 1
        return out

    def next_tuple(self) -> None:
        """Emit the next records; with ``bounded``, finish once every partition is drained."""
        so = self._splits_state()
        before = dict(so.offsets)
        super().next_tuple()
        if self.drain_and_finish and not self.finished and so.offsets == before:
            ck = _ck()
            for p, off in so.offsets.items():
                tp = ck.TopicPartition(self.topic, int(p))
                _low, high = self._consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                # the consumer's position also steps over transaction control markers
                pos = self._consumer.position([tp])[0].offset
                if max(int(off), int(pos)) < int(high):
                    return
            self.finish()

    def release_offsets(self, offsets: Mapping[Any, Any]) -> None:
        """Commit a *completed* checkpoint's offsets to the consumer group (monitoring only:
        the spout itself always restarts from the checkpoint)."""
        ck = _ck()
        if self._consumer is None or not offsets:
            return
        try:
            self._consumer.commit(offsets=[ck.TopicPartition(self.topic, int(p), int(o))
                                           for p, o in offsets.items()], asynchronous=True)
        except ck.KafkaException as exc:  # lag monitoring only; never fatal
            _log.warning("KafkaSpout: committing offsets for monitoring failed: %s", exc)

    def close(self) -> None:
        """Close the consumer."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _cause(exc: ClientError) -> BaseException:
    """The client's own exception behind a :class:`ClientError` (itself if none)."""
    return exc.__cause__ or exc


def _decode(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _encode(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        return json.dumps(value, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SinkError(f"KafkaSink cannot encode {type(value).__name__} value {value!r}: "
                        "give str, bytes or something JSON-serialisable") from exc


def commit_log_key(transactional_id: str, run: RunIdentity | str | None) -> str:
    """The commit-log key of a sink task in one run: ``{transactional_id}@{job_id}``
    (:mod:`jstormpy.run_identity`), or the bare ``transactional_id`` without a run (a sink
    driven outside a Topology Master, or a run older than run identities).

    Example:
        >>> commit_log_key("jstorm-orders-out-3", "3f2a9c01b7de0a11")
        'jstorm-orders-out-3@3f2a9c01b7de0a11'
    """
    job_id = run.job_id if isinstance(run, RunIdentity) else run
    return f"{transactional_id}@{job_id}" if job_id else transactional_id


def read_commit_log(bootstrap_servers: str, log_topic: str, transactional_id: str,
                    timeout: float = 10.0, how: str = "read_committed",
                    stable_timeout: float = STABLE_TIMEOUT_S,
                    consumer: Callable[[dict[str, Any]], Any] | None = None) -> list[int]:
    """Checkpoint ids the sink task ``transactional_id`` committed, from its commit log
    (pass :func:`commit_log_key` for the entries of one run).

    ``how="read_committed"``: a consumer with ``isolation.level=read_committed``; on a real
    cluster the entries of aborted transactions are not returned, on librdkafka's mock
    cluster they are (docs/kafka.md). ``how="markers"``: only the entries whose transaction
    has a COMMIT marker (:func:`jstormpy.connectors.kafka_markers.committed_records`), exact
    on the mock too.

    A ``read_committed`` consumer stops at a partition's last stable offset: the first
    offset of the oldest transaction still open in it, which may be another sink task's
    pre-committed transaction written before this task's own committed entry (that task's
    new producer aborts it when it starts, or the broker at its ``transaction.timeout.ms``).
    Ending the read there would miss the entry and re-send a committed transaction, so the
    read goes on to the high watermark taken when it started, waiting up to
    ``stable_timeout`` seconds for such transactions to end (``consumer``: the consumer
    factory, confluent-kafka's ``Consumer`` unless given).

    Raises:
        SinkError: a transaction still open after ``stable_timeout`` holds the commit log
            back (the message names the partition and the offsets).
    """
    ck = _ck()
    if how == "markers":
        from confluent_kafka.admin import AdminClient

        from jstormpy.connectors.kafka_markers import committed_records

        md = AdminClient({"bootstrap.servers": bootstrap_servers,
                          "log_level": 3}).list_topics(log_topic, timeout=timeout)
        meta = md.topics.get(log_topic)
        if meta is None or meta.error is not None:
            return []
        try:
            return [int(_decode(m.value())) for m in committed_records(bootstrap_servers,
                                                                       log_topic)
                    if _decode(m.key()) == transactional_id]
        except (OSError, ValueError) as exc:
            raise SinkError(f"KafkaSink {transactional_id}: reading the commit log "
                            f"{log_topic!r} through its markers failed: {exc}") from exc
    def open_consumer(isolation: str) -> Any:
        return (consumer or ck.Consumer)({
            "bootstrap.servers": bootstrap_servers, "group.id": "jstorm-commit-log",
            "enable.auto.commit": False, "isolation.level": isolation, "log_level": 3})

    c = open_consumer("read_committed")
    # the ends are asked as a read_uncommitted client asks them: the high watermark, past
    # open transactions (a read_committed client's end offset is the last stable offset)
    ends = open_consumer("read_uncommitted")
    try:
        md = c.list_topics(log_topic, timeout=timeout)
        meta = md.topics.get(log_topic)
        if meta is None or meta.error is not None:
            return []
        ids: list[int] = []
        for p in sorted(meta.partitions):
            tp = ck.TopicPartition(log_topic, p)
            low, high = ends.get_watermark_offsets(tp, timeout=timeout, cached=False)
            if high <= low:
                continue
            c.assign([ck.TopicPartition(log_topic, p, low)])
            deadline = time.monotonic() + stable_timeout
            while True:
                msgs = c.consume(500, timeout=0.2)
                for m in msgs:
                    if m.error() is None and _decode(m.key()) == transactional_id:
                        ids.append(int(_decode(m.value())))
                if msgs:
                    continue
                # the position steps over control markers too: at the high watermark every
                # entry written before the read began has been seen (or was aborted)
                position = c.position([tp])[0].offset
                if position >= high:
                    break
                if time.monotonic() >= deadline:
                    raise SinkError(
                        f"KafkaSink {transactional_id}: the commit log {log_topic!r} "
                        f"partition {p} stays at offset {position} of {high} for "
                        f"{stable_timeout:g} s: a transaction still open there holds its "
                        "last stable offset (a sink task not restarted yet, or a producer "
                        "gone until its transaction.timeout.ms); its entries after it "
                        "cannot be read, so whether a pending transaction committed is "
                        "unknown. Retry the restore, or set commit_log_read='markers'")
        return ids
    finally:
        ends.close()
        c.close()


class _ConfluentProducer:
    """confluent-kafka's ``Producer`` as the port's
    :class:`~jstormpy.connectors.kafka_client.TransactionalProducer`: the same calls, a
    ``KafkaException`` raised as :class:`ClientError` (its ``KafkaError``)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._ck = _ck()
        self._p = self._ck.Producer(settings)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._ck.KafkaException as exc:
            raise ClientError(exc.args[0]) from exc

    def init_transactions(self, timeout: float) -> None:
        self._call(self._p.init_transactions, timeout)

    def begin_transaction(self) -> None:
        self._call(self._p.begin_transaction)

    def produce(self, topic: str, value: bytes | None, key: bytes | None,
                headers: list[tuple[str, bytes]] | None,
                on_delivery: Callable[[Any, Any], None]) -> None:
        kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": on_delivery}
        if headers is not None:
            kwargs["headers"] = headers
        self._call(self._p.produce, topic, **kwargs)

    def poll(self, timeout: float) -> int:
        return int(self._p.poll(timeout))

    def flush(self, timeout: float) -> int:
        return int(self._p.flush(timeout))

    def commit_transaction(self, timeout: float) -> None:
        self._call(self._p.commit_transaction, timeout)

    def abort_transaction(self, timeout: float) -> None:
        self._call(self._p.abort_transaction, timeout)


class ConfluentKafkaClient:
    """Production's :class:`~jstormpy.connectors.kafka_client.KafkaSinkClient`:
    confluent-kafka's transactional ``Producer`` and :func:`read_commit_log`."""

    def producer(self, settings: dict[str, Any]) -> _ConfluentProducer:
        return _ConfluentProducer(settings)

    def read_commit_log(self, bootstrap_servers: str, log_topic: str, key: str,
                        how: str) -> list[int]:
        return read_commit_log(bootstrap_servers, log_topic, key, how=how)


class KafkaSink(Sink):
    """Write tuples to a Kafka topic exactly once, with one Kafka transaction per checkpoint.

    Args:
        topic: The topic written to.
        bootstrap_servers: ``host:port[,host:port]``.
        key_field: Input field used as the record key (``None``: no key).
        value_field: Input field used as the record value (str/bytes as is, anything
            else as JSON); ``None``: the whole tuple as a JSON object ``{field: value}``.
        **producer_conf: Extra librdkafka producer settings; ``commit_log_topic`` (default
            ``{topic}.jstorm-commits``) and ``commit_log_read`` (``"read_committed"``
            (default) or ``"markers"``, see :data:`COMMIT_LOG_READS`) are jstorm keys.
    """

    client: KafkaSinkClient = ConfluentKafkaClient()
    """The Kafka calls every step goes through (``connectors/kafka_client.py``):
    confluent-kafka; the simulator's is a simulated broker."""

    def __init__(self, topic: str, bootstrap_servers: str, key_field: str | None = None,
                 value_field: str | None = "value", **producer_conf: Any) -> None:
        if not topic or not isinstance(topic, str):
            raise SinkError(f"KafkaSink needs a topic name, got {topic!r}")
        if not bootstrap_servers:
            raise SinkError("KafkaSink needs bootstrap_servers (host:port[,...])")
        conf = dict(producer_conf)
        if "transactional.id" in conf:
            raise SinkError("KafkaSink sets transactional.id itself (one per sink task)")
        self.commit_log_topic = str(conf.pop("commit_log_topic", topic + COMMIT_LOG_SUFFIX))
        self.commit_log_read = str(conf.pop("commit_log_read", "read_committed"))
        if self.commit_log_read not in COMMIT_LOG_READS:
            raise SinkError(f"KafkaSink commit_log_read={self.commit_log_read!r} must be one "
                            f"of {', '.join(COMMIT_LOG_READS)}")
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self.key_field = key_field
        self.value_field = value_field
        self.producer_conf = conf
        self.transactional_id = ""
        self.commit_log_key = ""     # this run's key in the commit log (commit_log_key)
        self._earlier_key = ""       # the key of the run a savepoint restore started from
        self._earlier_through = 0    # ... and the savepoint's checkpoint id
        self._producer: Any = None
        self._open: int | None = None        # checkpoint id of the Kafka transaction open
        self._staged: int | None = None      # pre-committed (flushed, open) transaction id
        self._buffer: list[tuple[bytes | None, bytes | None]] = []   # txn after _staged
        self._rows: list[tuple[bytes | None, bytes | None]] = []     # rows of _open
        self._errors: list[Any] = []   # KafkaErrors of failed deliveries
        # whole transactions pre-committed while an earlier one still awaited its commit
        # (Kafka has one open transaction per transactional.id), in checkpoint order
        self._buffer_txns: list[int] = []
        """Pre-committed transactions waiting for an earlier one's commit, in order: ids
        only, their records are in the pending state (the task's store)."""

    # -- set-up ---------------------------------------------------------------------------
    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Create the transactional producer; ``init_transactions`` fences the task's
        previous producer (any earlier process) and aborts its open transaction."""
        self.transactional_id = f"jstorm-{context.topology}-{context.component}-{context.task_id}"
        run = context.run
        self.commit_log_key = commit_log_key(self.transactional_id, run)
        if run is not None and run.restored_through:
            self._earlier_key = commit_log_key(self.transactional_id, run.restored_from or None)
            self._earlier_through = run.restored_through
        settings: dict[str, Any] = {"transaction.timeout.ms": 60_000, "log_level": 3}
        settings.update(self.producer_conf)
        settings.update({"bootstrap.servers": self.bootstrap_servers,
                         "transactional.id": self.transactional_id,
                         "enable.idempotence": True})
        self._producer = self.client.producer(settings)
        try:
            self._producer.init_transactions(30)
        except ClientError as exc:
            raise SinkError(f"KafkaSink {self.transactional_id}: init_transactions failed "
                            f"at {self.bootstrap_servers}: {exc}") from _cause(exc)
        self._pending_rows = self.state("kafka_sink_pending")

    def _committed_ids(self, key: str) -> set[int]:
        """The checkpoint ids the commit log holds under ``key``: exactly the transactions
        committed. Not "every id up to the last entry": a run that fell back past a
        completed checkpoint (a lost shared file) never commits the ids it abandoned, and
        goes on above them, so its log reads e.g. 1, 101, 102 -- and a savepoint taken at 2
        may still hold transaction 2 pending. Hence the log is read whole and must not be
        compacted (docs/kafka.md)."""
        return set(self.client.read_commit_log(self.bootstrap_servers, self.commit_log_topic,
                                               key, self.commit_log_read))

    def _already_committed(self, checkpoint_id: int) -> bool:
        """Whether transaction ``checkpoint_id`` is committed, by the commit log of the run
        it belongs to: this run's entries only (a fresh run's ids restart at 1, an earlier
        run's entries say nothing about them), except the ids up to the savepoint a restored
        run started from, which were the earlier run's transactions."""
        if self._earlier_through and checkpoint_id <= self._earlier_through:
            return checkpoint_id in self._committed_ids(self._earlier_key)
        return checkpoint_id in self._committed_ids(self.commit_log_key)

    # -- the transaction protocol ---------------------------------------------------------
    def begin(self, checkpoint_id: int) -> None:
        """Open transaction ``checkpoint_id`` (buffered while an earlier one awaits commit)."""
        if self._open is not None:
            raise SinkError(f"KafkaSink {self.transactional_id}: begin({checkpoint_id}) "
                            f"while transaction {self._open} is open")
        self._open = checkpoint_id
        self._rows = []
        if self._staged is None:
            self._begin_transaction(checkpoint_id)

    def write(self, tup: Tuple) -> None:
        """Produce one record (into the Kafka transaction, or the buffer)."""
        if self._open is None:
            raise SinkError(f"KafkaSink {self.transactional_id}: write without begin")
        try:
            key = _encode(tup[self.key_field]) if self.key_field else None
            value = _encode(tup[self.value_field] if self.value_field is not None
                            else tup.as_dict())
        except (KeyError, IndexError) as exc:
            raise SinkError(f"KafkaSink: input tuple {tup!r} has no field {exc}") from exc
        self._rows.append((key, value))
        if self._staged is None:
            self._produce(key, value, self._open)

    def _produce(self, key: bytes | None, value: bytes | None, checkpoint_id: int) -> None:
        header = f"{self.transactional_id}:{checkpoint_id}".encode()
        while True:
            try:
                self._producer.produce(self.topic, value, key, [(TXN_HEADER, header)],
                                       self._on_delivery)
                return
            except BufferError:
                self._producer.poll(0.05)
            except ClientError as exc:
                raise self._client_failed(f"write into transaction {checkpoint_id}",
                                          exc) from _cause(exc)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        # purged records are those of an aborted transaction: not a failure of a later one
        if err is not None and err.name() not in ("_PURGE_QUEUE", "_PURGE_INFLIGHT"):
            self._errors.append(err)

    def _failed(self, what: str, err: Any, cause: BaseException | None = None) -> SinkError:
        """``FencedError`` if ``err`` (a KafkaError) says a newer producer of this
        ``transactional.id`` fenced this one (a zombie), else ``SinkError``."""
        name = err.name() if hasattr(err, "name") else ""
        msg = f"KafkaSink {self.transactional_id}: {what}: {err}"
        if name in _FENCED_CODES or (hasattr(err, "fatal") and err.fatal()
                                     and "fenced" in str(err).lower()):
            exc: SinkError = FencedError(msg + " (a newer producer of this task took over)")
        else:
            exc = SinkError(msg)
        exc.__cause__ = cause
        return exc

    def _client_failed(self, what: str, exc: ClientError) -> SinkError:
        """:meth:`_failed` for a failed client call (the port's :class:`ClientError`)."""
        return self._failed(what, exc.error, _cause(exc))

    def _begin_transaction(self, checkpoint_id: int) -> None:
        try:
            self._producer.begin_transaction()
        except ClientError as exc:
            raise self._client_failed(f"begin of transaction {checkpoint_id} failed",
                                      exc) from _cause(exc)

    def _commit_transaction(self, checkpoint_id: int) -> None:
        try:
            self._producer.commit_transaction(60)
        except ClientError as exc:
            raise self._client_failed(f"commit of transaction {checkpoint_id} failed",
                                      exc) from _cause(exc)

    def pre_commit(self, checkpoint_id: int) -> None:
        """Flush the open transaction and keep it open; its records also go into the task
        snapshot (so a new process can finish it after a crash)."""
        if self._open != checkpoint_id:
            raise SinkError(f"KafkaSink {self.transactional_id}: pre_commit({checkpoint_id}) "
                            f"but the open transaction is {self._open}")
        if self._staged is not None:
            # an earlier transaction still awaits its commit: this one stays buffered;
            # kept (and in the snapshot) until the commits before it start it
            self._buffer_txns.append(checkpoint_id)
        else:
            self._log_commit(checkpoint_id)
            self._flush(checkpoint_id)
            self._staged = checkpoint_id
        self._pending_rows[checkpoint_id] = list(self._rows)
        self._open = None
        self._rows = []

    def _log_commit(self, checkpoint_id: int) -> None:
        try:
            self._producer.produce(self.commit_log_topic, str(checkpoint_id).encode(),
                                   self.commit_log_key.encode(), None, self._on_delivery)
        except ClientError as exc:
            raise self._client_failed(f"pre-commit of {checkpoint_id}", exc) from _cause(exc)

    def _flush(self, checkpoint_id: int) -> None:
        left = self._producer.flush(60)
        if left or self._errors:
            errs, self._errors = self._errors, []
            if errs:
                raise self._failed(f"transaction {checkpoint_id} not durable ({left} unsent, "
                                   f"{len(errs)} failed)", errs[0])
            raise SinkError(f"KafkaSink {self.transactional_id}: transaction {checkpoint_id} "
                            f"not durable ({left} records unsent after 60 s)")

    def commit(self, checkpoint_id: int) -> None:
        """Commit transaction ``checkpoint_id``. In a new process (restored pending id) the
        old transaction is gone (aborted by the fencing), so its records are re-sent from
        the snapshot in a fresh transaction -- unless the commit log shows it committed."""
        if self._staged == checkpoint_id:
            self._commit_transaction(checkpoint_id)
            self._staged = None
            self._pending_rows.pop(checkpoint_id, None)
            self._start_buffered()
            return
        rows = self._pending_rows.pop(checkpoint_id, None)
        if rows is None or self._already_committed(checkpoint_id):
            return  # already committed (or empty): idempotent no-op
        if self._staged is not None or self._open is not None:
            raise SinkError(f"KafkaSink {self.transactional_id}: cannot redo transaction "
                            f"{checkpoint_id} while another is open")
        self._begin_transaction(checkpoint_id)
        for key, value in rows:
            self._produce(key, value, checkpoint_id)
        self._log_commit(checkpoint_id)
        self._flush(checkpoint_id)
        self._commit_transaction(checkpoint_id)
        _log.info("KafkaSink %s: re-sent pre-committed transaction %d after a restart",
                  self.transactional_id, checkpoint_id)

    def _start_buffered(self) -> None:
        """After a commit: begin the next Kafka transaction with the buffered records."""
        if self._open is None and not self._buffer_txns:
            return
        if self._buffer_txns:  # a whole transaction was pre-committed while buffered
            cid = self._buffer_txns[0]
            self._begin_transaction(cid)
            self._buffer_txns.pop(0)
            for key, value in self._pending_rows[cid]:
                self._produce(key, value, cid)
            self._log_commit(cid)
            self._flush(cid)
            self._staged = cid
            return
        open_id = self._open
        assert open_id is not None
        self._begin_transaction(open_id)
        for key, value in self._rows:
            self._produce(key, value, open_id)

    def abort(self, checkpoint_id: int) -> None:
        """Abort the open or pre-committed Kafka transaction ``checkpoint_id``."""
        self._pending_rows.pop(checkpoint_id, None)
        if self._open == checkpoint_id:
            self._open = None
            self._rows = []
            if self._staged is not None:
                return  # only buffered
        elif self._staged == checkpoint_id:
            self._staged = None
        else:
            self._buffer_txns = [t for t in self._buffer_txns if t != checkpoint_id]
            return
        try:
            self._producer.abort_transaction(30)
        except ClientError as exc:
            raise SinkError(f"KafkaSink {self.transactional_id}: abort of {checkpoint_id} "
                            f"failed: {exc}") from _cause(exc)
        self._start_buffered()

    def recover(self, completed_id: int | None) -> None:
        """Drop the pre-committed records still in the restored state; nothing else to do
        (``init_transactions`` in :meth:`prepare` already aborted whatever the previous
        producer of this task had open).

        The engine calls :meth:`commit` for every pending id the restored checkpoint lists
        before this, which takes their records out. What is left is either above
        ``completed_id`` (aborted by the fencing, recomputed by the replay) or already
        committed: after a rescale the tasks restore the quiescent checkpoint with nothing
        pending (the old tasks committed it), yet its records, keyed by the checkpoint id,
        moved with their key group into one new task -- kept, they would be written into
        every later snapshot of that task (each rescale adding another transaction's)."""
        for cid in list(self._pending_rows):
            self._pending_rows.pop(cid, None)

    def cleanup(self) -> None:
        """Close the producer (an open transaction is left to the fencing of the next one)."""
        self._producer = None
