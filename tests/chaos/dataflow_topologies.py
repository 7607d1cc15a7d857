"""A windowed join written with the dataflow API, and its plain-Python reference."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from jstormpy import FileSink
from jstormpy.connectors.sources import SequenceSpout
from jstormpy.dataflow import Dataflow
from jstormpy.window import SessionWindows, TumblingWindows

ORDERS_LAG = 1_500
"""``orders_payments``' out-of-orderness: a join input channel may carry both spout tasks'
records (see :data:`LAG`); at 500 records/s per task, orders advance 5 s of event time per
second, so 1.5 s covers one spout task running 300 ms ahead of the other (300 ms covered
60 ms, which a loaded CI machine exceeds: records dropped as late, a flaky test)."""


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
        out_of_orderness_ms=ORDERS_LAG, name="join", parallelism=2,
    ).map(lambda j: {"key": j.key, "order": j.left["seq"], "payment": j.right["seq"]},
          name="pair").sink("pairs", FileSink(out))
    return flow.build()


def orders_payments_reference(keys: int, orders: int, payments: int) -> Counter[tuple]:
    return Counter((f"k{k}", o, p) for k in range(keys) for o in range(orders)
                   for p in range(payments) if o * 10 // 100 == p * 20 // 100)


SESSION_GAP = 30
LAG = 3_000
"""``views_clicks``' out-of-orderness: each key's records are in order, but a join input
channel may carry both spout tasks' records (local_or_shuffle falls back to shuffle when
a spout task and its key_by task run in different workers), out of order by as much as
one spout is ahead of the other: at 200 records/s per task, 3 s of event time is about
1 s of wall-clock time, which covers a worker's restart."""


def click_ts(seq: int) -> int:
    """The event time of click ``seq`` in :func:`views_clicks`."""
    return (seq - 20) * 40 + 20


def views_clicks(out: Path, keys: int, views: int, clicks: int, rate: float) -> Any:
    """Views (ts = seq * 40) and clicks (ts = (seq - 20) * 40 + 20, none for
    seq % 5 == 4) joined per key in session windows of gap 30 ms, ``how="outer"``: two
    views are 40 ms apart, so only a click between them joins them into one session. The
    first clicks come before any view and the last views after every click: both sides
    have unmatched records."""
    flow = Dataflow("df-chaos-session-join")
    left = flow.source("views", SequenceSpout(keys=keys, per_key=views, rate_per_s=rate,
                                              batch=20), parallelism=2)
    right = flow.source("clicks", SequenceSpout(keys=keys, per_key=clicks, rate_per_s=rate,
                                                batch=20), parallelism=2) \
        .filter(lambda r: r["seq"] % 5 != 4, name="some-clicks")
    left.key_by(lambda r: r["key"], name="views-by-key").join(
        right.key_by(lambda r: r["key"], name="clicks-by-key"),
        window=SessionWindows(gap_ms=SESSION_GAP),
        timestamp=(lambda r: r["seq"] * 40, lambda r: click_ts(r["seq"])),
        out_of_orderness_ms=LAG, how="outer", name="session-join", parallelism=2,
    ).map(lambda j: {"key": j.key, "view": j.left and j.left["seq"],
                     "click": j.right and j.right["seq"]}, name="pair") \
        .sink("pairs", FileSink(out))
    return flow.build()


def views_clicks_reference(keys: int, views: int, clicks: int) -> Counter[tuple]:
    """Per key: sessions over both sides (a record at most 30 ms after the newest one
    extends the session), every view-click pair in one, unmatched ones with None."""
    out: Counter[tuple] = Counter()
    for k in range(keys):
        key = f"k{k}"
        recs = sorted([(v * 40, "view", v) for v in range(views)]
                      + [(click_ts(c), "click", c) for c in range(clicks) if c % 5 != 4])
        sessions: list[list[tuple[str, int]]] = []
        end = None
        for ts, side, seq in recs:
            if end is None or ts > end:
                sessions.append([])
            sessions[-1].append((side, seq))
            end = ts + SESSION_GAP if end is None else max(end, ts + SESSION_GAP)
        for session in sessions:
            vs = [s for side, s in session if side == "view"]
            cs = [s for side, s in session if side == "click"]
            out.update((key, v, c) for v in vs for c in cs)
            if not cs:
                out.update((key, v, None) for v in vs)
            if not vs:
                out.update((key, None, c) for c in cs)
    return out
