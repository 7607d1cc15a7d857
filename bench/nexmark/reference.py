"""Each query's expected output, computed in plain Python from the events file.

Event-time queries are computed on the events in event-time order with every event on
time: the generator's bounded delay and a watermark of that bound make no record late,
so this is what every engine must commit. q4 is an updating query: its expected
output is the final row per category. q12 (processing time) has no record-for-record
expectation; :func:`q12_totals` gives what its windows must add up to.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from bench.nexmark import queries as Q

CHECKED_FIELDS = {
    "person": ("type", "id", "name", "city", "state", "dateTime"),
    "auction": ("type", "id", "dateTime", "expires", "seller", "category"),
    "bid": ("type", "auction", "bidder", "price", "dateTime", "extra"),
}
"""The fields the reference reads: :func:`events_for_checks` keeps only these."""


def events_for_checks(path: str) -> list[dict[str, Any]]:
    """The events file's events with only the fields the reference reads (a million
    events with their auctions' descriptions would take a gigabyte)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                e = json.loads(line)
                out.append({f: e[f] for f in CHECKED_FIELDS[e["type"]]})
    return out


def _bids(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "bid"]


def q0(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [Q.q0_row(b) for b in _bids(events)]


def q1(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [Q.q1_row(b) for b in _bids(events)]


def q2(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [Q.q2_row(b) for b in _bids(events) if Q.q2_keep(b)]


def q3(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    people = {e["id"]: e for e in events if e["type"] == "person" and Q.q3_person(e)}
    return [Q.q3_row(people[a["seller"]], a) for a in events
            if a["type"] == "auction" and Q.q3_auction(a) and a["seller"] in people]


def q4(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    auctions = {e["id"]: e for e in events if e["type"] == "auction"}
    best: dict[int, int] = {}
    for b in _bids(events):
        a = auctions.get(b["auction"])
        if a is not None and a["dateTime"] <= b["dateTime"] <= a["expires"]:
            best[a["id"]] = max(best.get(a["id"], b["price"]), b["price"])
    per_category: dict[int, list[int]] = defaultdict(list)
    for aid, price in best.items():
        per_category[auctions[aid]["category"]].append(price)
    return [{"id": c, "final": sum(p) // len(p)} for c, p in sorted(per_category.items())]


def q5(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: dict[int, Counter[int]] = defaultdict(Counter)  # window start -> auction -> n
    for b in _bids(events):
        ts = b["dateTime"]
        last = ts - ts % Q.SLIDE_MS
        for start in range(last, ts - Q.WINDOW_MS, -Q.SLIDE_MS):
            counts[start][b["auction"]] += 1
    rows: list[dict[str, Any]] = []
    for start in sorted(counts):
        rows.extend(Q.q5_hot(sorted(counts[start].items())))
    return rows


def q7(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    agg = Q.Q7Max()
    windows: dict[int, Any] = {}
    for b in _bids(events):
        for item in Q.q7_expand(b):
            start = Q.tumble_start(item[0])
            windows[start] = agg.add(windows.get(start, agg.create()), item)
    rows: list[dict[str, Any]] = []
    for start in sorted(windows):
        rows.extend(Q.q7_rows(windows[start]))
    return rows


def q8(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sellers = {(a["seller"], Q.tumble_start(a["dateTime"]))
               for a in events if a["type"] == "auction"}
    return [{"id": p["id"], "name": p["name"], "starttime": Q.tumble_start(p["dateTime"])}
            for p in events if p["type"] == "person"
            and (p["id"], Q.tumble_start(p["dateTime"])) in sellers]


def q11(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    per_bidder: dict[int, list[int]] = defaultdict(list)
    for b in _bids(events):
        per_bidder[b["bidder"]].append(b["dateTime"])
    rows = []
    for bidder, times in per_bidder.items():
        times.sort()
        start, last, n = times[0], times[0], 0
        for t in times:
            if t > last + Q.WINDOW_MS:  # a record exactly at the session's end still joins
                rows.append(Q.q11_row(bidder, n, start, last + Q.WINDOW_MS))
                start, n = t, 0
            last, n = t, n + 1
        rows.append(Q.q11_row(bidder, n, start, last + Q.WINDOW_MS))
    return rows


def q12_totals(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What q12's windows must add up to: every bid counted once, per bidder."""
    per_bidder = Counter(b["bidder"] for b in _bids(events))
    return {"bids": sum(per_bidder.values()), "bidders": len(per_bidder),
            "per_bidder": dict(per_bidder)}


EXPECTED = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q7": q7, "q8": q8,
            "q11": q11}


def expected(query: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The expected rows of an event-time query (q4: the final row per category)."""
    return EXPECTED[query](events)
