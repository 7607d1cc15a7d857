"""Orders ⋈ payments with the dataflow API's interval join: each order paired with its
payment if it came within 10 s, exactly-once, with a worker SIGKILLed mid-run and the
result verified.

    python examples/orders_payments_join.py                # kill a worker, then verify
    jstorm run examples/orders_payments_join.py --chaos 7  # the same through the CLI

Pipeline (``docs/dataflow.md``): orders spout and payments spout (both replayable, each in
its own event-time order) → ``key_by(order id)`` on both → ``interval_join(payments, 0,
10_000)`` (a payment 0..10 s after its order) → a running paid total per customer
(``key_by(customer).stateful_map``) → transactional file sink. The join's buffered orders
and payments are dropped once the watermark passes them; their number is the
``state_records`` metric (``jstorm metrics``).

``verify`` checks, from the committed files only, that every order paid within 10 s was
joined exactly once (late payments and unpaid orders never are) and that each
customer's running totals step by exactly one payment each.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from jstormpy import Config, FileSink, Spout, read_committed
from jstormpy.dataflow import Dataflow

ORDERS = 8_000                  # one every 40 ms of event time
CUSTOMERS = 25
WITHIN_MS = 10_000


def order(i: int) -> tuple[int, str, int, int]:
    """Order i: id, customer, amount (cents), event time (ms)."""
    return i, f"c{i * 7 % CUSTOMERS:02d}", 100 + i * 37 % 9_000, i * 40


def payment_delay(i: int) -> int | None:
    """How long after order i its payment comes (ms); None: never paid. Every 9th order
    is paid too late (after 10 s) and every 5th not at all."""
    if i % 5 == 0:
        return None
    if i % 9 == 0:
        return WITHIN_MS + 1 + i % 5_000
    return i * 131 % WITHIN_MS


PAYMENTS = sorted((order(i)[3] + d, i) for i in range(ORDERS)
                  if (d := payment_delay(i)) is not None)
"""(payment time, order id), in time order: the payment provider's stream."""
ORDER_ROWS = [order(i) for i in range(ORDERS)]
PAYMENT_ROWS = [(order_id, ts) for ts, order_id in PAYMENTS]


class Steady(Spout):
    """A replayable source of ``rows()`` at a steady pace: its offset is the whole state."""

    def __init__(self, per_call: int = 30) -> None:
        self.offset = 0
        self.per_call = per_call

    def rows(self) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def next_tuple(self) -> None:
        rows = self.rows()
        end = min(self.offset + self.per_call, len(rows))
        for row in rows[self.offset:end]:
            self.emit(row)
        self.offset = end
        if self.offset >= len(rows):
            self.finish()
        time.sleep(0.01)  # a steady stream: a kill lands mid-run

    def snapshot(self) -> int:
        return self.offset

    def restore(self, snap: int) -> None:
        self.offset = snap


class Orders(Steady):
    outputs = ("id", "customer", "amount", "ts")

    def rows(self) -> list[tuple[Any, ...]]:
        return ORDER_ROWS


class Payments(Steady):
    outputs = ("order", "ts")

    def rows(self) -> list[tuple[Any, ...]]:
        return PAYMENT_ROWS


def running_total(total: int | None, pair: Any) -> tuple[int, dict[str, Any]]:
    total = (total or 0) + pair["amount"]
    return total, {**pair, "total": total}


def build(out: Path) -> Any:
    flow = Dataflow("orders-payments")
    orders = flow.source("orders", Orders()).key_by(lambda o: o["id"], name="orders-by-id")
    payments = flow.source("payments", Payments()) \
        .key_by(lambda p: p["order"], name="payments-by-id")
    (orders.interval_join(payments, 0, WITHIN_MS,
                          timestamp=(lambda o: o["ts"], lambda p: p["ts"]),
                          out_of_orderness_ms=500, name="paid", parallelism=2)
           .map(lambda j: {"order": j.key, "customer": j.left["customer"],
                           "amount": j.left["amount"], "paid_after_ms": j.right["ts"]
                           - j.left["ts"]}, name="as-payment")
           .key_by(lambda r: r["customer"], name="by-customer")
           .stateful_map(running_total, name="running-total", parallelism=2)
           .sink("out", FileSink(out)))
    return flow.build()


OUT = Path(tempfile.mkdtemp(prefix="orders-payments-"))
topology = build(OUT)
config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=300)


def verify(handle: Any = None, out: Path = OUT) -> bool:
    """Paid-in-time orders joined once each; running totals step by one payment."""
    rows = read_committed(out)
    want = {i for i in range(ORDERS)
            if (d := payment_delay(i)) is not None and d <= WITHIN_MS}
    count: dict[int, int] = defaultdict(int)
    for r in rows:
        count[r["order"]] += 1
    problems = [f"order {i}: joined {n} times" for i, n in count.items() if n != 1]
    problems += [f"order {i}: paid in time but not joined" for i in sorted(want - set(count))]
    problems += [f"order {i}: joined but not paid in time" for i in sorted(set(count) - want)]
    per_customer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        per_customer[r["customer"]].append(r)
    for customer, recs in per_customer.items():
        prev = 0
        for r in sorted(recs, key=lambda r: r["total"]):
            if r["total"] != prev + r["amount"]:
                problems.append(f"customer {customer}: total {r['total']} after {prev} is "
                                f"not one payment of {r['amount']} more")
            prev = r["total"]
    print(f"verify: {ORDERS} orders, {len(PAYMENTS)} payments, {len(want)} paid within "
          f"{WITHIN_MS} ms, {len(rows)} committed rows read back from {out}; "
          f"{len(problems) or 'no'} problems")
    for p in problems[:10]:
        print("  -", p)
    if not problems:
        print("verify: exactly once: every order paid in time joined once, no late or "
              "missing payment joined, every running total one payment more than the last")
    return not problems


def main() -> int:
    from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

    schedule = ChaosSchedule(7, (Kill("worker", at_s=1.0, worker=1),))
    status, kills, _ = run_with_chaos(topology, config, schedule, timeout=300)
    print(f"drained: generation {status['generation']}, {status['restarts']} recoveries; "
          + "; ".join(kills))
    return 0 if status["state"] == "drained" and verify() else 1


if __name__ == "__main__":
    sys.exit(main())
