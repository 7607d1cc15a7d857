"""Connector throughput and commit-visibility latency, exactly-once on, real servers.

    .venv/bin/python bench/connectors_bench.py [--records 200000] [--interval-ms 1000] [--json]

Starts a throw-away PostgreSQL (initdb + pg_ctl) and redis-server on free ports, then:

* **throughput** (records/s, from the topology running to drained, final checkpoint
  included) through ``PostgresSink`` (2pc and upsert), ``RedisStreamSink``, ``KafkaSink``,
  and out of ``RedisStreamSpout`` and ``KafkaSpout`` (into a ``FileSink``); 1 worker per
  component chain, exactly-once. Kafka is librdkafka's mock cluster hosted by this process
  (no disk, no replication; ``JSTORM_KAFKA_BOOTSTRAP`` for a real cluster);
* **commit visibility**: a spout stamps each record with the wall clock at emit, at a fixed
  rate; a poller reads new rows/entries every 5 ms with its own connection and records when
  each became visible. The latency is about half a checkpoint interval plus the checkpoint's
  own duration: output is visible only once the checkpoint that covers it completes.
  Kafka: on the mock cluster (whose ``read_committed`` also returns uncommitted records) a
  record is visible once the poller sees its transaction's COMMIT marker in the log
  (:mod:`jstormpy.connectors.kafka_markers`, a full fetch per poll, so polls are slower
  than 5 ms); on a real cluster the poller is a ``read_committed`` consumer.

Run it on an idle machine; the figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import redis

from jstormpy import Config, FileSink, LocalCluster, SequenceSpout, Spout, TopologyBuilder
from jstormpy.connectors import (
    KafkaSink,
    KafkaSpout,
    PostgresSink,
    RedisStreamSink,
    RedisStreamSpout,
)
from jstormpy.connectors.kafka import kafka_bootstrap_of_mock
from jstormpy.connectors.kafka_markers import partition_batches
from jstormpy.testing.servers.postgres import PostgresServer
from jstormpy.testing.servers.redis_server import RedisServer


class StampedSpout(Spout):
    """``(key, seq, value, emitted_ms)`` at ``rate`` records/s, ``n`` in all (replayable)."""

    outputs = ("key", "seq", "value", "emitted_ms")

    def __init__(self, n: int, rate: float) -> None:
        self.n, self.rate, self.pos = n, rate, 0
        self.t0: float | None = None

    def snapshot(self) -> int:
        return self.pos

    def restore(self, snap: int) -> None:
        self.pos = snap

    def next_tuple(self) -> None:
        if self.pos >= self.n:
            if not self.finished:
                self.finish()
            return
        now = time.monotonic()
        if self.t0 is None:
            self.t0 = now - self.pos / self.rate
        due = min(self.n, int((now - self.t0) * self.rate) + 1)
        wall = time.time() * 1000.0
        while self.pos < due:
            self.emit((f"k{self.pos % 10}", self.pos, 1, wall))
            self.pos += 1
        time.sleep(0.001)  # rate pacing: at most ~1000 calls/s


def _config(interval_ms: int) -> Config:
    return Config(workers=1, guarantee="exactly_once", checkpoint_interval_ms=interval_ms)


def _run(topology: Any, config: Config, home: str) -> float:
    """Seconds from ``running`` to ``drained``."""
    with LocalCluster(home=home) as cluster:
        handle = cluster.submit(topology, config)
        deadline = time.monotonic() + 600
        while handle.status().get("state") != "running":
            if time.monotonic() > deadline:
                raise RuntimeError("topology never ran")
            time.sleep(0.01)
        t0 = time.monotonic()
        status = handle.wait(timeout=600)
        elapsed = time.monotonic() - t0
    if status["state"] != "drained":
        raise RuntimeError(f"bench topology ended {status['state']}")
    return elapsed


def _pg_table(dsn: str, name: str, upsert: bool = False) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if upsert:
            conn.execute(f"CREATE TABLE {name} (key text PRIMARY KEY, seq int, value int)")
        else:
            conn.execute(f"CREATE TABLE {name} (id bigserial PRIMARY KEY, key text, seq int, "
                         "value int, emitted_ms double precision)")


def throughput(pg: PostgresServer, rs: RedisServer, records: int, interval_ms: int,
               home: str) -> list[tuple[str, float]]:
    """records/s through each connector."""
    keys = 100
    per_key = max(records // keys, 1)
    n = keys * per_key
    out: list[tuple[str, float]] = []
    dsn = pg.create_database("bench_tp")
    for mode in ("2pc", "upsert"):
        table = f"t_{mode}"
        _pg_table(dsn, table, upsert=mode == "upsert")
        b = TopologyBuilder(f"bench-pg-{mode}")
        b.set_spout("s", SequenceSpout(keys=keys, per_key=per_key, batch=500))
        b.set_bolt("out", PostgresSink(dsn, table, ["key", "seq", "value"], mode=mode,
                                       key="key" if mode == "upsert" else None)
                   ).shuffle_grouping("s")
        out.append((f"PostgresSink mode={mode}", n / _run(b.build(), _config(interval_ms), home)))
    b = TopologyBuilder("bench-redis-sink")
    b.set_spout("s", SequenceSpout(keys=keys, per_key=per_key, batch=500))
    b.set_bolt("out", RedisStreamSink(rs.url, "bench-out")).shuffle_grouping("s")
    out.append(("RedisStreamSink", n / _run(b.build(), _config(interval_ms), home)))
    b = TopologyBuilder("bench-redis-spout")
    b.set_spout("s", RedisStreamSpout(rs.url, "bench-out", fields=("key", "seq", "value"),
                                      bounded=True))
    b.set_bolt("out", FileSink(tempfile.mkdtemp(prefix="jstorm-bench-"))).shuffle_grouping("s")
    out.append(("RedisStreamSpout -> FileSink", n / _run(b.build(), _config(interval_ms), home)))
    out += kafka_throughput(keys, per_key, interval_ms, home)
    return out


def kafka_throughput(keys: int, per_key: int, interval_ms: int,
                     home: str) -> list[tuple[str, float]]:
    """records/s through KafkaSink (a transaction per checkpoint) and out of KafkaSpout."""
    n = keys * per_key
    bootstrap = os.environ.get("JSTORM_KAFKA_BOOTSTRAP")
    handle = None
    if not bootstrap:
        handle, bootstrap = kafka_bootstrap_of_mock(1)  # lives until this function returns
    topic = f"bench-{int(time.time() * 1000)}"
    b = TopologyBuilder("bench-kafka-sink")
    b.set_spout("s", SequenceSpout(keys=keys, per_key=per_key, batch=500))
    b.set_bolt("out", KafkaSink(topic, bootstrap, key_field="key", value_field="seq")
               ).shuffle_grouping("s")
    out = [("KafkaSink", n / _run(b.build(), _config(interval_ms), home))]
    b = TopologyBuilder("bench-kafka-spout")
    b.set_spout("s", KafkaSpout(topic, bootstrap, bounded=True, batch=1000,
                                idle_timeout_ms=None))
    b.set_bolt("out", FileSink(tempfile.mkdtemp(prefix="jstorm-bench-"))).shuffle_grouping("s")
    out.append(("KafkaSpout -> FileSink", n / _run(b.build(), _config(interval_ms), home)))
    del handle
    return out


def _poll(read_new: Callable[[], list[float]], stop: threading.Event,
          lat: list[float]) -> None:
    while not stop.is_set():
        now = time.time() * 1000.0
        lat.extend(now - e for e in read_new())
        stop.wait(0.005)


def visibility(pg: PostgresServer, rs: RedisServer, interval_ms: int, home: str,
               rate: float = 2000, seconds: float = 10.0) -> list[tuple[str, list[float]]]:
    """Per connector: the delays (ms) from emit to visible to a fresh reader."""
    n = int(rate * seconds)
    results: list[tuple[str, list[float]]] = []
    dsn = pg.create_database("bench_vis")
    _pg_table(dsn, "vis")
    conn = psycopg.connect(dsn, autocommit=True)
    last = [0]

    def pg_new() -> list[float]:
        rows = conn.execute("SELECT id, emitted_ms FROM vis WHERE id > %s ORDER BY id",
                            (last[0],)).fetchall()
        if rows:
            last[0] = rows[-1][0]
        return [r[1] for r in rows]

    client = redis.Redis.from_url(rs.url, decode_responses=True)
    pos = ["0-0"]

    def redis_new() -> list[float]:
        reply: Any = client.xread({"vis": pos[0]}, count=100_000)
        got = []
        for _, entries in reply or ():
            for eid, kv in entries:
                pos[0] = eid
                got.append(float(json.loads(kv["emitted_ms"])))
        return got

    kafka = _KafkaVisibility()
    for name, sink, reader in (
            ("PostgresSink 2pc", PostgresSink(dsn, "vis", ["key", "seq", "value", "emitted_ms"]),
             pg_new),
            ("RedisStreamSink", RedisStreamSink(rs.url, "vis"), redis_new),
            ("KafkaSink", KafkaSink(kafka.topic, kafka.bootstrap, key_field="key",
                                    value_field=None), kafka.read_new)):
        b = TopologyBuilder("bench-visibility")
        b.set_spout("s", StampedSpout(n, rate))
        b.set_bolt("out", sink).shuffle_grouping("s")
        lat: list[float] = []
        stop = threading.Event()
        poller = threading.Thread(target=_poll, args=(reader, stop, lat), daemon=True)
        poller.start()
        _run(b.build(), _config(interval_ms), home)
        stop.set()
        poller.join(5)
        lat.extend(time.time() * 1000.0 - e for e in reader())
        results.append((name, lat))
    conn.close()
    client.close()
    kafka.close()
    return results


class _KafkaVisibility:
    """Emit stamps of the records of a fresh topic that became visible since the last call.

    Hosts the mock cluster unless ``JSTORM_KAFKA_BOOTSTRAP`` is set. Real cluster: a
    ``read_committed`` consumer. Mock: a ``read_uncommitted`` consumer collects every record,
    and a record counts as visible once its batch is committed by a marker in the log.
    """

    def __init__(self) -> None:
        import confluent_kafka as ck

        self.bootstrap = os.environ.get("JSTORM_KAFKA_BOOTSTRAP", "")
        self.handle = None
        if not self.bootstrap:
            self.handle, self.bootstrap = kafka_bootstrap_of_mock(1)
        self.real = self.handle is None
        self.topic = f"bench-vis-{int(time.time() * 1000)}"
        probe = ck.Producer({"bootstrap.servers": self.bootstrap, "log_level": 3})
        parts = probe.list_topics(self.topic, timeout=10).topics[self.topic].partitions
        self.consumer = ck.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"bench-{self.topic}",
            "enable.auto.commit": False, "log_level": 3,
            "isolation.level": "read_committed" if self.real else "read_uncommitted"})
        self.consumer.assign([ck.TopicPartition(self.topic, p, 0) for p in sorted(parts)])
        self.pending: dict[tuple[int, int], float] = {}

    def read_new(self) -> list[float]:
        """Stamps of the records that became visible since the last call."""
        got: list[float] = []
        while True:
            msgs = self.consumer.consume(10_000, timeout=0)
            if not msgs:
                break
            for m in msgs:
                if m.error() is None:
                    stamp = float(json.loads(m.value() or b"{}")["emitted_ms"])
                    if self.real:
                        got.append(stamp)
                    else:
                        self.pending[(int(m.partition() or 0), int(m.offset() or 0))] = stamp
        if not self.real and self.pending:
            for b in partition_batches(self.bootstrap, self.topic):
                if b.state == "committed":
                    for off in range(b.first_offset, b.last_offset + 1):
                        if (b.partition, off) in self.pending:
                            got.append(self.pending.pop((b.partition, off)))
        return got

    def close(self) -> None:
        """Close the consumer; the mock cluster goes with ``handle``."""
        self.consumer.close()
        self.handle = None


def main() -> int:
    """Run both benches; print markdown tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval")
    ap.add_argument("--rate", type=float, default=2000, help="visibility run: records/s")
    ap.add_argument("--seconds", type=float, default=10.0, help="visibility run: duration")
    ap.add_argument("--json", action="store_true", help="also print a BENCH_JSON line")
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="jstorm-bench-home-")
    with PostgresServer() as pg, RedisServer() as rs:
        tp = throughput(pg, rs, args.records, args.interval_ms, home)
        vis = visibility(pg, rs, args.interval_ms, home, rate=args.rate,
                         seconds=args.seconds)
    print(f"\nexactly-once, checkpoint interval {args.interval_ms} ms, "
          f"{args.records} records\n")
    print("| connector | records/s |\n|---|---:|")
    for name, rps in tp:
        print(f"| {name} | {rps:,.0f} |")
    print("\n| commit visibility (emit -> visible) | records | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for name, lat in vis:
        q = statistics.quantiles(lat, n=20) if len(lat) > 1 else [float("nan")] * 19
        print(f"| {name} | {len(lat)} | {statistics.median(lat):.0f} | {q[18]:.0f} | "
              f"{max(lat):.0f} |")
    if args.json:
        print("BENCH_JSON " + json.dumps({
            "records_per_s": {name: round(rps) for name, rps in tp},
            "visibility_ms": {name: {"p50": statistics.median(lat), "max": max(lat)}
                              for name, lat in vis if lat}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
