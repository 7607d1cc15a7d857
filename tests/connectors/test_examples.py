"""The connector examples run end to end with a SIGKILL and are verified: the broker
example (own redis-server) and Kafka -> windowed totals -> PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jstormpy.testing.servers.redis_server import find_redis_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_redis_streams_pipeline_example_is_exactly_once(tmp_path: Path) -> None:
    if find_redis_server() is None:
        pytest.skip("redis-server is not installed")
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "redis_streams_pipeline.py")],
                         check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "exactly-once: OK" in res.stdout
    assert "chaos: fault point fired: sink_before_commit@1 (a worker was SIGKILLed in a " \
           "sink between pre-commit and commit of checkpoint 1)" in res.stdout, res.stdout
    assert "@None" not in res.stdout and "kills=[" not in res.stdout


def _orders(customers: int, per_customer: int, t0: int) -> list[tuple[str, int, int]]:
    """``(customer, amount, ts)``: per customer, one order every 100 ms of event time."""
    return [(f"c{c}", (c * 31 + i * 17) % 5000 + 100, t0 + i * 100)
            for i in range(per_customer) for c in range(customers)]


def test_kafka_to_postgres_example_is_exactly_once(tmp_path: Path, pg_dsn: str,
                                                   bootstrap: str) -> None:
    """examples/kafka_to_postgres.py end to end: orders in Kafka (the mock cluster hosted
    here, or JSTORM_KAFKA_BOOTSTRAP), a sink SIGKILLed between pre-commit and commit of
    checkpoint 1 (the job rolls back: Kafka offsets and window state restored, the rest
    replayed), then every (customer, window) total in PostgreSQL exactly once."""
    import dataclasses
    import json
    import runpy
    import uuid

    import confluent_kafka as ck
    import psycopg

    from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

    ex = runpy.run_path(str(ROOT / "examples" / "kafka_to_postgres.py"))
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    orders = _orders(customers=8, per_customer=400, t0=1_700_000_000_000)  # 40 s: 4-5 windows
    producer = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    parts = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    for customer, amount, ts in orders:  # a customer's orders in one partition, in order;
        # every partition has orders, so the watermark advances while the input is read
        producer.produce(topic, key=customer, timestamp=ts, partition=int(customer[1:]) % parts,
                         value=json.dumps({"customer": customer, "amount": amount, "ts": ts}))
    assert producer.flush(30) == 0
    del producer  # not kept alive past the mock cluster by a failure's traceback
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE order_totals (customer text, window_start bigint, "
                     "total bigint, PRIMARY KEY (customer, window_start))")
    size = ex["WINDOW_MS"]
    want: dict[tuple[str, int], int] = {}
    for customer, amount, ts in orders:
        k = (customer, ts - ts % size)
        want[k] = want.get(k, 0) + amount

    config = dataclasses.replace(ex["config"], checkpoint_interval_ms=200,
                                 worker_timeout_ms=5000)
    schedule = ChaosSchedule(61, (Kill("point", point="sink_before_commit", checkpoint=1),))
    status, kills, _ = run_with_chaos(ex["build"](bootstrap, pg_dsn, topic, bounded=True),
                                      config, schedule, timeout=180,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained", (status, kills)
    assert any(k.startswith("fault point fired: sink_before_commit@1") for k in kills), kills
    assert status["restarts"] >= 1, status["recoveries"]
    with psycopg.connect(pg_dsn) as conn:
        got = {(c, w): t for c, w, t in
               conn.execute("SELECT customer, window_start, total FROM order_totals")}
        prepared = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE database = "
                                "current_database()").fetchall()
    assert got == want
    assert prepared == [], "prepared transactions left behind"


@pytest.mark.parametrize("example", ["clickstream_sessions.py", "orders_payments_join.py"])
def test_dataflow_examples_are_exactly_once_across_a_worker_kill(tmp_path: Path,
                                                                 example: str) -> None:
    """The dataflow examples (session windows; an interval join into a running total): a
    worker SIGKILLed mid-run, then every result checked against a recomputation."""
    res = subprocess.run([sys.executable, str(ROOT / "examples" / example)], check=False,
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "SIGKILLed worker 1" in res.stdout, res.stdout
    assert "1 recoveries" in res.stdout, res.stdout
    assert "verify: exactly once" in res.stdout, res.stdout
