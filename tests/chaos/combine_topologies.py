"""A windowed word count whose split task combines before the shuffle (window/combine.py):
one ingestion-time window per word that fires when the input ends, like the peer harness's
``FinalCount``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from topologies import SlowFileSpout, Split

from jstormpy import FileSink, TopologyBuilder, read_committed
from tests.integration.window_components import FinalWordCount


def windowed_wordcount(out: Path, corpus: Path, combine: bool = True):
    count = type("FinalCount", (FinalWordCount,), {"combine_before_shuffle": combine})
    b = TopologyBuilder("chaos-window-wordcount")
    b.set_spout("lines", SlowFileSpout(str(corpus / "*.txt")), parallelism=2)
    b.set_bolt("split", Split, parallelism=2).shuffle_grouping("lines")
    b.set_bolt("count", count, parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).shuffle_grouping("count")
    return b.build()


def check_final_counts(out: Path, expected: Counter[str]) -> str:
    """Every word's final count committed exactly once, equal to the corpus's."""
    seen: Counter[str] = Counter()
    got: dict[str, int] = {}
    for r in read_committed(out):
        seen[r["key"]] += 1
        got[r["key"]] = r["result"]
    problems = [f"{w}: committed {n} times" for w, n in seen.items() if n != 1]
    problems += [f"{w}: {got.get(w)} != {n}" for w, n in expected.items() if got.get(w) != n]
    problems += [f"{w}: not in the corpus" for w in got if w not in expected]
    return "\n".join(problems[:10])


EVENTS = 12_000
CHUNK = 10


def event_time_counts(out: Path, late: Path):
    """Out-of-order events with in-band watermarks (one spout task, so the count tasks'
    input order, and with it every late firing, is deterministic) through a forwarding
    bolt that combines before the shuffle towards event-time 100 ms tumbling counts."""
    from tests.integration.window_components import CountPer100, Forward, OutOfOrderEvents

    b = TopologyBuilder("chaos-event-time-counts")
    b.set_spout("events", OutOfOrderEvents(EVENTS, CHUNK, 0.002), parallelism=1)
    b.set_bolt("forward", Forward, parallelism=1).shuffle_grouping("events")
    b.set_bolt("count", CountPer100, parallelism=2).fields_grouping("forward", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).shuffle_grouping("count")
    b.set_bolt("late", FileSink(str(late)), parallelism=1).shuffle_grouping(
        "count", stream="late")
    return b.build()


def check_event_time_counts(out: Path, late: Path) -> str:
    """Every firing of the reference committed exactly once (late firings included), and
    the late stream holds exactly the reference's late records."""
    from tests.integration.window_components import out_of_order_reference

    want, want_late = out_of_order_reference(EVENTS, CHUNK)
    got = Counter((r["key"], r["window_start"], r["window_end"], r["result"], r["kind"])
                  for r in read_committed(out))
    problems = [f"{f}: committed {got[f]} times, expected {n}"
                for f, n in (want | got).items() if got[f] != want[f]]
    late_rows = read_committed(late)
    if len(late_rows) != want_late or len({(r["key"], r["ts"]) for r in late_rows}) != \
            len(late_rows):
        problems.append(f"late stream: {len(late_rows)} rows, expected {want_late} distinct")
    return "\n".join(problems[:10])
