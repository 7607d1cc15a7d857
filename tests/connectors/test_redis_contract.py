"""RedisStreamSpout and RedisStreamSink pass the connector contract against a real Redis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import redis

from jstormpy.connectors import RedisStreamSink, RedisStreamSpout
from jstormpy.testing.servers.redis_server import RedisServer, read_json_stream
from tests.connectors.contract import (
    TOPOLOGY,
    SourceContract,
    StagedSinkContract,
)

pytestmark = pytest.mark.slow


class RedisSourceHarness:
    """Three streams; records written with a plain client."""

    def __init__(self, server: RedisServer) -> None:
        self.url = server.url
        self.client = redis.Redis.from_url(server.url, decode_responses=True)
        self.splits = ["orders-0", "orders-1", "orders-2"]

    def produce(self, split: str, records: Sequence[tuple[str, str]],
                timestamp_ms: int | None = None) -> None:
        entry_id = "*" if timestamp_ms is None else f"{timestamp_ms}-*"
        for k, v in records:
            self.client.xadd(split, {"key": k, "value": v}, id=entry_id)

    def make_spout(self, idle_timeout_ms: float | None = None) -> RedisStreamSpout:
        return RedisStreamSpout(self.url, self.splits, fields=("key", "value"), codec="text",
                                idle_timeout_ms=idle_timeout_ms)

    def decode(self, values: Sequence[Any]) -> tuple[str, str, str]:
        key, value, stream = values[0], values[1], values[2]
        return stream, key, value

    def released_offsets(self) -> dict[str, Any] | None:
        return self.client.hgetall(f"jstorm:offsets:{TOPOLOGY}:c")


class RedisSinkHarness:
    """Reads the output stream back with a fresh client."""

    def __init__(self, server: RedisServer) -> None:
        self.url = server.url

    def make_sink(self) -> RedisStreamSink:
        return RedisStreamSink(self.url, "out")

    def committed(self) -> list[dict[str, Any]]:
        return read_json_stream(self.url, "out")

    def staged(self) -> list[str]:
        names = []
        with redis.Redis.from_url(self.url, decode_responses=True) as client:
            for key in client.scan_iter("jstorm:2pc:*:staged"):
                _, _, topology, task, _ = key.split(":")
                names += [f"jstorm-{topology}-{task}-{n}" for n in client.smembers(key)]
        return sorted(names)


class TestRedisStreamSpoutContract(SourceContract):
    @pytest.fixture
    def harness(self, redis_server: RedisServer) -> RedisSourceHarness:
        return RedisSourceHarness(redis_server)


class TestRedisStreamSinkContract(StagedSinkContract):
    @pytest.fixture
    def harness(self, redis_server: RedisServer) -> RedisSinkHarness:
        return RedisSinkHarness(redis_server)

