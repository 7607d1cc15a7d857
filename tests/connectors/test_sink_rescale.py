"""Rescaling a topology whose sink writes into a real external system (docs/rescaling.md).

PostgresSink (true two-phase commit: PREPARE TRANSACTION per task and checkpoint, a fencing
row per task) and RedisStreamSink (staged transactions per task) go 2 -> 3 -> 1 tasks
together with their upstream stateful bolt, under load. Task ids shift with each layout,
so a transaction left prepared by an old task id, or a fence of the old layout, would show
up as a lost, duplicated or stuck row. A fresh connection then reads what the system
holds: every key's sequence complete, in order and once, running totals recomputed from
the input, and no prepared/staged transaction left behind.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from jstormpy import Config, LocalCluster, SequenceSpout, TopologyBuilder
from jstormpy.connectors import PostgresSink, RedisStreamSink
from jstormpy.testing.redis_server import RedisServer, read_json_stream
from tests.connectors.contract import wait_for
from tests.connectors.test_connectors_chaos import (
    KEYS,
    RunningSum,
    _check,
    _pg_prepared,
    _pg_rows,
    _pg_table,
)

pytestmark = pytest.mark.slow

PER_KEY = 3000  # 30,000 events at 1,400/s: the run outlasts both rescales


def _topology(name: str, sink: Any) -> Any:
    b = TopologyBuilder(name)
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=700),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", sink, parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


def _parallelism(handle: Any, component: str) -> int:
    return next(c["parallelism"] for c in handle.status()["components"]
                if c["name"] == component)


def _rescale_up_then_down(tmp_path: Path, topology: Any, committed: Callable[[], int]) -> None:
    """Run ``topology``; rescale sum and out 2 -> 3 -> 1 while rows keep coming."""
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster(home=str(tmp_path / "home")) as cluster:
        handle = cluster.submit(topology, conf)
        wait_for(lambda: committed() > 1500, 60, "some committed rows")
        up = handle.rescale({"sum": 3, "out": 3})
        assert up["error"] == "", up
        assert (_parallelism(handle, "sum"), _parallelism(handle, "out")) == (3, 3)
        before = committed()
        wait_for(lambda: committed() > before + 1500, 60, "rows from three sink tasks")
        down = handle.rescale({"sum": 1, "out": 1})
        assert down["error"] == "", down
        assert (_parallelism(handle, "sum"), _parallelism(handle, "out")) == (1, 1)
        assert committed() < KEYS * PER_KEY, "the run ended before the second rescale"
        status = handle.wait(timeout=240)
    assert status["state"] == "drained", status
    assert status["restarts"] == 0, status["recoveries"]


def test_postgres_sink_rescales_with_its_upstream(tmp_path: Path, pg_dsn: str) -> None:
    _pg_table(pg_dsn)

    def committed() -> int:
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM totals").fetchone()
        return int(row[0]) if row else 0

    sink = PostgresSink(pg_dsn, "totals", ["key", "seq", "value", "total"])
    _rescale_up_then_down(tmp_path, _topology("pg-rescale", sink), committed)
    rows = _pg_rows(pg_dsn)
    assert len(rows) == KEYS * PER_KEY
    _check(rows, PER_KEY)
    assert _pg_prepared(pg_dsn) == [], "prepared transactions left behind"


def test_redis_sink_rescales_with_its_upstream(tmp_path: Path,
                                               redis_server: RedisServer) -> None:
    url = redis_server.url

    def committed() -> int:
        with redis.Redis.from_url(url) as client:
            return int(client.xlen("out"))

    sink = RedisStreamSink(url, "out")
    _rescale_up_then_down(tmp_path, _topology("redis-rescale", sink), committed)
    rows = read_json_stream(url, "out")
    assert len(rows) == KEYS * PER_KEY
    _check(rows, PER_KEY)
    with redis.Redis.from_url(url, decode_responses=True) as client:
        assert list(client.scan_iter("jstorm:2pc:*:txn:*")) == [], \
            "staged transactions left behind"
