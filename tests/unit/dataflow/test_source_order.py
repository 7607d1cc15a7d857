"""run_inline's ``source_order`` (issue 40 item 3): watermarks are the minimum over an
operator's inputs, so what is late depends on which source ran ahead. Round-robin (the
default) joins a payment that a cluster -- where the orders source ran ahead -- drops as
late; a test pins that case with ``source_order``."""

from __future__ import annotations

import pytest

from jstormpy.dataflow import Dataflow
from jstormpy.testing import InlineRunError, TestingSink, TestingSource, run_inline
from jstormpy.window import TumblingWindows

ORDERS = [{"id": f"o{i}", "ts": i * 5_000} for i in range(16)]          # 0 .. 75,000
PAYMENTS = [{"id": f"o{2 * i}", "ts": i * 10_000 + 500} for i in range(7)]  # .. 60,500
LATE = {"id": "o5", "ts": 25_500}  # o5's window [20,000, 30,000) is purged at 49,999


def _flow() -> Dataflow:
    flow = Dataflow("pinned")
    orders = flow.source("orders", TestingSource(ORDERS)).key_by(lambda o: o["id"])
    payments = flow.source("payments", TestingSource([*PAYMENTS, LATE])) \
        .key_by(lambda p: p["id"])
    joined = orders.join(payments, window=TumblingWindows(size_ms=10_000),
                         timestamp=(lambda o: o["ts"], lambda p: p["ts"]),
                         allowed_lateness_ms=20_000)
    joined.map(lambda j: j.key).sink("paid", TestingSink())
    joined.late().sink("late", TestingSink())
    return flow


def test_round_robin_joins_the_payment_that_a_leading_orders_source_makes_late() -> None:
    flow = _flow()
    # in turns, the orders are at 35,000 when the late payment comes: still joined
    assert "o5" in [r["value"] for r in run_inline(flow, sink="paid")]
    assert run_inline(flow, sink="late") == []
    # the orders ran ahead (to 75,000): the watermark is the payments' 60,500, late
    pinned = run_inline(flow, sink="paid", source_order=["orders", "payments"])
    assert "o5" not in [r["value"] for r in pinned]
    assert sorted(r["value"] for r in pinned) == sorted(f"o{2 * i}" for i in range(7))
    assert run_inline(flow, sink="late", source_order=["orders"]) == [LATE]


def test_source_order_names_sources_of_the_topology() -> None:
    with pytest.raises(InlineRunError, match=r"source_order=\['order'\].*'orders', 'payments'"):
        run_inline(_flow(), sink="paid", source_order=["order"])
