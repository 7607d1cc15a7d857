"""Foreign topologies against native: the same word count, in one run, four ways.

A fixed Zipf corpus (``--words`` words over a 5,000-word vocabulary, seed 39, ten words a
line) goes through lines -> split -> count (fields grouping on word) on 2 workers,
exactly-once with 1 s checkpoints, as

* ``native-batch``: the project's peer entry (bench/peer_wordcount.py: batch API, split
  pre-aggregates, count emits final counts);
* ``native``: plain jstormpy bolts, tuple by tuple (split emits each word, count emits the
  running ``(word, count)``), the shape the foreign topologies have;
* ``heronpy``: the same split and count as heronpy bolts (count a StatefulComponent), run
  in-process (jstormpy.heron);
* ``streamparse``: the same split and count as streamparse bolts, multilang
  subprocesses (jstormpy.multilang, ``python -m streamparse.run``).

The spout is the peer entry's replayable file spout in every run; after the per-tuple
counts a native bolt keeps each word's last count and writes the final counts, which are
checked against the corpus. It prints, per way, words/s and the cost per word
(processing seconds / words: first spout call to drained), and the ratio to ``native``
and to ``native-batch``; the multilang ratio is the price of the subprocess hop.

    python -m bench.foreign_wc --words 300000
    python -m bench.foreign_wc --words 20000 --ways native,heronpy   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import peer_wordcount
from heronpy.api.bolt.bolt import Bolt as HeronBoltBase
from heronpy.api.state.stateful_component import StatefulComponent
from jstormpy import Bolt, Config, FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.heron import HeronBolt
from jstormpy.multilang import ShellBolt

WAYS = ("native-batch", "native", "heronpy", "streamparse")
HERE = Path(__file__).resolve().parent
VOCABULARY = 5000
WORDS_PER_LINE = 10
FILES = 4


def write_corpus(folder: Path, words: int, seed: int = 39) -> Counter:
    """``words`` Zipf-distributed words in ``FILES`` part files; their counts."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(VOCABULARY)]
    weights = [1.0 / (rank + 1) for rank in range(VOCABULARY)]
    drawn = rng.choices(vocab, weights=weights, k=words)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [" ".join(drawn[i:i + WORDS_PER_LINE]) for i in range(0, words, WORDS_PER_LINE)]
    per_file = -(-len(lines) // FILES)
    for k in range(FILES):
        chunk = lines[k * per_file:(k + 1) * per_file]
        (folder / f"part-{k}.txt").write_text("".join(line + "\n" for line in chunk))
    return Counter(drawn)


# -- the per-tuple shape, natively ------------------------------------------------------
class NativeSplit(Bolt):
    outputs = ("word",)

    def execute(self, tup: Any) -> None:
        for word in tup.values[0].split():
            self.emit((word,))


class NativeCount(Bolt):
    outputs = ("word", "count")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts = self.state("counts")

    def execute(self, tup: Any) -> None:
        word = tup.values[0]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n
        self.emit((word, n))


# -- the same, as heronpy bolts ---------------------------------------------------------
class HeronSplit(HeronBoltBase):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for word in tup.values[0].split():
            self.emit([word])


class HeronCount(HeronBoltBase, StatefulComponent):
    outputs = ["word", "count"]

    def init_state(self, stateful_state: Any) -> None:
        self.counts = stateful_state

    def pre_save(self, checkpoint_id: Any) -> None:
        pass

    def process(self, tup: Any) -> None:
        word = tup.values[0]
        n = (self.counts.get(word) or 0) + 1
        self.counts.put(word, n)
        self.emit([word, n])


class LastCount(Bolt):
    """The last running count of each word; the final counts once the input ends."""

    outputs = ("word", "count")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.last = self.state("last")

    def execute(self, tup: Any) -> None:
        self.last[tup.values[0]] = tup.values[1]

    def on_inputs_finished(self) -> None:
        for word, count in self.last.items():
            self.emit((word, count))


def _sparse(cls: str, outputs: tuple[str, ...]) -> ShellBolt:
    return ShellBolt([sys.executable, "-m", "streamparse.run", f"foreign_wc_sparse.{cls}"],
                     outputs=outputs, cwd=str(HERE))


def build(way: str, files: list[str], out: str, stamps: str, par: int) -> Any:
    """The topology of one way."""
    if way == "native-batch":
        return peer_wordcount.build(files, out, par, stamps)
    split: Any
    count: Any
    if way == "native":
        split, count = NativeSplit, NativeCount
    elif way == "heronpy":
        split, count = HeronBolt(HeronSplit), HeronBolt(HeronCount)
    else:
        split = _sparse("SplitBolt", ("word",))
        count = _sparse("CountBolt", ("word", "count"))
    b = TopologyBuilder(f"foreign-wc-{way}")
    b.set_spout("lines", peer_wordcount.Lines(files, stamps), parallelism=par)
    b.set_bolt("split", split, parallelism=par).local_or_shuffle_grouping("lines")
    b.set_bolt("count", count, parallelism=par).fields_grouping("split", ["word"])
    b.set_bolt("last", LastCount, parallelism=par).fields_grouping("count", ["word"])
    b.set_bolt("sink", FileSink(out), parallelism=par).local_or_shuffle_grouping("last")
    return b.build()


def run_way(way: str, files: list[str], work: Path, expected: Counter,
            workers: int) -> dict[str, Any]:
    """Run one way to drained; its processing seconds, checked against the corpus."""
    root = work / way
    shutil.rmtree(root, ignore_errors=True)
    out, stamps = root / "out", root / "stamps"
    stamps.mkdir(parents=True)
    topo = build(way, files, str(out), str(stamps), workers)
    conf = Config(workers=workers, guarantee="exactly_once", checkpoint_interval_ms=1000,
                  log_level="WARNING", state_backend=f"file://{root / 'ckpt'}")
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, conf)
        status = handle.wait(timeout=3600, poll_s=0.01)
        end = time.time()
    starts = [float((stamps / n).read_text()) for n in os.listdir(stamps)]
    seconds = end - min(starts)
    counts = {r["word"]: r["count"] for r in read_committed(out)}
    words = sum(expected.values())
    return {"way": way, "state": status["state"], "seconds": seconds,
            "words_per_s": words / seconds, "us_per_word": seconds / words * 1e6,
            "correct": counts == dict(expected)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=300_000, help="corpus size (default 300k)")
    ap.add_argument("--ways", default=",".join(WAYS), help=f"subset of {','.join(WAYS)}")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args(argv)
    ways = [w for w in a.ways.split(",") if w]
    unknown = sorted(set(ways) - set(WAYS))
    if unknown:
        ap.error(f"unknown ways {unknown}; choose from {', '.join(WAYS)}")
    work = Path(a.workdir or tempfile.mkdtemp(prefix="jstormpy-foreign-wc-"))
    expected = write_corpus(work / "corpus", a.words)
    files = sorted(str(p) for p in (work / "corpus").glob("part-*.txt"))
    results = [run_way(way, files, work, expected, a.workers) for way in ways]
    by_way = {r["way"]: r for r in results}
    for r in results:
        for ref in ("native", "native-batch"):
            if ref in by_way and ref != r["way"]:
                r[f"x_{ref}"] = r["us_per_word"] / by_way[ref]["us_per_word"]
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"word count, {a.words:,} words (Zipf, {VOCABULARY:,}-word vocabulary), "
          f"{a.workers} workers, exactly-once, 1 s checkpoints")
    print(f"{'way':<13} {'words/s':>10} {'us/word':>8} {'x native':>9} {'x batch':>8}  ok")
    for r in results:
        xn = f"{r['x_native']:.2f}" if "x_native" in r else "-"
        xb = f"{r['x_native-batch']:.2f}" if "x_native-batch" in r else "-"
        print(f"{r['way']:<13} {r['words_per_s']:>10,.0f} {r['us_per_word']:>8.2f} {xn:>9} "
              f"{xb:>8}  {'yes' if r['correct'] and r['state'] == 'drained' else 'NO'}")
    return 0 if all(r["correct"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
