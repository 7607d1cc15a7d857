"""Exactly-once into (and out of) real systems under real SIGKILLs.

Each scenario runs a topology with LocalCluster (real worker processes) while seeded kills
hit workers at random times or at protocol points -- ``sink_before_commit`` is the crash
between pre-commit and commit that leaves prepared transactions behind -- then reads what
the real system holds with a fresh connection and checks per key: no loss, no duplicate,
no reordering, and no prepared/staged transaction left over.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import psycopg
import pytest
import redis

from jstormpy import Bolt, Config, LocalCluster, SequenceSpout, TopologyBuilder
from jstormpy.connectors import PostgresSink, RedisStreamSink, RedisStreamSpout
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos
from jstormpy.testing.semantics import check_running_totals, check_sequences
from jstormpy.testing.servers.postgres import PostgresServer
from jstormpy.testing.servers.redis_server import RedisServer, append_json, read_json_stream
from tests.connectors.contract import wait_for

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 10, 1500


class RunningSum(Bolt):
    """Per key running sum (managed state): output depends on exactly-once state too."""

    outputs = ("key", "seq", "value", "total")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.sums = self.state("sums")

    def execute(self, tup: Any) -> None:
        key = tup["key"]
        total = self.sums.get(key, 0) + int(tup["value"])
        self.sums[key] = total
        self.emit((key, int(tup["seq"]), int(tup["value"]), total))


class _RecordsStagedAtStart:
    """Mixin for a sink: at every start (after connecting, before the engine commits the
    restored checkpoint's pending transactions and recovers) append the task's staged
    transactions to the JSON-lines file ``staged_log``, so a test can see that a crash left
    prepared transactions behind for the next generation to resolve."""

    staged_log: str

    def connect(self, conf: dict[str, Any], context: Any) -> None:
        super().connect(conf, context)  # type: ignore[misc]
        line = json.dumps({"task": context.task_id, "generation": context.generation,
                           "staged": self.staged_transactions()})  # type: ignore[attr-defined]
        with open(self.staged_log, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class StagedRecordingPostgresSink(_RecordsStagedAtStart, PostgresSink):
    """PostgresSink that records the prepared transactions it finds at start."""

    def __init__(self, staged_log: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.staged_log = staged_log


class StagedRecordingRedisSink(_RecordsStagedAtStart, RedisStreamSink):
    """RedisStreamSink that records the staged transactions it finds at start."""

    def __init__(self, staged_log: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.staged_log = staged_log


def _left_behind(staged_log: str) -> list[dict[str, Any]]:
    """Starts of a later generation that found staged transactions of the crashed one."""
    if not os.path.exists(staged_log):
        return []
    with open(staged_log, encoding="utf-8") as f:
        starts = [json.loads(line) for line in f]
    return [s for s in starts if s["generation"] > 1 and s["staged"]]


def _config() -> Config:
    return Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                  worker_timeout_ms=5000)


def _expected_totals() -> dict[tuple[str, int], int]:
    out = {}
    for k in range(KEYS):
        total = 0
        for s in range(PER_KEY):
            total += SequenceSpout.value_of(s)
            out[(f"k{k}", s)] = total
    return out


def _check(rows: list[dict[str, Any]], per_key: int = PER_KEY) -> None:
    report = check_sequences(rows, key="key", seq="seq",
                             expected={f"k{i}": per_key for i in range(KEYS)})
    assert report.ok, report.summary()
    wrong = check_running_totals(rows, key="key", seq="seq", total="total",
                                 amount_of=lambda _k, s: SequenceSpout.value_of(s))
    assert not wrong, f"state not exactly-once: {wrong}"


def _assert_killed(kills: list[str], status: dict[str, Any]) -> None:
    assert status["state"] == "drained", status
    fired = [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))]
    assert fired, f"no kill happened: {kills}"
    assert status["restarts"] >= 1, (kills, status["recoveries"])


# ------------------------------------------------------------------------- PostgreSQL

PG_SCENARIOS = [
    ChaosSchedule.random(seed=31, kills=2, workers=3),
    ChaosSchedule(32, (Kill("point", point="sink_before_commit", checkpoint=2),)),
    ChaosSchedule(33, (Kill("point", point="after_snapshot", checkpoint=3, worker=1),
                       Kill("worker", at_s=1.5, worker=2))),
]


def _pg_topology(dsn: str, name: str = "pg-chaos", rate: float = 3000,
                 staged_log: str | None = None) -> Any:
    b = TopologyBuilder(name)
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    columns = ["key", "seq", "value", "total"]
    sink = (PostgresSink(dsn, "totals", columns) if staged_log is None
            else StagedRecordingPostgresSink(staged_log, dsn, "totals", columns))
    b.set_bolt("out", sink, parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


def _pg_rows(dsn: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT key, seq, value, total FROM totals ORDER BY id").fetchall()
    return [dict(zip(("key", "seq", "value", "total"), r, strict=True)) for r in rows]


def _pg_prepared(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [g for (g,) in conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")]


def _pg_table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE totals (id bigserial PRIMARY KEY, key text, seq int, "
                     "value int, total bigint)")


@pytest.mark.parametrize("schedule", PG_SCENARIOS, ids=[f"seed{s.seed}" for s in PG_SCENARIOS])
def test_postgres_exactly_once_under_sigkill(tmp_path: Any, pg_dsn: str,
                                             schedule: ChaosSchedule) -> None:
    _pg_table(pg_dsn)
    staged_log = str(tmp_path / "staged.jsonl")
    status, kills, _ = run_with_chaos(_pg_topology(pg_dsn, staged_log=staged_log), _config(),
                                      schedule, timeout=180, home=str(tmp_path / "home"))
    _assert_killed(kills, status)
    _check(_pg_rows(pg_dsn))
    assert _pg_prepared(pg_dsn) == [], "prepared transactions left behind"
    if any(k.point == "sink_before_commit" for k in schedule.kills):
        # the crash between PREPARE and COMMIT PREPARED left a prepared transaction that
        # the next generation found (and, by the checks above, resolved exactly once)
        assert _left_behind(staged_log), f"no prepared transaction left behind: {kills}"


def test_postgres_down_aborts_checkpoints_not_the_job(tmp_path: Any) -> None:
    with PostgresServer() as pg:
        dsn = pg.create_database("outage")
        _pg_table(dsn)
        with LocalCluster(home=str(tmp_path / "home")) as cluster:
            # ~5 s of input per spout task: the outage starts well before the sources end
            handle = cluster.submit(_pg_topology(dsn, "pg-outage", rate=1500), _config())
            wait_for(lambda: len(_pg_rows(dsn)) > 0, 60, "first committed rows")
            pg.stop()
            wait_for(lambda: any(c["status"] == "failed" for c in handle.status()["checkpoints"]),
                     60, "a checkpoint given up while the server is down")
            pg.start()
            status = handle.wait(timeout=180)
        assert status["state"] == "drained", status
        assert status["restarts"] == 0, status["recoveries"]
        _check(_pg_rows(dsn))
        assert _pg_prepared(dsn) == []


def test_postgres_upsert_mode_is_idempotent_under_sigkill(tmp_path: Any, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE latest (key text PRIMARY KEY, seq int, total bigint)")
    b = TopologyBuilder("pg-upsert")
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=3000),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", PostgresSink(pg_dsn, "latest", ["key", "seq", "total"], mode="upsert",
                                   key="key"), parallelism=2).fields_grouping("sum", ["key"])
    status, kills, _ = run_with_chaos(b.build(), _config(),
                                      ChaosSchedule.random(seed=41, kills=2, workers=3),
                                      timeout=180, home=str(tmp_path / "home"))
    _assert_killed(kills, status)
    with psycopg.connect(pg_dsn) as conn:
        got = dict((k, (s, t)) for k, s, t in conn.execute("SELECT key, seq, total FROM latest"))
    want = _expected_totals()
    assert got == {f"k{i}": (PER_KEY - 1, want[(f"k{i}", PER_KEY - 1)]) for i in range(KEYS)}


# ------------------------------------------------------------------------- Redis Streams

class PacedRedisStreamSpout(RedisStreamSpout):
    """At most ``batch`` entries per call and a short pause: reading a task's 7,500 entries
    takes at least ~1.9 s whatever the engine's speed, so the kills at random times below
    0.8 s and the fault points at checkpoints 2 and 4 (every 100 ms) land in the middle of
    the run (unpaced, a fast engine can drain the input before them)."""

    def next_tuple(self) -> None:
        super().next_tuple()
        time.sleep(0.005)  # pacing the input, not waiting for a condition


REDIS_SCENARIOS = [
    # early: the paced bounded input (15,000 entries) is read in a few seconds
    ChaosSchedule.random(seed=51, kills=2, workers=3, window_s=(0.2, 0.8)),
    ChaosSchedule(52, (Kill("point", point="sink_before_commit", checkpoint=2),)),
    ChaosSchedule(53, (Kill("point", point="after_snapshot", checkpoint=2, worker=0),
                       Kill("point", point="sink_after_commit", checkpoint=4))),
]


def _fill_input(url: str) -> None:
    """Keys k0..k9 with seq 0..PER_KEY-1; key i lives in stream in-(i % 2)."""
    append_json(url, ((f"in-{k % 2}", {"key": f"k{k}", "seq": s,
                                       "value": SequenceSpout.value_of(s)})
                      for s in range(PER_KEY) for k in range(KEYS)))


@pytest.mark.parametrize("schedule", REDIS_SCENARIOS,
                         ids=[f"seed{s.seed}" for s in REDIS_SCENARIOS])
def test_redis_streams_exactly_once_under_sigkill(tmp_path: Any, redis_server: RedisServer,
                                                  schedule: ChaosSchedule) -> None:
    url = redis_server.url
    _fill_input(url)
    b = TopologyBuilder("redis-chaos")
    b.set_spout("in", PacedRedisStreamSpout(url, ["in-0", "in-1"],
                                            fields=("key", "seq", "value"), batch=20,
                                            bounded=True), parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("in", ["key"])
    staged_log = str(tmp_path / "staged.jsonl")
    b.set_bolt("out", StagedRecordingRedisSink(staged_log, url, "out"),
               parallelism=2).fields_grouping("sum", ["key"])
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=100,
                    worker_timeout_ms=5000)
    status, kills, _ = run_with_chaos(b.build(), config, schedule, timeout=180,
                                      home=str(tmp_path / "home"))
    _assert_killed(kills, status)
    rows = read_json_stream(url, "out")
    with redis.Redis.from_url(url, decode_responses=True) as client:
        leftovers = list(client.scan_iter("jstorm:2pc:*:txn:*"))
    _check(rows)
    assert leftovers == [], "staged transactions left behind"
    if any(k.point == "sink_before_commit" for k in schedule.kills):
        assert _left_behind(staged_log), f"no staged transaction left behind: {kills}"


def test_redis_down_aborts_checkpoints_not_the_job(tmp_path: Any,
                                                  redis_server: RedisServer) -> None:
    url = redis_server.url
    b = TopologyBuilder("redis-outage")  # ~5 s of input: the outage starts before its end
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=1500),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", RedisStreamSink(url, "out"), parallelism=2).fields_grouping("sum", ["key"])

    def out_len() -> int:
        try:
            with redis.Redis.from_url(url) as client:
                return int(client.xlen("out"))
        except redis.ConnectionError:
            return 0

    with LocalCluster(home=str(tmp_path / "home")) as cluster:
        handle = cluster.submit(b.build(), _config())
        wait_for(lambda: out_len() > 0, 60, "first committed entries")
        redis_server.stop()
        wait_for(lambda: any(c["status"] == "failed" for c in handle.status()["checkpoints"]),
                 60, "a checkpoint given up while the server is down")
        redis_server.start()
        status = handle.wait(timeout=180)
    assert status["state"] == "drained", status
    assert status["restarts"] == 0, status["recoveries"]
    _check(read_json_stream(url, "out"))


# ------------------------------------------------- a fresh run after an earlier run

def _clean_start(status: dict[str, Any]) -> None:
    """The run drained without a single recovery and without a fencing error."""
    assert status["state"] == "drained", status
    fenced = [e for e in status.get("errors", []) if "fenced" in str(e).lower()]
    assert not fenced, f"a fresh run was fenced by an earlier run's fence rows: {fenced}"
    assert status["restarts"] == 0, status["recoveries"]


# the first run goes through a recovery: its sink tasks' fence rows hold generation 2
EARLIER_RUN = ChaosSchedule(61, (Kill("point", point="after_snapshot", checkpoint=2),))


def test_postgres_fresh_run_after_an_earlier_run_is_not_fenced(tmp_path: Any,
                                                               pg_dsn: str) -> None:
    """Issue 23, hole 3 (fence rows): a fresh run of the same topology name (into another
    table) starts at generation 1 again; the earlier run's fence rows must not fence it."""
    _pg_table(pg_dsn)
    home = str(tmp_path / "home")
    status, kills, _ = run_with_chaos(_pg_topology(pg_dsn, "pg-rerun"), _config(),
                                      EARLIER_RUN, timeout=180, home=home)
    _assert_killed(kills, status)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE totals RENAME TO totals_first_run")
    _pg_table(pg_dsn)
    status, _, _ = run_with_chaos(_pg_topology(pg_dsn, "pg-rerun"), _config(),
                                  ChaosSchedule(seed=0), timeout=180, home=home)
    _clean_start(status)
    _check(_pg_rows(pg_dsn))
    assert _pg_prepared(pg_dsn) == []


def test_redis_fresh_run_after_an_earlier_run_is_not_fenced(tmp_path: Any,
                                                            redis_server: RedisServer) -> None:
    """Issue 23, hole 3 (fence keys): the same for RedisStreamSink's fence keys."""
    url = redis_server.url
    home = str(tmp_path / "home")

    def topology(out: str) -> Any:
        b = TopologyBuilder("redis-rerun")
        b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=3000),
                    parallelism=2)
        b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
        b.set_bolt("out", RedisStreamSink(url, out), parallelism=2).fields_grouping(
            "sum", ["key"])
        return b.build()

    status, kills, _ = run_with_chaos(topology("out-1"), _config(), EARLIER_RUN,
                                      timeout=180, home=home)
    _assert_killed(kills, status)
    status, _, _ = run_with_chaos(topology("out-2"), _config(), ChaosSchedule(seed=0),
                                  timeout=180, home=home)
    _clean_start(status)
    _check(read_json_stream(url, "out-2"))
