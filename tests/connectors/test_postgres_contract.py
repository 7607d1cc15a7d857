"""PostgresSink (mode 2pc) passes the sink contract against a real PostgreSQL server."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from jstormpy.connectors import PostgresSink
from tests.connectors.contract import (
    StagedSinkContract,
)

pytestmark = pytest.mark.slow

TABLE_DDL = "CREATE TABLE events (id bigserial PRIMARY KEY, key text, seq int, value int)"


class PgHarness:
    """Fresh database with an ``events`` table; reads with new connections."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(TABLE_DDL)

    def make_sink(self) -> PostgresSink:
        return PostgresSink(self.dsn, "events", ["key", "seq", "value"])

    def committed(self) -> list[dict[str, Any]]:
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute("SELECT key, seq, value FROM events ORDER BY id").fetchall()
        return [{"key": k, "seq": s, "value": v} for k, s, v in rows]

    def staged(self) -> list[str]:
        with psycopg.connect(self.dsn) as conn:
            return sorted(g for (g,) in conn.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"))


class TestPostgresSinkContract(StagedSinkContract):
    @pytest.fixture
    def harness(self, pg_dsn: str) -> PgHarness:
        return PgHarness(pg_dsn)


def test_recovery_waits_out_a_zombie_caught_mid_prepare(pg_dsn: str) -> None:
    """A zombie that passed its fence check (holding the fencing row FOR SHARE) and prepares
    only later: recovery cannot raise the token while the row is held, resolves the
    zombie's transaction once it is prepared (uncovered: rolled back), then fences."""
    import threading

    from jstormpy.api.component import Tuple
    from tests.connectors.contract import INDEX, SinkDriver, context, rows_for

    harness = PgHarness(pg_dsn)
    first = SinkDriver(harness, generation=1)  # installs token 1
    first.close()
    zombie = psycopg.connect(pg_dsn)
    zombie.execute("SELECT generation FROM jstorm_sink_fence WHERE topology = 'contract' "
                   "AND task = 1 FOR SHARE")
    zombie.execute("INSERT INTO events (key, seq, value) VALUES ('z', 0, 0)")
    released = threading.Event()

    def prepare_later() -> None:
        released.wait(10)
        zombie.execute("PREPARE TRANSACTION 'jstorm-contract-1-5'")

    t = threading.Thread(target=prepare_later)
    t.start()
    sink = harness.make_sink()
    sink.prepare({}, context(generation=2))
    timer = threading.Timer(1.0, released.set)
    timer.start()
    sink.recover(3)  # blocks on the row, then rolls the zombie's 5 back and fences
    t.join(10)
    zombie.close()
    assert harness.staged() == []
    sink.begin(4)
    for r in rows_for("a", range(2)):
        sink.write(Tuple(r, INDEX, "src"))
    sink.pre_commit(4)
    sink.commit(4)
    assert [r["key"] for r in harness.committed()] == ["a", "a"]
    with psycopg.connect(pg_dsn) as conn:
        token = conn.execute("SELECT generation FROM jstorm_sink_fence").fetchone()
    assert token == (2,)
    sink.cleanup()


def test_a_row_the_table_refuses_is_a_sink_error_and_the_sink_recovers(pg_dsn: str) -> None:
    from jstormpy.api.errors import SinkError, SinkUnavailableError
    from tests.connectors.contract import SinkDriver, rows_for

    harness = PgHarness(pg_dsn)
    d = SinkDriver(harness)
    d.sink.execute(_bad_tuple())
    with pytest.raises(SinkError, match="events") as info:
        d.sink.pre_commit(d.txn)
    assert not isinstance(info.value, SinkUnavailableError)
    assert harness.staged() == []
    d.sink.begin(d.txn)  # what a restarted task does: a fresh transaction
    d.write(rows_for("a", range(2)))
    d.complete(d.barrier())
    assert [r["key"] for r in harness.committed()] == ["a", "a"]
    d.close()


def _bad_tuple() -> Any:
    from jstormpy.api.component import Tuple
    from tests.connectors.contract import INDEX

    return Tuple(("a", "not a number", 1), INDEX, "src")


class UpsertHarness(PgHarness):
    """``latest`` keyed by ``key``: the upsert mode's table."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE latest (key text PRIMARY KEY, seq int, value int)")

    def make_sink(self) -> PostgresSink:
        return PostgresSink(self.dsn, "latest", ["key", "seq", "value"], mode="upsert",
                            key="key")

    def table(self) -> dict[str, tuple[int, int]]:
        with psycopg.connect(self.dsn) as conn:
            return {k: (s, v) for k, s, v in conn.execute("SELECT key, seq, value FROM latest")}


def test_upsert_keeps_the_last_row_of_each_key_across_checkpoints(pg_dsn: str) -> None:
    """Many rows per key in one checkpoint (written as the last per key) and across
    checkpoints: the table holds each key's last row, as row-by-row upserts would."""
    from tests.connectors.contract import SinkDriver, rows_for

    harness = UpsertHarness(pg_dsn)
    d = SinkDriver(harness)
    for start in (0, 500):
        for k in ("a", "b", "c"):  # interleaved keys, 500 rows each per checkpoint
            d.write(rows_for(k, range(start + 1, start + 500, 2)))  # odd seqs, then even:
            d.write(rows_for(k, range(start, start + 500, 2)))  # the last is not the largest
        d.write(rows_for("d", range(start, start + 3)))
        d.barrier()  # upsert mode: written at the barrier
        last = start + 498
        assert harness.table() == {**{k: (last, last * 7 % 13) for k in "abc"},
                                   "d": (start + 2, (start + 2) * 7 % 13)}
    d.close()

