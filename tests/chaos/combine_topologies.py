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
