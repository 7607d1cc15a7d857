"""Orders from Kafka, per-customer totals per 10-second window into PostgreSQL, exactly once.

    KAFKA_BOOTSTRAP=broker:9092 PG_DSN=postgresql://user@host/db \\
        jstorm run examples/kafka_to_postgres.py

Pipeline: ``KafkaSpout`` over the topic ``orders`` (records ``{"customer": ..., "amount":
cents, "ts": epoch_ms}`` as JSON; partitions are splits, offsets live in the checkpoint,
watermarks come from the record timestamps) → ``ParseOrder`` → ``WindowTotals`` (tumbling
10 s event-time windows keyed by customer) → ``ToRow`` → ``PostgresSink`` in two-phase-commit
mode into ``order_totals(customer, window_start, total)``: each checkpoint's rows are a
``PREPARE TRANSACTION`` at the barrier and a ``COMMIT PREPARED`` when the checkpoint
completes, so a crash anywhere neither loses nor duplicates a window total.

The table must exist::

    CREATE TABLE order_totals (customer text, window_start bigint, total bigint,
                               PRIMARY KEY (customer, window_start));

(with ``mode="upsert", key=["customer", "window_start"]`` instead of ``"2pc"``, the primary
key alone makes replays idempotent; the server then needs no ``max_prepared_transactions``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from jstormpy import Bolt, Config, TopologyBuilder
from jstormpy.connectors import KafkaSpout
from jstormpy.window import TumblingWindows, WindowedBolt

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
DSN = os.environ.get("PG_DSN", "postgresql://127.0.0.1:5432/postgres")
TOPIC = os.environ.get("KAFKA_TOPIC", "orders")
WINDOW_MS = 10_000


class ParseOrder(Bolt):
    """Kafka record value (JSON) → ``(customer, amount, ts)``."""

    outputs = ("customer", "amount", "ts")

    def execute(self, tup: Any) -> None:
        order = json.loads(tup["value"])
        ts = int(order.get("ts", tup["timestamp"]))  # event time: the order's or the record's
        self.emit((str(order["customer"]), int(order["amount"]), ts))


class WindowTotals(WindowedBolt):
    """Sum of ``amount`` per customer per tumbling event-time window."""

    window = TumblingWindows(size_ms=WINDOW_MS)
    time = "event"
    timestamp = "ts"
    key = "customer"

    def create(self) -> int:
        return 0

    def add(self, acc: int, tup: Any) -> int:
        return acc + int(tup["amount"])

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


class ToRow(Bolt):
    """A window firing → ``(customer, window_start, total)``."""

    outputs = ("customer", "window_start", "total")

    def execute(self, tup: Any) -> None:
        self.emit((tup["key"], int(tup["window_start"]), int(tup["result"])))


def build(bootstrap: str = BOOTSTRAP, dsn: str = DSN, topic: str = TOPIC,
          partitions_parallelism: int = 2, bounded: bool = False) -> Any:
    """The topology: Kafka ``topic`` at ``bootstrap`` → windowed totals → PostgreSQL ``dsn``.

    ``bounded=True`` makes a finite job: the spouts finish once the topic is drained, and
    the end of input fires every window still open (what the example's test runs).
    """
    from jstormpy.connectors import PostgresSink  # psycopg is imported on first use

    b = TopologyBuilder("kafka-to-postgres")
    b.set_spout("orders", KafkaSpout(topic, bootstrap, idle_timeout_ms=5_000, bounded=bounded),
                parallelism=partitions_parallelism)
    b.set_bolt("parse", ParseOrder, parallelism=2).shuffle_grouping("orders")
    b.set_bolt("window", WindowTotals, parallelism=2).fields_grouping("parse", ["customer"])
    b.set_bolt("row", ToRow, parallelism=2).fields_grouping("window", ["key"])
    b.set_bolt("pg", PostgresSink(dsn, "order_totals", ["customer", "window_start", "total"],
                                  mode="2pc"), parallelism=2).fields_grouping("row", ["customer"])
    return b.build()


topology = build()
config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=1_000)
