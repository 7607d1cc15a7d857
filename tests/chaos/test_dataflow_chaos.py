"""Exactly-once for a dataflow windowed join under a worker SIGKILL: the committed pairs
equal the reference, each exactly once."""

from __future__ import annotations

from collections import Counter

import pytest
from dataflow_topologies import (
    orders_payments,
    orders_payments_reference,
    views_clicks,
    views_clicks_reference,
)

from jstormpy import Config, read_committed
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

pytestmark = pytest.mark.slow

KEYS, ORDERS, PAYMENTS = 6, 300, 150


@pytest.mark.parametrize("schedule", [
    ChaosSchedule(41, (Kill("worker", at_s=1.0, worker=1),)),
    ChaosSchedule(42, (Kill("point", point="after_snapshot", checkpoint=2, worker=0),)),
], ids=["sigkill-worker-1", "after-snapshot"])
def test_dataflow_window_join_is_exactly_once_under_sigkill(tmp_path, schedule):
    out = tmp_path / "out"
    topo = orders_payments(out, KEYS, ORDERS, PAYMENTS, rate=500)
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000)
    status, kills, _ = run_with_chaos(topo, config, schedule, timeout=150,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))], kills
    assert status["restarts"] >= 1, (kills, status)
    got = Counter((r["key"], r["order"], r["payment"]) for r in read_committed(out))
    want = orders_payments_reference(KEYS, ORDERS, PAYMENTS)
    assert got == want, (f"missing {sum((want - got).values())}, "
                         f"duplicated {sum((got - want).values())}; kills: {kills}")


def test_dataflow_session_join_is_exactly_once_under_sigkill(tmp_path):
    """An outer session-window join, a worker SIGKILLed mid-run: every pair of one
    session, and every unmatched record, committed exactly once."""
    out = tmp_path / "out"
    topo = views_clicks(out, KEYS, 240, 200, rate=200)
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000)
    schedule = ChaosSchedule(43, (Kill("worker", at_s=1.0, worker=1),))
    status, kills, _ = run_with_chaos(topo, config, schedule, timeout=150,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained"
    assert status["restarts"] >= 1, (kills, status)
    got = Counter((r["key"], r["view"], r["click"]) for r in read_committed(out))
    want = views_clicks_reference(KEYS, 240, 200)
    assert sum(1 for _, _, c in want if c is None) and sum(1 for _, v, _ in want if v is None)
    assert got == want, (f"missing {sum((want - got).values())}, "
                         f"duplicated {sum((got - want).values())}; kills: {kills}")
