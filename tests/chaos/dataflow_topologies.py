"""A windowed join written with the dataflow API, and its plain-Python reference."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from jstormpy import FileSink
from jstormpy.connectors.sources import SequenceSpout
from jstormpy.dataflow import Dataflow
from jstormpy.window import TumblingWindows


def orders_payments(out: Path, keys: int, orders: int, payments: int, rate: float) -> Any:
    """Orders (ts = seq * 10) joined with payments (ts = seq * 20) per key in tumbling
    100 ms windows; the pairs are written as {key, order, payment} (the seqs)."""
    flow = Dataflow("df-chaos-join")
    left = flow.source("orders", SequenceSpout(keys=keys, per_key=orders, rate_per_s=rate,
                                               batch=20), parallelism=2)
    right = flow.source("payments", SequenceSpout(keys=keys, per_key=payments,
                                                  rate_per_s=rate, batch=20), parallelism=2)
    left.key_by(lambda r: r["key"], name="orders-by-key").join(
        right.key_by(lambda r: r["key"], name="payments-by-key"),
        window=TumblingWindows(size_ms=100),
        timestamp=(lambda r: r["seq"] * 10, lambda r: r["seq"] * 20),
        out_of_orderness_ms=300, name="join", parallelism=2,
    ).map(lambda j: {"key": j.key, "order": j.left["seq"], "payment": j.right["seq"]},
          name="pair").sink("pairs", FileSink(out))
    return flow.build()


def orders_payments_reference(keys: int, orders: int, payments: int) -> Counter[tuple]:
    return Counter((f"k{k}", o, p) for k in range(keys) for o in range(orders)
                   for p in range(payments) if o * 10 // 100 == p * 20 // 100)
