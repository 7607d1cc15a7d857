"""run_inline agrees with LocalCluster: the same dataflow, with a TestingSource failure
injected in the cluster run, commits the same records in one process and across worker
processes (issue 26)."""

from __future__ import annotations

import pytest

from jstormpy import LocalCluster
from jstormpy.dataflow import Dataflow
from jstormpy.testing import InlineStats, TestingSink, TestingSource, run_inline
from jstormpy.window import Count, SessionWindows

from .helpers import fast_config

pytestmark = pytest.mark.timeout(180)

ORDERS = [{"order": i, "user": f"u{i % 5}", "ts": i * 10} for i in range(120)]
PAYMENTS = [{"order": i, "amount": i % 7 + 1, "ts": i * 10 + 30} for i in range(0, 120, 3)]


def shop(fail_after: int | None) -> tuple[Dataflow, TestingSink, TestingSink, TestingSource]:
    """Orders ⋈ payments (interval join), a running paid total per user (stateful_map)
    and per-user sessions of orders."""
    flow = Dataflow("inline-vs-cluster")
    source = TestingSource(ORDERS, batch_size=7, fail_after=fail_after)
    orders = flow.source("orders", source, parallelism=2)
    payments = flow.source("payments", TestingSource(PAYMENTS, batch_size=5))

    def running(total, pair):
        total = (total or 0) + pair["amount"]
        return total, {"user": pair["user"], "order": pair["order"], "total": total}

    paid = TestingSink()
    (orders.key_by(lambda o: o["order"], name="orders-by-id")
           .interval_join(payments.key_by(lambda p: p["order"], name="payments-by-id"),
                          0, 50, timestamp=(lambda o: o["ts"], lambda p: p["ts"]),
                          out_of_orderness_ms=100, name="pay-join", parallelism=2)
           .map(lambda j: {"user": j.left["user"], "order": j.key,
                           "amount": j.right["amount"]})
           .key_by(lambda r: r["user"], name="by-user")
           .stateful_map(running, name="running", parallelism=2)
           .sink("paid", paid))
    sessions = TestingSink()
    (orders.key_by(lambda o: o["user"], name="orders-by-user")
           .window(SessionWindows(gap_ms=40), timestamp=lambda o: o["ts"],
                   out_of_orderness_ms=100)
           .aggregate(Count(), name="session-count")
           .sink("sessions", sessions))
    return flow, paid, sessions, source


def canonical(paid: list[dict], sessions: list[dict]) -> tuple[dict, list]:
    """Per user: the paid orders and the final total. The order in which payments reach
    the running total varies from run to run, but each total must be the previous one plus
    that order's amount: a payment counted twice or lost shows here."""
    amount = {p["order"]: p["amount"] for p in PAYMENTS}
    per_user: dict[str, list[dict]] = {}
    for r in paid:
        per_user.setdefault(r["user"], []).append(r)
    out = {}
    for user, recs in per_user.items():
        recs.sort(key=lambda r: r["total"])
        prev = 0
        for r in recs:
            assert r["total"] == prev + amount[r["order"]], (user, recs)
            prev = r["total"]
        out[user] = (sorted(r["order"] for r in recs), prev)
    return out, sorted((r["key"], r["start"], r["end"], r["value"]) for r in sessions)


def test_run_inline_agrees_with_local_cluster():
    flow, paid, sessions, _ = shop(fail_after=None)
    stats = InlineStats()
    run_inline(flow, sink="paid", stats=stats)
    inline = canonical(paid.items(), sessions.items())
    assert stats.crashes == 1 and stats.checkpoints >= 2

    flow, paid, sessions, source = shop(fail_after=30)
    with LocalCluster() as cluster:
        status = cluster.submit(flow.build(), fast_config()).wait(timeout=150)
    assert status["state"] == "drained"
    assert source.failed  # the cluster run went through the injected failure
    clustered = canonical(paid.items(), sessions.items())
    assert clustered == inline

    # and both are right: every 3rd order is paid once; each order is its own session
    # (one user's orders are 50 ms apart, the gap is 40 ms)
    want: dict[str, tuple[list[int], int]] = {}
    for p in PAYMENTS:
        user = ORDERS[p["order"]]["user"]
        orders, total = want.get(user, ([], 0))
        want[user] = (orders + [p["order"]], total + p["amount"])
    assert inline[0] == want
    assert inline[1] == sorted((o["user"], o["ts"], o["ts"] + 40, 1) for o in ORDERS)
