"""Engine-side halves of the connector contract, without a server: SplitOffsets,
transaction names, and the constructors' errors."""

from __future__ import annotations

import pytest

from jstormpy.api.errors import SinkError, SourceError
from jstormpy.connectors import PostgresSink, RedisStreamSink, RedisStreamSpout
from jstormpy.connectors.splits import SplitOffsets, owned_splits
from jstormpy.connectors.twophase import TwoPhaseCommitSink, transaction_name
from tests.connectors.contract import context, wait_for


def test_owned_splits_partition_the_sorted_list() -> None:
    splits = ["s3", "s0", "s2", "s1", "s4"]
    shares = [owned_splits(splits, i, 2) for i in range(2)]
    assert shares == [["s0", "s2", "s4"], ["s1", "s3"]]


def test_offsets_released_only_for_completed_checkpoints() -> None:
    so = SplitOffsets(idle_timeout_ms=None)
    so.assign(["a", "b"], initial=0)
    so.advance("a", 3)
    so.note_checkpoint(1)
    so.advance("b", 7)
    so.note_checkpoint(2)
    assert so.release(1) == {"a": 3, "b": 0}, "checkpoint 2's offsets released with 1"
    assert so.release(1) is None
    assert so.release(5) == {"a": 3, "b": 7}


def test_restore_rewinds_and_keeps_unknown_splits_at_initial() -> None:
    so = SplitOffsets(idle_timeout_ms=None)
    so.restore({"offsets": {"a": 9}})
    so.assign(["a", "b"], initial=0)
    assert so.snapshot() == {"offsets": {"a": 9, "b": 0}}


def test_watermark_ignores_idle_splits_and_waits_for_silent_ones() -> None:
    so = SplitOffsets(idle_timeout_ms=100, max_lag_ms=10)
    so.assign(["a", "b"], initial=0)
    so.advance("a", 1, event_ms=1000)
    assert so.watermark() is None, "a split that never delivered may still deliver old data"

    def b_idle() -> bool:
        so.advance("a", 2, event_ms=1000)
        return so.idle_splits() == frozenset({"b"})

    wait_for(b_idle, 5, "split b to become idle")
    assert so.watermark() == 990
    so.advance("b", 1, event_ms=500)
    assert so.watermark() == 490, "a split that delivers again holds the watermark again"


def test_bad_split_settings_are_refused() -> None:
    with pytest.raises(SourceError, match="idle_timeout_ms"):
        SplitOffsets(idle_timeout_ms=0)
    with pytest.raises(SourceError, match="max_lag_ms"):
        SplitOffsets(max_lag_ms=-1)


def test_transaction_names_are_safe_and_parse_back() -> None:
    assert transaction_name("orders eu'; drop", 3, 17) == "jstorm-orders_eu_drop-3-17"
    sink = TwoPhaseCommitSink()
    sink.prepare({}, context(task_id=3, topology="orders-eu"))
    assert sink.parse_transaction_name(sink.transaction_name(17)) == 17
    assert sink.parse_transaction_name("jstorm-orders_eu-31-17") is None
    assert sink.parse_transaction_name("other") is None


def test_postgres_sink_argument_errors() -> None:
    with pytest.raises(SinkError, match="mode"):
        PostgresSink("", "t", ["a"], mode="exactly")
    with pytest.raises(SinkError, match="columns"):
        PostgresSink("", "t", [])
    with pytest.raises(SinkError, match="key="):
        PostgresSink("", "t", ["a"], mode="upsert")
    with pytest.raises(SinkError, match=r"\['b'\] are not in columns"):
        PostgresSink("", "t", ["a"], mode="upsert", key="b")


def test_redis_argument_errors() -> None:
    with pytest.raises(SinkError, match="codec"):
        RedisStreamSink("redis://x", "s", codec="xml")
    with pytest.raises(SourceError, match="codec"):
        RedisStreamSpout("redis://x", "s", codec="xml")
    with pytest.raises(SourceError, match="at least one stream"):
        RedisStreamSpout("redis://x", [])


def test_unreachable_postgres_is_unavailable_not_fatal() -> None:
    import socket

    from jstormpy.api.component import Tuple
    from jstormpy.api.errors import SinkUnavailableError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = PostgresSink(f"host=127.0.0.1 port={port} dbname=x user=x connect_timeout=2",
                        "t", ["key"])
    sink.prepare({}, context())  # logs a warning, does not raise
    sink.begin(1)
    sink.write(Tuple(("a",), {"key": 0}, "src"))
    with pytest.raises(SinkUnavailableError, match=f"127.0.0.1:{port}/x"):
        sink.pre_commit(1)
    assert sink.buffered() == 1, "the open transaction must survive the failed pre-commit"
