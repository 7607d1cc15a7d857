"""The Nexmark queries on Bytewax 0.21 (run by ``engine_bytewax.py``, in Bytewax's venv).

``python -m bytewax.run bench.nexmark.bytewax_flows:flow`` builds the query named by
``NEXMARK_QUERY`` over ``NEXMARK_EVENTS`` and writes its rows, one JSON line each, to
``NEXMARK_OUT/part-p<process>-w<worker>.jsonl``. The same shared functions as every
engine's (``bench.nexmark.queries``) compute the rows.

The source has two partitions (line ``i`` goes to partition ``i % 2``), resumable: its
snapshot is ``(byte offset, line number)``. Event time comes from ``EventClock`` waiting
the generator's delay (``NEXMARK_DELAY_MS``); windows are aligned to epoch 0.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import bytewax.operators as op
import bytewax.operators.windowing as win
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.operators.windowing import (
    EventClock,
    SessionWindower,
    SlidingWindower,
    SystemClock,
    TumblingWindower,
)
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from bench.nexmark import queries as Q

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
QUERY = os.environ.get("NEXMARK_QUERY", "q0")
EVENTS = os.environ.get("NEXMARK_EVENTS", "")
OUT = os.environ.get("NEXMARK_OUT", ".")
DELAY = timedelta(milliseconds=int(os.environ.get("NEXMARK_DELAY_MS", "1000")))
PARTS = int(os.environ.get("NEXMARK_PARTS", "2"))
PROC = os.environ.get("NEXMARK_PROC_ID", "0")
LINES_PER_BATCH = 256


def at(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime (exact)."""
    return EPOCH + timedelta(milliseconds=ms)


def ms_of_window(window_id: int, every_ms: int) -> int:
    """A window's start in epoch ms: windows aligned to epoch 0 are numbered from it."""
    return window_id * every_ms


class _LinesPartition(StatefulSourcePartition):
    def __init__(self, part: int, resume: Any) -> None:
        self.part = part
        self.offset, self.line_no = resume if resume is not None else (0, 0)
        self.fh = open(EVENTS, "rb")  # noqa: SIM115 - closed in close()
        self.fh.seek(self.offset)

    def next_batch(self) -> list[str]:
        out, fh, n, mine = [], self.fh, PARTS, self.part
        line_no = self.line_no
        for _ in range(LINES_PER_BATCH * n):
            raw = fh.readline()
            if not raw:
                self.offset, self.line_no = fh.tell(), line_no
                if out:
                    return out
                raise StopIteration
            if line_no % n == mine:
                out.append(raw.decode())
            line_no += 1
        self.offset, self.line_no = fh.tell(), line_no
        return out

    def snapshot(self) -> tuple[int, int]:
        return (self.offset, self.line_no)

    def close(self) -> None:
        self.fh.close()


class EventLines(FixedPartitionedSource):
    """The events file's lines in ``NEXMARK_PARTS`` interleaved partitions."""

    def list_parts(self) -> list[str]:
        return [str(i) for i in range(PARTS)]

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> _LinesPartition:
        return _LinesPartition(int(for_part), resume_state)


class _RowsPartition(StatelessSinkPartition):
    def __init__(self, worker: int) -> None:
        self.fh = open(os.path.join(OUT, f"part-p{PROC}-w{worker}.jsonl"), "w",  # noqa: SIM115
                       encoding="utf-8")

    def write_batch(self, items: list[Any]) -> None:
        self.fh.write("".join(json.dumps(r) + "\n" for r in items))

    def close(self) -> None:
        self.fh.close()


class RowsSink(DynamicSink):
    """One JSON-lines file per worker (Bytewax's sinks are not transactional)."""

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _RowsPartition:
        return _RowsPartition(worker_index)


def _replay_now() -> datetime:
    return EPOCH


def _no_wake_up(_close: datetime) -> None:
    return None


def _event_clock(ts: Any, wait: timedelta = DELAY) -> EventClock:
    """Event time on a replayed file: the watermark follows the events only.

    EventClock's watermark also advances with the system clock between events (for live
    sources); replaying a file at full speed, that would close windows whose records
    are still on their way, so the clock's "now" is held still. And by default the
    runtime wakes up at a window's close time taken as system time: the file's times are
    in the past, so it would wake up at once, again and again, for every open window
    (q5 on 200,000 events ran for more than 14 minutes). ``to_system_utc`` returning None
    leaves closing to new items and the end of the input, as Bytewax's docs say.
    """
    return EventClock(ts, wait_for_system_duration=wait, now_getter=_replay_now,
                      to_system_utc=_no_wake_up)


def _ts(e: dict[str, Any]) -> datetime:
    return at(e["dateTime"])


def _values(stream: Any, name: str) -> Any:
    """A window's ``(key, (window_id, value))`` items as ``(window_id, value)``."""
    return op.map(name, stream, lambda kv: kv[1])


def _session_fold(acc: Any, bid: dict[str, Any]) -> Any:
    n, first, last = acc
    t = bid["dateTime"]
    return (n + 1, t if first is None else min(first, t), t if last is None else max(last, t))


def _session_merge(a: Any, b: Any) -> Any:
    return (a[0] + b[0], min(a[1], b[1]), max(a[2], b[2]))


def build(query: str) -> Dataflow:  # noqa: PLR0915 - one branch per query
    """The Bytewax dataflow of one query."""
    flow = Dataflow(f"nexmark_{query}")
    types = Q.QUERIES[query].inputs
    lines = op.input("events", flow, EventLines())
    ev = op.flat_map("parse", lines, lambda line: Q.parse_event(line, types))
    if query == "q0":
        rows = op.map("q0", ev, Q.q0_row)
    elif query == "q1":
        rows = op.map("q1", ev, Q.q1_row)
    elif query == "q2":
        rows = op.map("q2_row", op.filter("q2", ev, Q.q2_keep), Q.q2_row)
    elif query == "q3":
        kept = op.filter("q3_filter", ev, lambda e: Q.q3_person(e) if e["type"] == "person"
                         else Q.q3_auction(e))
        keyed = op.key_on("q3_key", kept, lambda e: str(e["id"] if e["type"] == "person"
                                                        else e["seller"]))
        joined = op.stateful_map("q3_join", keyed, Q.q3_step)
        rows = op.flat_map("q3_rows", joined, lambda kv: kv[1])
    elif query == "q4":
        keyed = op.key_on("q4_key", ev, lambda e: str(e["id"] if e["type"] == "auction"
                                                      else e["auction"]))
        closing = op.stateful_map("q4_closing", keyed, Q.q4_auction_step)
        changes = op.flat_map("q4_changes", closing, lambda kv: kv[1])
        by_cat = op.key_on("q4_cat", changes, lambda c: str(c[0]))
        rows = op.map("q4_rows", op.stateful_map("q4_average", by_cat, Q.q4_category_step),
                      lambda kv: kv[1])
    elif query == "q5":
        counts = win.count_window(
            "q5_count", ev, _event_clock(_ts),
            SlidingWindower(length=timedelta(milliseconds=Q.WINDOW_MS),
                            offset=timedelta(milliseconds=Q.SLIDE_MS), align_to=EPOCH),
            key=lambda b: str(b["auction"]))
        per_window = op.map("q5_per_window", counts.down, lambda kv: (
            str(kv[1][0]), (int(kv[0]), kv[1][1], ms_of_window(kv[1][0], Q.SLIDE_MS))))
        hot = win.collect_window(
            "q5_max", per_window,
            _event_clock(lambda c: at(c[2] + Q.WINDOW_MS - 1)),
            TumblingWindower(length=timedelta(milliseconds=Q.SLIDE_MS), align_to=EPOCH))
        rows = op.flat_map("q5_rows", hot.down,
                           lambda kv: Q.q5_hot([(a, n) for a, n, _s in kv[1][1]]))
    elif query == "q7":
        agg = Q.Q7Max()
        items = op.flat_map("q7_expand", ev, Q.q7_expand)
        keyed = op.key_on("q7_part", items, lambda it: str(it[1]["auction"] % Q.Q7_PARTITIONS))
        tumble = TumblingWindower(length=timedelta(milliseconds=Q.WINDOW_MS), align_to=EPOCH)
        tops = win.fold_window("q7_max", keyed, _event_clock(lambda it: at(it[0])), tumble,
                               agg.create, agg.add, agg.merge)
        per_window = op.key_on("q7_window", _values(tops.down, "q7_tops"),
                               lambda w: str(w[0]))
        merged = win.fold_window(
            "q7_merge", per_window,
            _event_clock(lambda w: at(ms_of_window(w[0], Q.WINDOW_MS))), tumble,
            agg.create, lambda acc, w: agg.merge(acc, w[1]), agg.merge)
        rows = op.flat_map("q7_rows", merged.down, lambda kv: Q.q7_rows(kv[1][1]))
    elif query == "q8":
        people = op.key_on("q8_person", op.filter("q8_p", ev, lambda e: e["type"] == "person"),
                           lambda p: str(p["id"]))
        auctions = op.key_on("q8_seller",
                             op.filter("q8_a", ev, lambda e: e["type"] == "auction"),
                             lambda a: str(a["seller"]))
        joined = win.join_window(
            "q8_join", _event_clock(_ts),
            TumblingWindower(length=timedelta(milliseconds=Q.WINDOW_MS), align_to=EPOCH),
            people, auctions, insert_mode="first", emit_mode="final")
        rows = op.flat_map("q8_rows", joined.down, lambda kv: [
            {"id": p["id"], "name": p["name"], "starttime": ms_of_window(kv[1][0], Q.WINDOW_MS)}
            for p, a in [kv[1][1]] if p is not None and a is not None])
    elif query == "q11":
        keyed = op.key_on("q11_bidder", ev, lambda b: str(b["bidder"]))
        sessions = win.fold_window(
            "q11_count", keyed, _event_clock(_ts),
            SessionWindower(gap=timedelta(milliseconds=Q.WINDOW_MS)),
            lambda: (0, None, None), _session_fold, _session_merge)
        rows = op.map("q11_rows", sessions.down, lambda kv: Q.q11_row(
            int(kv[0]), kv[1][1][0], kv[1][1][1], kv[1][1][2] + Q.WINDOW_MS))
    elif query == "q12":
        counts = win.count_window(
            "q12_count", ev, SystemClock(),
            TumblingWindower(length=timedelta(milliseconds=Q.WINDOW_MS), align_to=EPOCH),
            key=lambda b: str(b["bidder"]))
        rows = op.map("q12_rows", counts.down, lambda kv: Q.q11_row(
            int(kv[0]), kv[1][1], ms_of_window(kv[1][0], Q.WINDOW_MS),
            ms_of_window(kv[1][0], Q.WINDOW_MS) + Q.WINDOW_MS))
    else:
        raise ValueError(f"unknown query {query!r}")
    op.output("out", rows, RowsSink())
    return flow


flow = build(QUERY)
_T_READY = time.time()


def _write_timing() -> None:
    with open(os.path.join(OUT, f".timing-p{PROC}.json"), "w", encoding="utf-8") as fh:
        json.dump({"t_ready": _T_READY, "t_exit": time.time()}, fh)


if "NEXMARK_OUT" in os.environ:  # launched by engine_bytewax.py
    atexit.register(_write_timing)
