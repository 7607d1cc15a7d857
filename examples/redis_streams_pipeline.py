"""Orders from Redis Streams, per-customer running totals back into Redis Streams, exactly
once, with a worker SIGKILLed in the middle and the result verified with a fresh reader.

    python examples/redis_streams_pipeline.py       # starts its own redis-server, fills
                                                    # the input, runs with a kill, verifies
    REDIS_URL=redis://host:6379/0 jstorm run examples/redis_streams_pipeline.py
                                                    # against your server (input must exist)

Pipeline: ``RedisStreamSpout`` over ``orders-0`` / ``orders-1`` (a customer's orders all go
to one stream, so they stay in order; offsets live in the checkpoint) → ``Total`` (managed
state: running total per customer) → ``RedisStreamSink`` into ``order-totals`` (each
checkpoint's entries staged, then appended atomically when the checkpoint completes).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from jstormpy import Bolt, Config, TopologyBuilder
from jstormpy.connectors import RedisStreamSink, RedisStreamSpout

CUSTOMERS = 20
ORDERS_PER_CUSTOMER = 1000
URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def amount(customer: int, n: int) -> int:
    """The deterministic amount (cents) of order ``n`` of ``customer``."""
    return (customer * 31 + n * 17) % 5000 + 100


class Total(Bolt):
    """Running total per customer; emits one total per order."""

    outputs = ("customer", "order", "amount", "total")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.totals = self.state("totals")

    def execute(self, tup: Any) -> None:
        customer = tup["customer"]
        total = self.totals.get(customer, 0) + tup["amount"]
        self.totals[customer] = total
        self.emit((customer, tup["order"], tup["amount"], total))


def build(url: str) -> Any:
    """The topology, reading and writing the server at ``url``."""
    b = TopologyBuilder("redis-orders")
    b.set_spout("orders", RedisStreamSpout(url, ["orders-0", "orders-1"],
                                           fields=("customer", "order", "amount"),
                                           bounded=True), parallelism=2)
    b.set_bolt("total", Total, parallelism=2).fields_grouping("orders", ["customer"])
    b.set_bolt("out", RedisStreamSink(url, "order-totals"),
               parallelism=2).fields_grouping("total", ["customer"])
    return b.build()


topology = build(URL)
config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200)


def fill_input(url: str) -> None:
    """Write every order (JSON values, as RedisStreamSink would) to its customer's stream."""
    from jstormpy.testing.servers.redis_server import append_json

    append_json(url, ((f"orders-{c % 2}", {"customer": f"c{c}", "order": n,
                                           "amount": amount(c, n)})
                      for n in range(ORDERS_PER_CUSTOMER) for c in range(CUSTOMERS)))


def verify(url: str) -> list[str]:
    """Problems found in ``order-totals`` (read with a fresh client); empty = exactly once."""
    from jstormpy.testing.semantics import check_running_totals, check_sequences
    from jstormpy.testing.servers.redis_server import read_json_stream

    rows = read_json_stream(url, "order-totals")
    report = check_sequences(rows, key="customer", seq="order",
                             expected={f"c{c}": ORDERS_PER_CUSTOMER for c in range(CUSTOMERS)})
    problems = [] if report.ok else [report.summary()]
    return problems + check_running_totals(rows, key="customer", seq="order", total="total",
                                           amount_of=lambda c, n: amount(int(c[1:]), n))


def main() -> int:
    """Start a throw-away redis-server, fill it, run with a SIGKILL, verify."""
    from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos
    from jstormpy.testing.servers.redis_server import RedisServer

    with RedisServer() as server:
        fill_input(server.url)
        # a sink dies between pre-commit and commit of checkpoint 1: every run reaches it
        # (even one whose input drains within the first checkpoint interval)
        schedule = ChaosSchedule(7, (Kill("point", point="sink_before_commit", checkpoint=1),))
        status, kills, _ = run_with_chaos(build(server.url), config, schedule, timeout=300)
        print(f"state={status['state']} restarts={status['restarts']}")
        for event in kills:  # e.g. "fault point fired: sink_before_commit@1 (a worker ...)"
            print(f"chaos: {event}")
        problems = verify(server.url)
    print("exactly-once: OK" if not problems else "\n".join(problems))
    return 0 if status["state"] == "drained" and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
