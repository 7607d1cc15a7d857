"""Real servers for the connector tests: PostgreSQL and Redis, each on a free port, and
librdkafka's mock Kafka cluster (or a real one from ``JSTORM_KAFKA_BOOTSTRAP``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from jstormpy.testing.servers.postgres import PostgresServer, find_pg_bindir
from jstormpy.testing.servers.redis_server import RedisServer, find_redis_server

_db_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (each test makes its own database)."""
    if find_pg_bindir() is None:
        pytest.skip("Debian's postgresql is not installed (run scripts/setup.sh as root)")
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"t{next(_db_names)}")


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A Redis server (append-only file, fsync always) in a temp dir, on a free port."""
    if find_redis_server() is None:
        pytest.skip("Debian's redis-server is not installed (run scripts/setup.sh as root)")
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    """A mock cluster hosted by this process, or the real one from JSTORM_KAFKA_BOOTSTRAP."""
    real = os.environ.get("JSTORM_KAFKA_BOOTSTRAP")
    if real:
        yield real
        return
    pytest.importorskip("confluent_kafka")
    from jstormpy.connectors.kafka import kafka_bootstrap_of_mock

    handle, servers = kafka_bootstrap_of_mock(1)
    yield servers
    del handle
