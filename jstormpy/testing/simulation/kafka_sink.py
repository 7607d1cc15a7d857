"""The ``"log"`` sink of the simulator: the real
:class:`~jstormpy.connectors.kafka.KafkaSink` over a simulated Kafka broker (issue 37).

KafkaSink's commit protocol calls its client port (``connectors/kafka_client.py``) for
every Kafka step: ``init_transactions`` (which fences the task's older producer and
aborts its open transaction), ``begin_transaction``, ``produce`` of the records and of
the commit-log entry, ``flush``, ``commit_transaction``, ``abort_transaction``, and the
read of the commit log that decides whether a restored pending transaction is re-sent.
:class:`SimKafkaClient` is that port over a :class:`SimBroker` the simulated external
system (:class:`~jstormpy.testing.simulation.outputs.SimOutput`) holds, so the simulator
runs the sink production runs, not a model of it; the task's pending transactions are
the sink's own managed state (``kafka_sink_pending``), snapshotted and restored with the
task's states as the executor does.

The broker keeps one transactional log per topic (one partition each): records are
appended as a producer flushes them, tagged with its producer id and epoch, and a
transaction's end appends its COMMIT or ABORT marker; a ``read_committed`` reader sees a
record once its transaction committed (:meth:`SimBroker.committed`; a transaction still
open when the reader looks is not visible, and a real coordinator aborts it at its
timeout). A ``transactional.id`` keeps its producer id across ``init_transactions``,
each of which bumps the epoch and aborts what the older epoch left open; an older
epoch's calls are refused with ``PRODUCER_FENCED`` (the sink's
:class:`~jstormpy.api.errors.FencedError`).

Faults: ``sink_unavailable`` holds the broker down (the simulated task asks before each
protocol step, ``SimOutput.check_up``); ``write_error`` strikes a flush (the records fail
to be delivered, or land and still report a timeout) and a ``commit_transaction`` (it
fails, the transaction still open, or the commit lands and reports an error); the sink
raises its :class:`~jstormpy.api.errors.SinkError`, the task fails and the Topology
Master recovers, or, at a restore, the worker's prepare fails. ``worker_crash`` stops a
task between any two steps (a pre-committed transaction left open, aborted by the next
incarnation's ``init_transactions``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from jstormpy.api.component import TopologyContext, restore_managed_states
from jstormpy.connectors.kafka import KafkaSink
from jstormpy.connectors.kafka_client import ClientError
from jstormpy.run_identity import RunIdentity
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.sink_input import quiet_log, stage_rows
from jstormpy.testing.simulation.world import World

TOPIC = "simulated-out"
"""The topic every run of the simulated job writes to."""
BOOTSTRAP = "simulated-broker:9092"
TOPOLOGY = "simulated"

_QUIET = quiet_log("jstormpy.testing.simulation.kafka_sink")


class SimKafkaError:
    """What the simulated client reports (a ``KafkaError``'s ``name``, ``fatal``, text)."""

    def __init__(self, name: str, text: str, fatal: bool = False) -> None:
        self._name, self._text, self._fatal = name, text, fatal

    def name(self) -> str:
        return self._name

    def fatal(self) -> bool:
        return self._fatal

    def __str__(self) -> str:
        return f"KafkaError{{code={self._name},str=\"{self._text}\"}}"


@dataclass
class Entry:
    """One record or transaction marker of a partition log."""

    offset: int
    producer_id: int
    epoch: int
    key: bytes | None = None
    value: bytes | None = None
    marker: str | None = None
    """``"COMMIT"`` / ``"ABORT"`` for a control marker."""
    state: str = "open"
    """A record's transaction: ``"open"``, ``"committed"`` or ``"aborted"``;
    ``"marker"`` for a marker."""


@dataclass
class _Txn:
    epoch: int
    entries: list[Entry] = field(default_factory=list)
    topics: set[str] = field(default_factory=set)


@dataclass
class SimBroker:
    """A Kafka cluster of one broker, one partition per topic (module doc)."""

    logs: dict[str, list[Entry]] = field(default_factory=dict)
    producers: dict[str, tuple[int, int]] = field(default_factory=dict)
    """``transactional.id`` -> (producer id, current epoch)."""
    ongoing: dict[int, _Txn] = field(default_factory=dict)
    """Producer id -> its open transaction (records appended, no marker yet)."""

    def init_producer(self, transactional_id: str) -> tuple[int, int]:
        """``InitProducerId``: a new epoch; the older epoch's open transaction aborted."""
        pid, epoch = self.producers.get(transactional_id, (len(self.producers) + 1, -1))
        self.end_transaction(pid, epoch, commit=False)
        self.producers[transactional_id] = (pid, epoch + 1)
        return pid, epoch + 1

    def fenced(self, transactional_id: str, epoch: int) -> bool:
        return self.producers.get(transactional_id, (0, epoch))[1] != epoch

    def append(self, pid: int, epoch: int, topic: str, key: bytes | None,
               value: bytes | None) -> None:
        """A transactional record of ``pid`` (its transaction opens with the first one)."""
        txn = self.ongoing.setdefault(pid, _Txn(epoch))
        log = self.logs.setdefault(topic, [])
        entry = Entry(len(log), pid, epoch, key, value)
        log.append(entry)
        txn.entries.append(entry)
        txn.topics.add(topic)

    def end_transaction(self, pid: int, epoch: int, commit: bool) -> None:
        """``EndTxn``: a marker in every partition the transaction wrote to."""
        txn = self.ongoing.pop(pid, None)
        if txn is None:
            return
        marker = "COMMIT" if commit else "ABORT"
        for topic in sorted(txn.topics):
            log = self.logs[topic]
            log.append(Entry(len(log), pid, epoch, marker=marker, state="marker"))
        for entry in txn.entries:
            entry.state = "committed" if commit else "aborted"

    def committed(self, topic: str) -> list[Entry]:
        """What a ``read_committed`` reader sees of ``topic``: every record whose
        transaction committed, in offset order."""
        return [e for e in self.logs.get(topic, []) if e.state == "committed"]


class _Queued:
    __slots__ = ("key", "on_delivery", "topic", "value")

    def __init__(self, topic: str, key: bytes | None, value: bytes | None,
                 on_delivery: Callable[[Any, Any], None]) -> None:
        self.topic, self.key, self.value, self.on_delivery = topic, key, value, on_delivery


class SimProducer:
    """The port's transactional producer over a :class:`SimBroker` (module doc)."""

    def __init__(self, client: SimKafkaClient, transactional_id: str) -> None:
        self.client, self.broker = client, client.broker
        self.transactional_id = transactional_id
        self.pid, self.epoch = 0, -1
        self.in_txn = False
        self.queue: list[_Queued] = []

    def _check_fenced(self, doing: str) -> None:
        if self.broker.fenced(self.transactional_id, self.epoch):
            raise ClientError(SimKafkaError(
                "PRODUCER_FENCED", f"{doing}: a newer producer of {self.transactional_id} "
                "fenced this one", fatal=True))

    def init_transactions(self, timeout: float) -> None:
        self.pid, self.epoch = self.broker.init_producer(self.transactional_id)

    def begin_transaction(self) -> None:
        if self.in_txn:
            raise ClientError(SimKafkaError("_STATE", "a transaction is already open"))
        self._check_fenced("begin_transaction")
        self.in_txn = True

    def produce(self, topic: str, value: bytes | None, key: bytes | None,
                headers: list[tuple[str, bytes]] | None,
                on_delivery: Callable[[Any, Any], None]) -> None:
        if not self.in_txn:
            raise ClientError(SimKafkaError("_STATE", "produce outside a transaction"))
        self.queue.append(_Queued(topic, key, value, on_delivery))

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        """Deliver the queue: appended to the logs, or (``write_error``) not, or appended
        and reported failed; a fenced producer's records are refused."""
        queue, self.queue = self.queue, []
        if not queue:
            return 0
        fault = self.client.write_fault()
        fenced = self.broker.fenced(self.transactional_id, self.epoch)
        for q in queue:
            if fenced:
                q.on_delivery(SimKafkaError("PRODUCER_FENCED", "fenced", fatal=True), None)
                continue
            if fault != "fail":
                self.broker.append(self.pid, self.epoch, q.topic, q.key, q.value)
            if fault:
                q.on_delivery(SimKafkaError("_MSG_TIMED_OUT", "Local: Message timed out"),
                              None)
            else:
                q.on_delivery(None, None)
        return 0

    def commit_transaction(self, timeout: float) -> None:
        self.flush(timeout)
        self._check_fenced("commit_transaction")
        fault = self.client.write_fault()
        if fault == "fail":
            raise ClientError(SimKafkaError("_TIMED_OUT", "EndTxn timed out"))
        self.broker.end_transaction(self.pid, self.epoch, commit=True)
        self.in_txn = False
        if fault:
            raise ClientError(SimKafkaError("_TIMED_OUT",
                                            "EndTxn timed out (after the commit landed)"))

    def abort_transaction(self, timeout: float) -> None:
        for q in self.queue:
            q.on_delivery(SimKafkaError("_PURGE_QUEUE", "purged"), None)
        self.queue = []
        self._check_fenced("abort_transaction")
        self.broker.end_transaction(self.pid, self.epoch, commit=False)
        self.in_txn = False


class SimKafkaClient:
    """KafkaSink's :class:`~jstormpy.connectors.kafka_client.KafkaSinkClient` over the
    simulated broker (``output.broker``)."""

    def __init__(self, broker: SimBroker, world: World | None = None,
                 plan: FaultPlan | None = None) -> None:
        self.broker, self.world, self.plan = broker, world, plan

    def write_fault(self) -> str:
        """``write_error`` on a flush or commit: "" (none), "fail" or "lands"."""
        if self.world is None or self.plan is None or \
                not self.plan.hit(self.world, Fault.WRITE_ERROR):
            return ""
        return "lands" if self.world.chance(0.5) else "fail"

    def producer(self, settings: dict[str, Any]) -> SimProducer:
        return SimProducer(self, str(settings["transactional.id"]))

    def read_commit_log(self, bootstrap_servers: str, log_topic: str, key: str,
                        how: str) -> list[int]:
        wanted = key.encode()
        return [int((e.value or b"0").decode()) for e in self.broker.committed(log_topic)
                if e.key == wanted]


class SimKafkaSink(KafkaSink):
    """The real :class:`KafkaSink` over :class:`SimKafkaClient`; every protocol step asks
    the external system first (module doc)."""

    def __init__(self, output: Any, world: World | None = None,
                 plan: FaultPlan | None = None) -> None:
        super().__init__(TOPIC, BOOTSTRAP, key_field=None, value_field=None)
        self.output = output
        self.client = SimKafkaClient(output.broker, world, plan)
        self.__dict__["_jstorm_log"] = _QUIET

    def stage_rows(self, checkpoint_id: int, rows: list[Any]) -> None:
        """The task's open transaction ``checkpoint_id`` is ``rows``: write them and
        pre-commit (the engine's ``begin``, ``write`` s and ``pre_commit``)."""
        self.output.check_up()
        stage_rows(self, checkpoint_id, rows)

    def commit(self, checkpoint_id: int) -> None:
        """The system is asked first (module doc), then :meth:`KafkaSink.commit`."""
        self.output.check_up()
        super().commit(checkpoint_id)

    def recover(self, completed_id: int | None) -> None:
        """The system is asked first (module doc), then :meth:`KafkaSink.recover`."""
        self.output.check_up()
        super().recover(completed_id)


def committed_values(broker: SimBroker) -> list[dict[str, Any]]:
    """The committed records of the output topic, decoded (JSON objects), in order."""
    return [json.loads(e.value or b"{}") for e in broker.committed(TOPIC)]


def open_kafka_sink(output: Any, world: World, plan: FaultPlan, run: RunIdentity,
                    earlier: tuple[RunIdentity, int] | None, states: dict[str, Any],
                    task_id: int, task_index: int, worker_id: int,
                    generation: int) -> SimKafkaSink:
    """A prepared :class:`SimKafkaSink` for one task incarnation: its managed states are
    ``states`` (the task's, restored from its snapshot); ``earlier``: the run a savepoint
    restore started from and the savepoint's checkpoint id (the context's run identity
    says so, as ``RunIdentity.from_savepoint`` does)."""
    if earlier is not None:
        run = replace(run, restored_from=earlier[0].job_id, restored_through=earlier[1])
    sink = SimKafkaSink(output, world, plan)
    restore_managed_states(sink, states)
    sink.prepare({}, TopologyContext(topology=TOPOLOGY, component="sink", task_id=task_id,
                                     task_index=task_index, worker_id=worker_id,
                                     generation=generation, run=run))
    return sink
