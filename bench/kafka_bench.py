"""Kafka connector benchmark: records/s through KafkaSpout and KafkaSink (exactly-once), and
the latency commit visibility adds.

Drives the spout and the sink as the engine does (restore/open/next_tuple/snapshot;
prepare/begin/write/pre_commit/commit) in this process, so the figures are the connector's
own cost, not the topology's. By default against librdkafka's mock cluster hosted in this
process (figures then include no disk and no replication); ``JSTORM_KAFKA_BOOTSTRAP`` for a
real cluster.

* spout: ``--records`` records pre-produced over the topic's partitions, read back with a
  snapshot every ``--per-checkpoint`` records.
* sink: ``--records`` records written, a barrier (pre-commit) and commit every
  ``--per-checkpoint`` records (one Kafka transaction per checkpoint).
* visibility: per record, time from ``write`` until the commit of its transaction returned
  (what a ``read_committed`` reader waits on top of the checkpoint interval), with a
  checkpoint every ``--interval-ms``.

Usage:
    python bench/kafka_bench.py [--records 200000] [--per-checkpoint 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jstormpy.api.component import TopologyContext, Tuple, bind_task  # noqa: E402
from jstormpy.connectors.kafka import KafkaSink, KafkaSpout, kafka_bootstrap_of_mock  # noqa: E402

FIELDS = {"key": 0, "value": 1}


class _Null:
    def __init__(self) -> None:
        self.n = 0

    def emit(self, values: Any, stream: str = "default") -> None:
        self.n += 1

    def emit_watermark(self, wm: float) -> None:
        pass


def _ctx() -> TopologyContext:
    return TopologyContext(topology="bench", component="c", task_id=1, task_index=0,
                           worker_id=1, component_tasks={"c": (1,)}, generation=1)


def bench_spout(bootstrap: str, records: int, per_ckpt: int) -> dict[str, float]:
    """Records/s read through KafkaSpout (snapshot every ``per_ckpt`` records)."""
    import confluent_kafka as ck

    topic = f"bench-in-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    for i in range(records):
        while True:
            try:
                p.produce(topic, key=f"k{i % 100}", value=f"{i}")
                break
            except BufferError:
                p.poll(0.05)
    p.flush(60)
    spout = KafkaSpout(topic, bootstrap, batch=1000, idle_timeout_ms=None)
    out = _Null()
    bind_task(spout, out, None)
    spout.open({}, _ctx())
    start = time.perf_counter()
    next_snap = per_ckpt
    deadline = time.monotonic() + 300
    while out.n < records and time.monotonic() < deadline:
        spout.next_tuple()
        if out.n >= next_snap:
            spout.snapshot()
            next_snap += per_ckpt
    dt = time.perf_counter() - start
    spout.close()
    return {"spout_records": out.n, "spout_s": dt, "spout_records_per_s": out.n / dt}


def bench_sink(bootstrap: str, records: int, per_ckpt: int) -> dict[str, float]:
    """Records/s written through KafkaSink with a transaction per ``per_ckpt`` records."""
    sink = KafkaSink(f"bench-out-{uuid.uuid4().hex[:8]}", bootstrap, key_field="key")
    sink.prepare({}, _ctx())
    cid = 1
    sink.begin(cid)
    start = time.perf_counter()
    for i in range(records):
        sink.execute(Tuple((f"k{i % 100}", f"{i}"), FIELDS, "src", "default", 0))
        if (i + 1) % per_ckpt == 0:
            sink.pre_commit(cid)
            sink.begin(cid + 1)
            sink.commit(cid)
            cid += 1
    sink.pre_commit(cid)
    sink.commit(cid)
    dt = time.perf_counter() - start
    return {"sink_records": records, "sink_s": dt, "sink_records_per_s": records / dt,
            "sink_transactions": cid}


def bench_visibility(bootstrap: str, interval_ms: float, checkpoints: int,
                     rate_per_s: float) -> dict[str, float]:
    """Record → committed latency at a steady rate with a checkpoint every ``interval_ms``."""
    sink = KafkaSink(f"bench-vis-{uuid.uuid4().hex[:8]}", bootstrap, key_field="key")
    sink.prepare({}, _ctx())
    lat: list[float] = []
    commit_ms: list[float] = []
    gap = 1.0 / rate_per_s
    for cid in range(1, checkpoints + 1):
        sink.begin(cid)
        t_end = time.monotonic() + interval_ms / 1000.0
        written: list[float] = []
        while time.monotonic() < t_end:
            sink.execute(Tuple(("k", "v"), FIELDS, "src", "default", 0))
            written.append(time.monotonic())
            time.sleep(gap)  # the offered load, not a wait for a condition
        c0 = time.monotonic()
        sink.pre_commit(cid)
        sink.commit(cid)
        done = time.monotonic()
        commit_ms.append((done - c0) * 1000)
        lat += [(done - w) * 1000 for w in written]
    lat.sort()
    return {"visibility_p50_ms": lat[len(lat) // 2], "visibility_p99_ms": lat[int(len(lat) * .99)],
            "pre_commit_plus_commit_p50_ms": statistics.median(commit_ms),
            "checkpoint_interval_ms": interval_ms}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--per-checkpoint", type=int, default=10_000)
    ap.add_argument("--interval-ms", type=float, default=500.0)
    ap.add_argument("--checkpoints", type=int, default=6)
    ap.add_argument("--json", action="store_true", help="also print one BENCH_JSON line")
    args = ap.parse_args()
    bootstrap = os.environ.get("JSTORM_KAFKA_BOOTSTRAP")
    handle = None
    if not bootstrap:
        handle, bootstrap = kafka_bootstrap_of_mock(1)
    res: dict[str, Any] = {"bench": "kafka", "cluster": "real" if handle is None else "mock"}
    res.update(bench_spout(bootstrap, args.records, args.per_checkpoint))
    res.update(bench_sink(bootstrap, args.records, args.per_checkpoint))
    res.update(bench_visibility(bootstrap, args.interval_ms, args.checkpoints, 2000.0))
    for k, v in res.items():
        print(f"{k:32s} {v:,.1f}" if isinstance(v, float) else f"{k:32s} {v}")
    if args.json:
        print("BENCH_JSON " + json.dumps(res), flush=True)
    del handle
    return 0


if __name__ == "__main__":
    sys.exit(main())
