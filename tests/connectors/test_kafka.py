"""Kafka connectors against librdkafka's mock cluster (or a real cluster).

By default the tests start librdkafka's built-in mock cluster in this process (a real
Kafka-protocol server on 127.0.0.1 that the real client reaches over TCP). Set
``JSTORM_KAFKA_BOOTSTRAP=host:port`` to run the same tests against a real cluster (topics
must be auto-created with at least 2 partitions, or created beforehand).

What the mock does NOT cover (docs/kafka.md): its Fetch reports no aborted transactions,
so a ``read_committed`` consumer on it also returns records of aborted and still-open
transactions. The sink tests therefore never trust ``read_committed`` on the mock: they
tell committed from aborted records by the transaction markers in the log
(:mod:`jstormpy.connectors.kafka_markers`), or by the ``jstorm-txn`` header every record
carries and the transactions the test itself committed (on a real cluster they also check
that ``read_committed`` agrees).
"""

from __future__ import annotations

import os
import pickle
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from jstormpy import SequenceSpout, TopologyBuilder
from jstormpy.api.component import Tuple
from jstormpy.connectors.kafka import (
    TXN_HEADER,
    KafkaSink,
    KafkaSpout,
    read_commit_log,
)
from jstormpy.connectors.kafka_markers import committed_records, records_with_states
from jstormpy.operations.rescale_state import plan_rescale, rescale_checkpoint
from jstormpy.run_identity import RunIdentity
from jstormpy.state_backends import open_backend
from tests.connectors.contract import TOPOLOGY, SourceContract, context

ck = pytest.importorskip("confluent_kafka")

REAL = os.environ.get("JSTORM_KAFKA_BOOTSTRAP")


def new_topic(bootstrap: str) -> str:
    """A fresh topic (auto-created, 4 partitions on the mock)."""
    topic = f"t-{uuid.uuid4().hex[:10]}"
    p = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    p.list_topics(topic, timeout=10)  # triggers auto-creation
    p.flush(5)
    return topic


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Any]:
    """Every record of ``topic`` (all partitions, from the start) with a fresh consumer."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                     "enable.auto.commit": False, "isolation.level": isolation,
                     "log_level": 3})
    out: list[Any] = []
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        for p in parts:
            tp = ck.TopicPartition(topic, p)
            low, high = c.get_watermark_offsets(tp, timeout=10)
            if high <= low:
                continue
            c.assign([ck.TopicPartition(topic, p, low)])
            last = low - 1
            while last < high - 1:
                msgs = c.consume(500, timeout=1.0)
                if not msgs:
                    break  # the rest are control markers
                for m in msgs:
                    if m.error() is None:
                        out.append(m)
                        last = m.offset()
    finally:
        c.close()
    return out


class KafkaSourceHarness:
    """The SourceContract harness over one fresh topic."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.topic = new_topic(bootstrap)
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
        self.splits = sorted(
            self.producer.list_topics(self.topic, timeout=10).topics[self.topic].partitions)

    def produce(self, split: Any, records: Sequence[tuple[str, str]],
                timestamp_ms: int | None = None) -> None:
        for key, value in records:
            kw: dict[str, Any] = {"timestamp": timestamp_ms} if timestamp_ms else {}
            self.producer.produce(self.topic, key=key, value=value, partition=int(split), **kw)
        assert self.producer.flush(10) == 0

    def make_spout(self, idle_timeout_ms: float | None = None) -> KafkaSpout:
        return KafkaSpout(self.topic, self.bootstrap, idle_timeout_ms=idle_timeout_ms)

    def decode(self, values: Sequence[Any]) -> tuple[Any, str, str]:
        key, value, partition, _offset, _ts = values
        return (partition, key, value)

    def released_offsets(self) -> dict[str, Any] | None:
        """The offsets committed to the spout's consumer group, read with a fresh consumer
        (the spout commits a completed checkpoint's offsets there, for lag monitoring)."""
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "log_level": 3,
                         "group.id": f"jstorm-{TOPOLOGY}-c", "enable.auto.commit": False})
        try:
            got = c.committed([ck.TopicPartition(self.topic, int(p)) for p in self.splits],
                              timeout=10)
        finally:
            c.close()
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


class TestKafkaSpoutContract(SourceContract):
    @pytest.fixture
    def harness(self, bootstrap: str) -> KafkaSourceHarness:
        return KafkaSourceHarness(bootstrap)


def test_spout_emits_the_declared_fields(bootstrap: str) -> None:
    h = KafkaSourceHarness(bootstrap)
    h.produce(h.splits[0], [("k", "v")], timestamp_ms=1_700_000_000_123)
    from tests.connectors.contract import SpoutDriver
    d = SpoutDriver(h)
    d.read(1)
    key, value, partition, offset, ts = d.out.tuples[0]
    assert (key, value, partition, offset, ts) == ("k", "v", h.splits[0], 0, 1_700_000_000_123)
    assert KafkaSpout.outputs == ("key", "value", "partition", "offset", "timestamp")
    d.close()


# ------------------------------------------------------------------------------ the sink

FIELDS = {"key": 0, "value": 1}


class SinkTask:
    """One sink task driven as the engine does (prepare, re-commits, recover, begin)."""

    def __init__(self, bootstrap: str, topic: str, restored: int | None = None,
                 pending: Sequence[int] = (), state: dict[Any, Any] | None = None,
                 generation: int = 1, task_id: int = 1, run: RunIdentity | None = None) -> None:
        self.sink = KafkaSink(topic, bootstrap, key_field="key",
                              commit_log_read="read_committed" if REAL else "markers")
        if state is not None:  # the restored managed state (the task snapshot)
            self.sink.__dict__["_jstorm_states"] = {"kafka_sink_pending": dict(state)}
        self.sink.prepare({}, context(task_id=task_id, generation=generation, run=run))
        for p in pending:
            self.sink.commit(p)
        self.sink.recover(restored)
        self.txn = (restored or 0) + 1
        self.sink.begin(self.txn)

    def write(self, rows: Sequence[tuple[str, str]]) -> None:
        for r in rows:
            self.sink.execute(Tuple(r, FIELDS, "src", "default", 0))

    def barrier(self) -> tuple[int, dict[Any, Any]]:
        """Pre-commit the open transaction, take the snapshot, open the next."""
        n = self.txn
        self.sink.pre_commit(n)
        snap = dict(self.sink.state("kafka_sink_pending"))
        self.txn = n + 1
        self.sink.begin(self.txn)
        return n, snap


def committed_values(bootstrap: str, topic: str, committed: set[str]) -> list[tuple[str, str]]:
    """(key, value) of the records whose transaction is in ``committed`` (``tid:cid``), in
    partition/offset order. The mock returns aborted records too, so the header decides."""
    out = []
    for m in read_all(bootstrap, topic):
        txn = dict(m.headers() or [])[TXN_HEADER].decode()
        if txn in committed:
            out.append((m.key().decode(), m.value().decode()))
    if REAL:  # a real cluster's read_committed must agree
        real = [(m.key().decode(), m.value().decode())
                for m in read_all(bootstrap, topic, "read_committed")]
        assert sorted(real) == sorted(out)
    return out


TID = "jstorm-contract-c-1"


def test_sink_commits_once_per_checkpoint(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    t = SinkTask(bootstrap, topic)
    t.write([("a", str(i)) for i in range(5)])
    n, _ = t.barrier()
    t.write([("a", str(i)) for i in range(5, 8)])  # buffered: transaction n is pre-committed
    t.sink.commit(n)
    m, _ = t.barrier()
    t.sink.commit(m)
    assert read_commit_log(bootstrap, topic + ".jstorm-commits", TID) == [n, m]
    got = committed_values(bootstrap, topic, {f"{TID}:{n}", f"{TID}:{m}"})
    assert sorted(got, key=lambda kv: int(kv[1])) == [("a", str(i)) for i in range(8)]


def test_crash_between_pre_commit_and_commit_is_resolved(bootstrap: str) -> None:
    """Pre-commit n, crash before commit; the restore to n publishes n exactly once."""
    topic = new_topic(bootstrap)
    t = SinkTask(bootstrap, topic)
    t.write([("a", str(i)) for i in range(4)])
    n, snap = t.barrier()
    t.write([("a", "lost-open")])  # open transaction n+1: must never be visible
    # crash: the process is gone without commit or abort
    t.sink.cleanup()
    left = [m for m, state in records_with_states(bootstrap, topic) if state != "committed"]
    assert len(left) == 4, "the pre-committed transaction is not in the log, uncommitted"
    t2 = SinkTask(bootstrap, topic, restored=n, pending=[n], state=snap, generation=2)
    # what a read_committed reader sees: transaction n once, the open n+1 never
    expected = [("a", str(i)) for i in range(4)]
    assert [(m.key().decode(), m.value().decode())
            for m in committed_records(bootstrap, topic)] == expected
    assert read_commit_log(bootstrap, topic + ".jstorm-commits", TID, how="markers") == [n]
    # restarting again (restore to n once more) must not re-send: the log shows n committed
    t2.sink.cleanup()
    SinkTask(bootstrap, topic, restored=n, pending=[n], state=snap, generation=3)
    assert [(m.key().decode(), m.value().decode())
            for m in committed_records(bootstrap, topic)] == expected, (
        "commit of an already committed transaction re-sent it")


def _committed_run(bootstrap: str, topic: str, run: RunIdentity, rows: int = 2) -> None:
    """A run of one sink task that commits transactions 1..3 (its commit log: 1, 2, 3)."""
    t = SinkTask(bootstrap, topic, run=run)
    for _ in range(3):
        t.write([("a", f"{run.job_id}-{i}") for i in range(rows)])
        n, _snap = t.barrier()
        t.sink.commit(n)
    t.sink.abort(t.txn)
    t.sink.cleanup()


def _values(bootstrap: str, topic: str) -> list[str]:
    return [m.value().decode() for m in committed_records(bootstrap, topic)]


def test_a_fresh_run_does_not_take_an_earlier_runs_commit_log_entries(bootstrap: str
                                                                       ) -> None:
    """Issue 23 hole 3, one task: the fresh run's transaction 1, pre-committed, crashed
    before its commit, is re-sent although the earlier run's log already holds 1..3."""
    topic = new_topic(bootstrap)
    _committed_run(bootstrap, topic, RunIdentity("earlier", 1))
    fresh = RunIdentity("fresh", 1)
    t = SinkTask(bootstrap, topic, run=fresh)
    t.write([("a", "fresh-0"), ("a", "fresh-1")])
    n, snap = t.barrier()
    t.sink.cleanup()  # crash after complete(n), before commit(n)
    SinkTask(bootstrap, topic, restored=n, pending=[n], state=snap, generation=2, run=fresh)
    assert [v for v in _values(bootstrap, topic) if v.startswith("fresh")] == [
        "fresh-0", "fresh-1"]
    log = topic + ".jstorm-commits"
    assert read_commit_log(bootstrap, log, f"{TID}@fresh", how="markers") == [n]
    assert read_commit_log(bootstrap, log, f"{TID}@earlier", how="markers") == [1, 2, 3]


def test_a_savepoint_restore_takes_its_pending_transaction_as_the_earlier_runs(
        bootstrap: str) -> None:
    """The savepoint's pending transaction (its checkpoint 3) was the earlier run's, which
    committed it: the restored run (a new job id) must not re-send it; its own ids after the
    savepoint are looked up under its own key."""
    topic = new_topic(bootstrap)
    earlier = RunIdentity("earlier", 1)
    t = SinkTask(bootstrap, topic, run=earlier)
    for i in range(3):
        t.write([("a", f"earlier-{i}")])
        n, snap = t.barrier()
        t.sink.commit(n)
    t.sink.abort(t.txn)
    t.sink.cleanup()
    restored = RunIdentity.from_savepoint(earlier, n).taken_over()
    r = SinkTask(bootstrap, topic, restored=n + 1, pending=[n], state=snap, run=restored)
    r.write([("a", "restored-0")])
    m, snap2 = r.barrier()
    r.sink.cleanup()  # crash before commit(m): m is above the savepoint, this run's own
    SinkTask(bootstrap, topic, restored=m, pending=[m], state=snap2, generation=2,
             run=restored)
    assert _values(bootstrap, topic) == ["earlier-0", "earlier-1", "earlier-2", "restored-0"]


def test_a_savepoint_restore_commits_a_transaction_its_run_abandoned_in_a_fallback(
        bootstrap: str) -> None:
    """Issue 23, simulator seed 1032215: the savepoint (checkpoint 2) holds transaction 2
    pre-committed, but the earlier run never committed it: a lost shared file made it fall
    back to checkpoint 1 and re-emit that span under ids from 101. Its commit log then
    reads 1, 101: 2 lies below the last entry yet is not committed. A restore of the
    savepoint must commit transaction 2, not skip it as the earlier run's."""
    topic = new_topic(bootstrap)
    earlier = RunIdentity("earlier", 1)
    t = SinkTask(bootstrap, topic, run=earlier)
    t.write([("a", "txn-1")])
    one, snap1 = t.barrier()
    t.sink.commit(one)
    t.write([("a", "txn-2")])
    two, savepoint = t.barrier()
    t.sink.cleanup()  # crash after complete(2), before commit(2)
    # The fallback past 2: restore checkpoint 1, ids go on above the reservation.
    f = SinkTask(bootstrap, topic, restored=one, state=snap1, generation=2, run=earlier)
    f.sink.abort(f.txn)
    f.txn = 101
    f.sink.begin(f.txn)
    f.write([("a", "txn-2-replayed")])
    n, _snap = f.barrier()
    f.sink.commit(n)
    f.sink.abort(f.txn)
    f.sink.cleanup()
    log = topic + ".jstorm-commits"
    assert read_commit_log(bootstrap, log, f"{TID}@earlier", how="markers") == [1, 101]
    restored = RunIdentity.from_savepoint(earlier, two).taken_over()
    r = SinkTask(bootstrap, topic, restored=two, pending=[two], state=savepoint,
                 run=restored)
    r.sink.abort(r.txn)
    r.sink.cleanup()
    assert _values(bootstrap, topic) == ["txn-1", "txn-2-replayed", "txn-2"], (
        "the savepoint's transaction 2, never committed by its run, was skipped")


def test_rescale_leaves_no_committed_records_in_the_sink_state(bootstrap: str,
                                                              tmp_path: Path) -> None:
    """The real rescale path (``rescale_checkpoint``) restores every new task from the
    quiescent checkpoint with nothing pending: the old tasks committed it. Its records sit
    in each old task's state under the checkpoint id, a key like any other, so they move
    by key group into a new task; they must not stay there (they would be written into
    every later snapshot of that task), nor be re-sent."""
    topic = new_topic(bootstrap)
    b = TopologyBuilder("rescale-sink")
    b.set_spout("in", SequenceSpout(keys=2, per_key=1), parallelism=1)
    b.set_bolt("out", KafkaSink(topic, bootstrap), parallelism=2).fields_grouping("in",
                                                                                   ["key"])
    old = b.build()
    backend = open_backend(f"file://{tmp_path}")
    tasks: dict[str, Any] = {}
    expected = []
    for task_id in old.task_ids()["out"]:  # checkpoint 1: pre-committed, snapshot, commit
        t = SinkTask(bootstrap, topic, task_id=task_id)
        expected.append((f"k{task_id}", "before"))
        t.write([expected[-1]])
        n, state = t.barrier()
        t.sink.commit(n)
        t.sink.cleanup()
        snap = {"max_parallelism": 16, "states": {"kafka_sink_pending": state},
                "sink_pending": [n], "eos_channels": [], "channel_wm": {}}
        tasks[str(task_id)] = {"handle": backend.put_snapshot(1, task_id, pickle.dumps(snap))}
    (spout_id,) = old.task_ids()["in"]
    tasks[str(spout_id)] = {"handle": backend.put_snapshot(1, spout_id, pickle.dumps(
        {"max_parallelism": 16, "states": {}, "finished": False}))}
    backend.create_metadata(1, {"generation": 1, "tasks": tasks})
    new = plan_rescale(old, {"out": 3}, 16)
    meta = rescale_checkpoint(backend, 1, old, new, 16, 2)
    snaps = [pickle.loads(backend.get_snapshot(meta["tasks"][str(t)]["handle"]))
             for t in new.task_ids()["out"]]
    assert [s["states"]["kafka_sink_pending"] for s in snaps
            if s["states"].get("kafka_sink_pending")] != [], "nothing moved: test is moot"
    for task_id, snap in zip(new.task_ids()["out"], snaps, strict=True):
        t = SinkTask(bootstrap, topic, restored=2, pending=snap["sink_pending"],
                     state=snap["states"].get("kafka_sink_pending", {}), generation=2,
                     task_id=task_id)
        assert dict(t.sink.state("kafka_sink_pending")) == {}, \
            f"task {task_id} kept records of a committed transaction"
        expected.append((f"k{task_id}", "after"))
        t.write([expected[-1]])
        m, state = t.barrier()
        assert list(state) == [m], "the snapshot holds another transaction's records"
        t.sink.commit(m)
    got = [(m.key().decode(), m.value().decode()) for m in committed_records(bootstrap, topic)]
    assert sorted(got) == sorted(expected)


@pytest.mark.skipif(not REAL, reason="librdkafka's mock cluster does not fence: an EndTxn "
                    "from the old producer epoch still commits (set JSTORM_KAFKA_BOOTSTRAP)")
def test_fencing_stops_the_zombie(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    zombie = SinkTask(bootstrap, topic)
    zombie.write([("z", "1")])
    SinkTask(bootstrap, topic, restored=None, generation=2)  # same transactional.id
    from jstormpy.api.errors import SinkError
    with pytest.raises((SinkError, ck.KafkaException)):
        n, _ = zombie.barrier()
        zombie.sink.commit(n)


def test_bad_arguments_are_clear_errors() -> None:
    from jstormpy.api.errors import SinkError, SourceError
    with pytest.raises(SourceError, match="topic"):
        KafkaSpout("", "x:1")
    with pytest.raises(SourceError, match="start"):
        KafkaSpout("t", "x:1", start="middle")
    with pytest.raises(SinkError, match="transactional.id"):
        KafkaSink("t", "x:1", **{"transactional.id": "mine"})


def test_kafka_to_postgres_example_builds() -> None:
    """The example's topology builds (KafkaSpout → window → PostgresSink 2pc)."""
    import importlib.util
    import runpy
    from pathlib import Path

    if importlib.util.find_spec("jstormpy.connectors.postgres") is None:
        pytest.skip("PostgresSink is not on this branch")
    path = Path(__file__).resolve().parents[2] / "examples" / "kafka_to_postgres.py"
    mod = runpy.run_path(str(path))
    assert mod["config"].guarantee == "exactly_once"
    assert {"orders", "parse", "window", "row", "pg"} == set(mod["topology"].components)
