"""The chaos harness's PostgreSQL check (``metadata_write_error`` writes the stateful job's
output there too): exactly-once rows pass, a re-committed span, a lost row and a prepared
transaction left behind are each reported, on a real PostgreSQL server."""

from __future__ import annotations

import psycopg

from jstormpy import SequenceSpout
from jstormpy.testing.chaos import Verdict
from jstormpy.testing.chaos.topologies import (
    KEYS,
    PER_KEY,
    PG_TABLE,
    check_postgres,
    create_postgres_table,
)


def _rows() -> list[tuple[str, int, int, int, int]]:
    rows = []
    for k in range(KEYS):
        total = 0
        for s in range(PER_KEY):
            total += SequenceSpout.value_of(s)
            rows.append((f"k{k}", s, SequenceSpout.value_of(s), total, s + 1))
    return rows


def _insert(dsn: str, rows: list[tuple[str, int, int, int, int]]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {PG_TABLE} (key, seq, value, sum, count) "
                        "VALUES (%s, %s, %s, %s, %s)", rows)


def test_exactly_once_rows_pass(pg_dsn: str) -> None:
    create_postgres_table(pg_dsn)
    _insert(pg_dsn, _rows())
    assert check_postgres(pg_dsn) == Verdict()


def test_a_recommitted_span_and_a_loss_are_reported(pg_dsn: str) -> None:
    create_postgres_table(pg_dsn)
    rows = _rows()
    span = rows[100:130]                     # k0 seq 100..129 committed twice (hole 2)
    del rows[PER_KEY + 7]                    # k1 seq 7 lost
    _insert(pg_dsn, rows[:130] + span + rows[130:])
    v = check_postgres(pg_dsn)
    assert (v.lost, v.duplicated) == (1, 30)
    assert any("k0" in p for p in v.state_problems), v.state_problems


def test_a_prepared_transaction_left_behind_is_reported(pg_dsn: str) -> None:
    create_postgres_table(pg_dsn)
    _insert(pg_dsn, _rows())
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute(f"INSERT INTO {PG_TABLE} (key, seq, value, sum, count) "
                     "VALUES ('k0', 9999, 0, 0, 0)")
        conn.execute("PREPARE TRANSACTION 'chaos-left-behind'")
    try:
        v = check_postgres(pg_dsn)
        assert (v.lost, v.duplicated) == (0, 0)
        assert any("chaos-left-behind" in p for p in v.state_problems), v.state_problems
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("ROLLBACK PREPARED 'chaos-left-behind'")
