"""A restarted KafkaSink's read of its commit log with the default ``read_committed``
consumer, against a consumer that behaves as a real broker's does: it returns nothing past
the partition's last stable offset (the first offset of the oldest transaction still open)
until that transaction ends. librdkafka's mock cluster does not hold a ``read_committed``
consumer back (docs/kafka.md), so this is the only place the hold shows outside a real
cluster; the simulator found the hole (docs/simulation.md)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from jstormpy.api.errors import SinkError
from jstormpy.connectors.kafka import read_commit_log

pytest.importorskip("confluent_kafka")


@dataclass
class Record:
    offset: int
    key: str
    value: str
    txn: str  # "committed", "aborted" or "open"

    def key_bytes(self) -> bytes:
        return self.key.encode()


@dataclass
class BrokerLog:
    """One partition of the commit log: records and transaction markers at their offsets."""
    records: list[Record]
    high: int
    open_ends_after: int | None  # the open transaction aborts after this many empty fetches
    empty_fetches: int = 0
    fetched: int = 0  # the consumer's position

    def stable(self) -> int:
        return min((r.offset for r in self.records if r.txn == "open"), default=self.high)


class ReadCommittedConsumer:
    """The calls ``read_commit_log`` makes, answered as a real broker answers a
    ``read_committed`` consumer: nothing at or past the last stable offset; aborted
    records skipped; the position steps over markers up to the last stable offset; the end
    offset it is told is the last stable offset (a ``read_uncommitted`` one's: the high
    watermark)."""

    def __call__(self, conf: dict[str, Any]) -> ReadCommittedConsumer:
        return ReadCommittedConsumer(self.log, conf["isolation.level"])

    def __init__(self, log: BrokerLog, isolation: str = "read_committed") -> None:
        self.log, self.isolation = log, isolation

    def list_topics(self, topic: str, timeout: float) -> Any:
        meta = SimpleNamespace(partitions={0: None}, error=None)
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, tp: Any, timeout: float,
                              cached: bool = False) -> tuple[int, int]:
        # as a broker answers ListOffsets: a read_committed client's end is the last
        # stable offset, a read_uncommitted client's the high watermark
        return 0, (self.log.stable() if self.isolation == "read_committed" else self.log.high)

    def assign(self, tps: list[Any]) -> None:
        self.log.fetched = tps[0].offset

    def consume(self, n: int, timeout: float) -> list[Any]:
        stable = self.log.stable()
        out = [SimpleNamespace(error=lambda: None, key=r.key_bytes, value=r.value.encode,
                               offset=lambda r=r: r.offset)
               for r in self.log.records
               if self.log.fetched <= r.offset < stable and r.txn == "committed"]
        assert self.isolation == "read_committed", "the entries are read committed only"
        if self.log.fetched < stable:
            self.log.fetched = stable
            if out:
                return out
        self.log.empty_fetches += 1
        ends = self.log.open_ends_after
        if ends is not None and self.log.empty_fetches >= ends:
            for r in self.log.records:
                if r.txn == "open":
                    r.txn = "aborted"  # the other task's new producer fenced it
        return []

    def position(self, tps: list[Any]) -> list[Any]:
        return [SimpleNamespace(offset=self.log.fetched)]

    def close(self) -> None:
        pass


def log_with_an_open_transaction_before_my_entry(open_ends_after: int | None) -> BrokerLog:
    # offsets: 0 my entry for checkpoint 1, 1 its COMMIT marker; 2 the other task's entry
    # for checkpoint 2, pre-committed and still open; 3 my entry for checkpoint 2, 4 its
    # COMMIT marker; high watermark 5
    return BrokerLog(records=[Record(0, "task-1", "1", "committed"),
                              Record(2, "task-2", "2", "open"),
                              Record(3, "task-1", "2", "committed")],
                     high=5, open_ends_after=open_ends_after)


def test_the_read_waits_out_another_tasks_open_transaction_and_finds_the_entry_after_it() -> None:
    # the entry for 2 is committed but lies past the other task's open transaction: a read
    # that stopped at the last stable offset said "2 not committed", and the restarted sink
    # re-sent transaction 2's records: a duplicate (the simulator's seeds 0, 27, 92, ...)
    log = log_with_an_open_transaction_before_my_entry(open_ends_after=3)
    ids = read_commit_log("broker:9092", "out.jstorm-commits", "task-1",
                          consumer=ReadCommittedConsumer(log), stable_timeout=30)
    assert ids == [1, 2]
    assert log.empty_fetches >= 3  # it waited for the open transaction to end


def test_a_transaction_that_never_ends_is_a_sink_error_naming_the_partition() -> None:
    log = log_with_an_open_transaction_before_my_entry(open_ends_after=None)
    with pytest.raises(SinkError, match=r"partition 0 stays at offset 2 of 5.*still open"):
        read_commit_log("broker:9092", "out.jstorm-commits", "task-1",
                        consumer=ReadCommittedConsumer(log), stable_timeout=0.3)
