"""Compare a query's committed output with the reference.

Rows are compared as multisets of their SELECT columns (floats to 6 significant
digits, as a DECIMAL and a float product of the same price agree). q4 is updating: the
last row committed per category must equal the reference's final row. q12 is
processing time: its windows must count every bid exactly once, per bidder.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.nexmark import queries as Q
from bench.nexmark import reference


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: ``ok``, the row counts and what differs."""

    ok: bool
    rows: int
    expected_rows: int
    detail: str = ""


def read_output(directory: str) -> list[dict[str, Any]]:
    """Every committed row in ``directory``.

    A jstormpy ``FileSink`` directory is read with ``read_committed`` (in commit order);
    any other engine's is every file under it (in natural path order, so that a
    subtask's rolled part files ``...-0-2``, ``...-0-10`` are read in the order written;
    lines in order), skipping hidden and in-progress files (names starting with ``.`` or
    ``_``).
    """
    from jstormpy.connectors.file_parts import committed_files, read_committed

    if committed_files(directory):
        return read_committed(directory)
    rows: list[dict[str, Any]] = []
    paths = glob.glob(os.path.join(directory, "**", "*"), recursive=True)
    for path in sorted(paths, key=_natural):
        rel = os.path.relpath(path, directory)
        if os.path.isdir(path) or any(p.startswith((".", "_")) for p in rel.split(os.sep)):
            continue
        with open(path, encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh if line.strip())
    return rows


def _natural(path: str) -> list[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", path)]


def _norm(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


def _key(row: dict[str, Any], columns: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(_norm(row.get(c)) for c in columns)


def compare(query: str, events: list[dict[str, Any]], rows: list[dict[str, Any]]
            ) -> Verdict:
    """Check ``rows`` (an engine's committed output) against the reference."""
    q = Q.QUERIES[query]
    if q.processing_time:
        return _check_q12(events, rows)
    missing_columns = sorted({c for r in rows for c in q.columns if c not in r})
    if missing_columns:
        return Verdict(False, len(rows), -1, f"rows lack columns {missing_columns}")
    want = reference.expected(query, events)
    if q.updating:
        last: dict[Any, dict[str, Any]] = {}
        for r in rows:
            last[r[q.columns[0]]] = r
        got_rows = list(last.values())
    else:
        got_rows = rows
    got = Counter(_key(r, q.columns) for r in got_rows)
    exp = Counter(_key(r, q.columns) for r in want)
    if got == exp:
        return Verdict(True, len(rows), len(want))
    extra, lacking = got - exp, exp - got
    detail = (f"{sum(extra.values())} unexpected row(s), e.g. {list(extra)[:2]}; "
              f"{sum(lacking.values())} missing row(s), e.g. {list(lacking)[:2]}")
    return Verdict(False, len(rows), len(want), detail)


def _check_q12(events: list[dict[str, Any]], rows: list[dict[str, Any]]) -> Verdict:
    totals = reference.q12_totals(events)
    per_bidder: Counter[int] = Counter()
    windows = set()
    for r in rows:
        per_bidder[r["bidder"]] += r["bid_count"]
        windows.add((r["starttime"], r["endtime"]))
        if r["endtime"] - r["starttime"] != Q.WINDOW_MS or r["starttime"] % Q.WINDOW_MS:
            return Verdict(False, len(rows), -1, f"not a 10 s tumbling window: {r}")
    dup = len(rows) - len({(r["bidder"], r["starttime"]) for r in rows})
    ok = dict(per_bidder) == totals["per_bidder"] and dup == 0
    detail = (f"{len(windows)} window(s), {len(rows)} (bidder, window) rows, "
              f"{sum(per_bidder.values())} of {totals['bids']} bids counted"
              + (f", {dup} duplicate row(s)" if dup else ""))
    return Verdict(ok, len(rows), -1, detail)
