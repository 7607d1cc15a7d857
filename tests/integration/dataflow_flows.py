"""Dataflows shared by the end-to-end and chaos tests, with their plain-Python references."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from examples import wordcount as wc
from jstormpy import FileSink, read_committed
from jstormpy.connectors.sources import SequenceSpout
from jstormpy.dataflow import Dataflow
from jstormpy.window import Count, SessionWindows, Sum, TumblingWindows


def wordcount(out: Path, n_sentences: int) -> Any:
    """Sentences -> words -> running count per word (stateful_map) and reduce."""
    flow = Dataflow("df-wordcount")
    words = flow.source("sentences", wc.Sentences(n_sentences), parallelism=2) \
        .flat_map(lambda r: r["sentence"].split(), name="split", parallelism=2)
    keyed = words.key_by(lambda w: w)

    def count(n: int | None, word: str) -> tuple[int, dict[str, Any]]:
        n = (n or 0) + 1
        return n, {"word": word, "count": n}

    keyed.stateful_map(count, name="count", parallelism=2).sink("counts", FileSink(out / "a"))
    words.map(lambda w: {"word": w, "n": 1}).key_by(lambda r: r["word"]) \
        .reduce(lambda a, b: {"word": a["word"], "n": a["n"] + b["n"]}, name="sum") \
        .filter(lambda kv: kv.value["n"] % 50 == 0) \
        .sink("every-50th", FileSink(out / "b"))
    return flow.build()


def wordcount_reference(n_sentences: int) -> Counter[str]:
    return Counter(w for line in wc.corpus(n_sentences) for w in line.split())


def windowed(out: Path, keys: int, per_key: int) -> Any:
    """Per key, a tumbling 100 ms window over ts = seq * 10: Count() and Sum("value")."""
    flow = Dataflow("df-window")
    keyed = flow.source("events", SequenceSpout(keys=keys, per_key=per_key), parallelism=2) \
        .key_by(lambda r: r["key"])
    win = TumblingWindows(size_ms=100)
    keyed.window(win, timestamp=lambda r: r["seq"] * 10, out_of_orderness_ms=50) \
        .aggregate(Count(), name="count-window").sink("counts", FileSink(out / "count"))
    keyed.window(win, timestamp=lambda r: r["seq"] * 10, out_of_orderness_ms=50) \
        .aggregate(Sum("value"), name="sum-window", parallelism=1) \
        .sink("sums", FileSink(out / "sum"))
    return flow.build()


def windowed_reference(keys: int, per_key: int) -> tuple[list[dict[str, Any]],
                                                         list[dict[str, Any]]]:
    counts: Counter[tuple[str, int]] = Counter()
    sums: Counter[tuple[str, int]] = Counter()
    for k in range(keys):
        for seq in range(per_key):
            start = seq * 10 // 100 * 100
            counts[(f"k{k}", start)] += 1
            sums[(f"k{k}", start)] += SequenceSpout.value_of(seq)

    def rows(c: Counter[tuple[str, int]]) -> list[dict[str, Any]]:
        return sorted(({"key": k, "start": s, "end": s + 100, "value": v, "kind": "on_time"}
                       for (k, s), v in c.items()), key=lambda r: (r["key"], r["start"]))
    return rows(counts), rows(sums)


def window_join(out: Path, keys: int, left_per_key: int, right_per_key: int,
                rate: float | None = None, how: str = "inner") -> Any:
    """Two sequence sources joined per key in tumbling 100 ms windows (left ts = seq * 10,
    right ts = seq * 20)."""
    flow = Dataflow("df-join")
    left = flow.source("left", SequenceSpout(keys=keys, per_key=left_per_key,
                                             rate_per_s=rate, batch=20), parallelism=2)
    right = flow.source("right", SequenceSpout(keys=keys, per_key=right_per_key,
                                               rate_per_s=rate, batch=20))
    left.key_by(lambda r: r["key"], name="by-key-left").join(
        right.key_by(lambda r: r["key"], name="by-key-right"),
        window=TumblingWindows(size_ms=100),
        timestamp=(lambda r: r["seq"] * 10, lambda r: r["seq"] * 20),
        out_of_orderness_ms=200, how=how, name="join", parallelism=2,
    ).map(lambda j: {"key": j.key, "l": None if j.left is None else j.left["seq"],
                     "r": None if j.right is None else j.right["seq"]}) \
        .sink("pairs", FileSink(out))
    return flow.build()


def window_join_reference(keys: int, left_per_key: int, right_per_key: int,
                          how: str = "inner") -> Counter[tuple[str, Any, Any]]:
    pairs: Counter[tuple[str, Any, Any]] = Counter()
    for k in range(keys):
        key = f"k{k}"
        lefts = [(s, s * 10 // 100) for s in range(left_per_key)]
        rights = [(s, s * 20 // 100) for s in range(right_per_key)]
        for ls, lw in lefts:
            matched = [rs for rs, rw in rights if rw == lw]
            for rs in matched:
                pairs[(key, ls, rs)] += 1
            if not matched and how in ("left", "outer"):
                pairs[(key, ls, None)] += 1
        if how == "outer":
            for rs, rw in rights:
                if not any(lw == rw for _, lw in lefts):
                    pairs[(key, None, rs)] += 1
    return pairs


def interval_join(out: Path, keys: int, left_per_key: int, right_per_key: int,
                  lower: int, upper: int, rate: float | None = None) -> Any:
    """Left ts = seq * 10, right ts = seq * 20; pairs with lower <= t_r - t_l <= upper."""
    flow = Dataflow("df-interval")
    left = flow.source("left", SequenceSpout(keys=keys, per_key=left_per_key, batch=20,
                                             rate_per_s=rate), parallelism=2)
    right = flow.source("right", SequenceSpout(keys=keys, per_key=right_per_key, batch=20,
                                               rate_per_s=rate))
    left.key_by(lambda r: r["key"], name="left-by-key").interval_join(
        right.key_by(lambda r: r["key"], name="right-by-key"), lower, upper,
        timestamp=(lambda r: r["seq"] * 10, lambda r: r["seq"] * 20),
        out_of_orderness_ms=200, name="interval",
    ).map(lambda j: {"key": j.key, "l": j.left["seq"], "r": j.right["seq"]}) \
        .sink("pairs", FileSink(out))
    return flow.build()


def interval_join_reference(keys: int, left_per_key: int, right_per_key: int, lower: int,
                            upper: int) -> Counter[tuple[str, int, int]]:
    return Counter((f"k{k}", ls, rs) for k in range(keys) for ls in range(left_per_key)
                   for rs in range(right_per_key) if lower <= rs * 20 - ls * 10 <= upper)


SESSION_RUN, SESSION_GAP = 25, 200
"""``sessions_and_tumbling``: 25 records 10 ms apart per session, sessions 1 s apart."""
SESSION_LAG = 3_000
"""Its out-of-orderness. Each key's records are in order, but a window's input channel
may carry both spout tasks' records (local_or_shuffle falls back to shuffle when a spout
task and its key_by task run in different workers, as after a rescale), out of order by
as much as one spout is ahead of the other: at 400 records/s per task, 3 s of event time
is about 0.6 s of wall-clock time."""


def session_ts(seq: int) -> int:
    """The event time of record ``seq`` of a key in :func:`sessions_and_tumbling`."""
    return seq * 10 + seq // SESSION_RUN * 1000


def sessions_and_tumbling(out: Path, keys: int, per_key: int,
                          rate: float | None = None, windows: int = 2) -> Any:
    """One keyed stream into a session-window count ("sessions") and a tumbling 100 ms
    sum ("tumbling"), both with parallelism ``windows``: what the rescale tests change."""
    flow = Dataflow("df-windows")
    keyed = flow.source("events", SequenceSpout(keys=keys, per_key=per_key, batch=20,
                                                rate_per_s=rate), parallelism=2) \
        .key_by(lambda r: r["key"], name="by-key")
    keyed.window(SessionWindows(gap_ms=SESSION_GAP), timestamp=lambda r: session_ts(r["seq"]),
                 out_of_orderness_ms=SESSION_LAG) \
        .aggregate(Count(), name="sessions", parallelism=windows) \
        .sink("session-counts", FileSink(out / "sessions"))
    keyed.window(TumblingWindows(size_ms=100), timestamp=lambda r: session_ts(r["seq"]),
                 out_of_orderness_ms=SESSION_LAG) \
        .aggregate(Sum("value"), name="tumbling", parallelism=windows) \
        .sink("tumbling-sums", FileSink(out / "tumbling"))
    return flow.build()


def sessions_and_tumbling_reference(keys: int, per_key: int) -> tuple[Counter[tuple],
                                                                      Counter[tuple]]:
    """(key, start, end, value) of every window, each once: session counts, tumbling sums."""
    sessions: Counter[tuple] = Counter()
    sums: Counter[tuple[str, int]] = Counter()
    for k in range(keys):
        key = f"k{k}"
        current: list[int] = []
        for seq in range(per_key):
            ts = session_ts(seq)
            if current and ts > current[-1] + SESSION_GAP:
                sessions[(key, current[0], current[-1] + SESSION_GAP, len(current))] += 1
                current = []
            current.append(ts)
            sums[(key, ts // 100 * 100)] += SequenceSpout.value_of(seq)
        if current:
            sessions[(key, current[0], current[-1] + SESSION_GAP, len(current))] += 1
    tumbling = Counter({(k, s, s + 100, v): 1 for (k, s), v in sums.items()})
    return sessions, tumbling


def window_rows(path: Path) -> Counter[tuple]:
    """Committed WindowResult records as (key, start, end, value), all on time."""
    rows = read_committed(path)
    assert {r["kind"] for r in rows} <= {"on_time"}, rows
    return Counter((r["key"], r["start"], r["end"], r["value"]) for r in rows)
