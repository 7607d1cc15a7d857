"""The Nexmark queries this bench runs: names, output columns and the shared logic.

Columns are the SELECT columns of Flink's Nexmark SQL (the nexmark/nexmark repository's
``queries/qN.sql``); q4's are its sink table's (``id`` is the category, ``final`` the
average closing price, a BIGINT average as Flink's ``AVG`` of BIGINT gives it).

Everything here is plain Python with no engine import: Bytewax's and PyFlink's scripts,
which run in their own interpreters, import it too, so every engine computes with the
same functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

WINDOW_MS = 10_000        # q7, q8 tumbling; q5 window size; q11 session gap; q12 tumbling
SLIDE_MS = 2_000          # q5 slide
Q1_RATE = 0.908           # dollars to euros
Q2_MODULO = 123
Q3_CATEGORY = 10
Q3_STATES = ("OR", "ID", "CA")
Q7_PARTITIONS = 16        # q7's first stage pre-aggregates per (window, auction % 16)


@dataclass(frozen=True)
class Query:
    """One query: its name, what it computes and its output columns."""

    name: str
    title: str
    columns: tuple[str, ...]
    inputs: tuple[str, ...]          # event types it reads
    updating: bool = False           # output is a changelog: the last row per key counts
    processing_time: bool = False    # not comparable record for record


QUERIES: dict[str, Query] = {q.name: q for q in (
    Query("q0", "pass-through", ("auction", "bidder", "price", "dateTime", "extra"), ("bid",)),
    Query("q1", "currency conversion", ("auction", "bidder", "price", "dateTime", "extra"),
          ("bid",)),
    Query("q2", "selection", ("auction", "price"), ("bid",)),
    Query("q3", "local item suggestion", ("name", "city", "state", "id"),
          ("person", "auction")),
    Query("q4", "average closing price per category", ("id", "final"), ("auction", "bid"),
          updating=True),
    Query("q5", "hot items", ("auction", "num"), ("bid",)),
    Query("q7", "highest bid", ("auction", "price", "bidder", "dateTime", "extra"), ("bid",)),
    Query("q8", "new users", ("id", "name", "starttime"), ("person", "auction")),
    Query("q11", "user sessions", ("bidder", "bid_count", "starttime", "endtime"), ("bid",)),
    Query("q12", "processing-time windows", ("bidder", "bid_count", "starttime", "endtime"),
          ("bid",), processing_time=True),
)}


def tumble_start(ts: int, size: int = WINDOW_MS) -> int:
    """The start of the tumbling window (aligned to epoch 0) holding ``ts``."""
    return ts - ts % size


# -- row builders (one per stateless query) -----------------------------------------------

def q0_row(bid: dict[str, Any]) -> dict[str, Any]:
    """q0: the bid's columns."""
    return {"auction": bid["auction"], "bidder": bid["bidder"], "price": bid["price"],
            "dateTime": bid["dateTime"], "extra": bid["extra"]}


def q1_row(bid: dict[str, Any]) -> dict[str, Any]:
    """q1: the bid with its price in euros."""
    return {"auction": bid["auction"], "bidder": bid["bidder"],
            "price": Q1_RATE * bid["price"], "dateTime": bid["dateTime"],
            "extra": bid["extra"]}


def q2_keep(bid: dict[str, Any]) -> bool:
    """q2's predicate."""
    return bool(bid["auction"] % Q2_MODULO == 0)


def q2_row(bid: dict[str, Any]) -> dict[str, Any]:
    """q2: auction and price."""
    return {"auction": bid["auction"], "price": bid["price"]}


def q3_person(p: dict[str, Any]) -> bool:
    """q3's person predicate."""
    return p["state"] in Q3_STATES


def q3_auction(a: dict[str, Any]) -> bool:
    """q3's auction predicate."""
    return bool(a["category"] == Q3_CATEGORY)


def q3_row(person: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any]:
    """q3: the seller's name, city and state, and the auction's id."""
    return {"name": person["name"], "city": person["city"], "state": person["state"],
            "id": auction["id"]}


# -- keyed state machines (the same step function on every engine) ------------------------

def q3_step(state: Any, event: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """q3's incremental join, keyed by person id (auction: seller).

    State ``(person or None, [auctions waiting for their seller])``. Returns the new
    state and the rows to emit.
    """
    person, waiting = state if state is not None else (None, [])
    if event["type"] == "person":
        rows = [q3_row(event, a) for a in waiting]
        return (event, []), rows
    if person is not None:
        return state, [q3_row(person, event)]
    return (None, [*waiting, event]), []


def q4_auction_step(state: Any, event: dict[str, Any]
                    ) -> tuple[Any, list[tuple[int, int, int | None, int]]]:
    """q4's first stage, keyed by auction id: the auction's closing (highest) price.

    State ``(auction or None, max price or None, [bids waiting for their auction])``.
    Emits ``(category, auction id, previous max or None, new max)`` when the max grows:
    the second stage replaces the auction's old maximum by the new one (a retraction).
    """
    auction, best, waiting = state if state is not None else (None, None, [])
    if event["type"] == "auction":
        auction, bids = event, waiting
        waiting = []
    elif auction is None:
        return (None, None, [*waiting, event]), []
    else:
        bids = [event]
    new = best
    for b in bids:
        if auction["dateTime"] <= b["dateTime"] <= auction["expires"] and (
                new is None or b["price"] > new):
            new = b["price"]
    if new == best:
        return (auction, best, waiting), []
    return (auction, new, waiting), [(auction["category"], auction["id"], best, new)]


def q4_category_step(state: Any, change: tuple[int, int, int | None, int]
                     ) -> tuple[Any, dict[str, Any]]:
    """q4's second stage, keyed by category: ``(sum of maxima, auctions)`` -> the average."""
    total, count = state if state is not None else (0, 0)
    category, _auction, old, new = change
    if old is None:
        total, count = total + new, count + 1
    else:
        total += new - old
    return (total, count), {"id": category, "final": total // count}


def q8_step(state: Any, pair: tuple[dict[str, Any], dict[str, Any]]
            ) -> tuple[Any, dict[str, Any] | None]:
    """q8's GROUP BY after the window join, keyed by person id: emit each person once."""
    if state is not None:
        return state, None
    person, _auction = pair
    return True, {"id": person["id"], "name": person["name"],
                  "starttime": tumble_start(person["dateTime"])}


# -- window aggregates ---------------------------------------------------------------------

def q7_edge(ts: int) -> bool:
    """A bid exactly on a window boundary also competes in the window that ends there
    (q7's ``BETWEEN window_end - 10 s AND window_end`` is inclusive)."""
    return ts % WINDOW_MS == 0


class Q7Max:
    """q7's window aggregate: the highest price and the bids that have it.

    The accumulator is ``(max price or None, [bids at that price], [edge bids])``: edge
    bids are bids at the next window's start, which count only if they equal this
    window's maximum. ``add`` takes an item of :func:`q7_expand`, ``(ts, bid, is_edge)``.
    """

    def create(self) -> tuple[Any, list[Any], list[Any]]:
        return (None, [], [])

    def add(self, acc: tuple[Any, list[Any], list[Any]],
            item: tuple[int, dict[str, Any], bool]) -> tuple[Any, list[Any], list[Any]]:
        best, tops, edges = acc
        _ts, bid, edge = item
        if edge:
            return (best, tops, [*edges, bid])
        price = bid["price"]
        if best is None or price > best:
            return (price, [bid], edges)
        if price == best:
            return (best, [*tops, bid], edges)
        return acc

    def merge(self, a: tuple[Any, list[Any], list[Any]], b: tuple[Any, list[Any], list[Any]]
              ) -> tuple[Any, list[Any], list[Any]]:
        (ba, ta, ea), (bb, tb, eb) = a, b
        if ba is None or (bb is not None and bb > ba):
            return (bb, tb, ea + eb)
        if bb is None or ba > bb:
            return (ba, ta, ea + eb)
        return (ba, ta + tb, ea + eb)

    def result(self, key: Any, window: Any, acc: Any) -> Any:
        return acc


class Q7Merge(Q7Max):
    """q7's second stage: merges the first stage's per-partition accumulators."""

    def add(self, acc: Any, item: Any) -> Any:
        return self.merge(acc, item)


class Collect:
    """A window aggregate that keeps its items in a list (q5's second stage)."""

    def create(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], item: Any) -> list[Any]:
        return [*acc, item]  # never in place: an engine may share accumulators

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return a + b

    def result(self, key: Any, window: Any, acc: list[Any]) -> list[Any]:
        return acc


def q7_rows(acc: tuple[Any, list[Any], list[Any]]) -> list[dict[str, Any]]:
    """q7's rows of one window's merged accumulator."""
    best, tops, edges = acc
    if best is None:
        return []
    return [{"auction": b["auction"], "price": b["price"], "bidder": b["bidder"],
             "dateTime": b["dateTime"], "extra": b["extra"]}
            for b in [*tops, *(e for e in edges if e["price"] == best)]]


def q7_expand(bid: dict[str, Any]) -> list[tuple[int, dict[str, Any], bool]]:
    """A bid's ``(timestamp, bid, is_edge)`` items: an edge bid goes to two windows."""
    ts = bid["dateTime"]
    if q7_edge(ts):  # the edge copy first: the pair stays in timestamp order
        return [(ts - 1, bid, True), (ts, bid, False)]
    return [(ts, bid, False)]


def q5_hot(counts: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """q5's rows of one window: every ``(auction, num)`` whose num is the window's max."""
    if not counts:
        return []
    top = max(n for _a, n in counts)
    return [{"auction": a, "num": n} for a, n in counts if n >= top]


def q11_row(bidder: int, count: int, start: int, end: int) -> dict[str, Any]:
    """q11's row: a bidder's session (end = last bid + gap, as Flink's SESSION_END)."""
    return {"bidder": bidder, "bid_count": count, "starttime": start, "endtime": end}


# -- parsing -------------------------------------------------------------------------------

def parse_event(line: str, types: tuple[str, ...]) -> list[dict[str, Any]]:
    """The event of one line of the events file as ``[event]`` if its type is one of
    ``types``, else ``[]``. The type is read from the line's start (the generator writes
    ``{"type":...`` first), so lines of other types are never decoded."""
    for t in types:
        if line.startswith(t, 9):  # '{"type":"' is 9 characters
            return [json.loads(line)]
    return []
