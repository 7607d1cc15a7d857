"""A join's late side output (issue 40 item 2): records that came after every window (or
interval) they belong to was purged leave on ``.late()``, as a window aggregate's do,
instead of vanishing into a counter."""

from __future__ import annotations

import pytest

from jstormpy.api.errors import TopologyError
from jstormpy.dataflow import Dataflow
from jstormpy.testing import TestingSink, TestingSource, run_inline
from jstormpy.window import TumblingWindows

ORDERS = [{"kind": "order", "id": f"o{i}", "ts": i * 10_000} for i in range(8)]
PAYMENTS = [{"kind": "payment", "id": f"o{i}", "ts": i * 10_000 + 500} for i in range(8)]
LATE = {"kind": "payment", "id": "o0", "ts": 2_500}  # after both sides passed 70,500


def _flow(kind: str) -> tuple[Dataflow, TestingSink, TestingSink]:
    flow = Dataflow(f"late-{kind}")
    # one source: the late payment comes after every record before it on both sides,
    # whatever the interleaving (both sides are filters of it)
    events = flow.source("events", TestingSource([*ORDERS, *PAYMENTS, LATE]))
    orders = events.filter(lambda e: e["kind"] == "order").key_by(lambda e: e["id"])
    payments = events.filter(lambda e: e["kind"] == "payment").key_by(lambda e: e["id"])
    ts = (lambda e: e["ts"], lambda e: e["ts"])
    if kind == "window":
        joined = orders.join(payments, window=TumblingWindows(size_ms=10_000), timestamp=ts)
    else:
        joined = orders.interval_join(payments, 0, 1_000, timestamp=ts)
    out, late = TestingSink(), TestingSink()
    joined.sink("paid", out)
    joined.late().sink("late", late)
    return flow, out, late


@pytest.mark.parametrize("kind", ["window", "interval"])
def test_a_join_sends_its_late_records_to_late(kind: str) -> None:
    flow, _out, _late = _flow(kind)
    late = run_inline(flow, sink="late")
    assert late == [LATE]
    paid = run_inline(flow, sink="paid")
    assert sorted(r["key"] for r in paid) == [f"o{i}" for i in range(8)]


def test_late_of_a_join_is_one_stream_per_join() -> None:
    flow = Dataflow("twice")
    src = flow.source("s", TestingSource(ORDERS))
    left = src.key_by(lambda e: e["id"])
    right = src.map(lambda e: e).key_by(lambda e: e["id"])
    joined = left.join(right, window=TumblingWindows(size_ms=10_000),
                       timestamp=(lambda e: e["ts"], lambda e: e["ts"]), name="join")
    joined.late().sink("a", TestingSink())
    joined.late().sink("b", TestingSink())  # two readers of one late stream
    topo = flow.build()
    assert [(g.source, g.stream) for g in topo.components["a"].inputs] == \
        [(g.source, g.stream) for g in topo.components["b"].inputs] == [("join", "late")]
    with pytest.raises(TopologyError, match="late"):
        left.reduce(lambda a, b: b).late()  # type: ignore[attr-defined]
