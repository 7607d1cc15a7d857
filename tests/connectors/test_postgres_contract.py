"""PostgresSink (mode 2pc) passes the sink contract against a real PostgreSQL server."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from jstormpy.connectors import PostgresSink
from tests.connectors.contract import SinkContract

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


class TestPostgresSinkContract(SinkContract):
    @pytest.fixture
    def harness(self, pg_dsn: str) -> PgHarness:
        return PgHarness(pg_dsn)
