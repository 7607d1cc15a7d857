"""The peer word count (``bench/peer_wordcount.py``) with ``state_store="memory"`` and
``"rocksdb"`` in one run, back to back on the same corpus (issue 25, benchmark 4: the
target is rocksdb >= 0.6x of memory).

Each run is a fresh ``peer_wordcount.py`` process, as the peer harness starts it
(exactly-once, 1 s checkpoints, 2 workers), with ``--state-store``; the stores alternate
(memory, rocksdb, memory, ...) so drifting machine load hits both alike. Every run's
final counts are checked against a ``Counter`` of the corpus. Reported per store: the
median of ``PROCESSING_SECONDS`` (first spout call to drained, the harness's figure) and
words/s, and rocksdb's words/s as a ratio of memory's.

    python bench/peer_wordcount_stores.py --corpus DIR [--runs 3] [--json]
    python bench/peer_wordcount_stores.py --sentences 20000 --runs 1   # makes a corpus

``--corpus`` takes the peer harness's corpus directory (``part-*.txt``); without it a
corpus of ``--sentences`` lines of 10 words (Zipf-like over 10,000 words, seeded) is
written to a temporary directory.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from itertools import accumulate
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import emit_json  # noqa: E402

STORES = ("memory", "rocksdb")


def make_corpus(folder: str, sentences: int, files: int = 4, vocab: int = 10_000) -> None:
    """``sentences`` lines of 10 words, word of rank r drawn with weight 1 / r**1.1."""
    rng = random.Random(20240601)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < vocab:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 10)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    cum = list(accumulate(1.0 / (r ** 1.1) for r in range(1, vocab + 1)))
    per_file = -(-sentences // files)
    for k in range(files):
        n = min(per_file, sentences - k * per_file)
        with open(os.path.join(folder, f"part-{k:05d}.txt"), "w", encoding="utf-8") as f:
            for _ in range(max(0, n)):
                f.write(" ".join(rng.choices(words, cum_weights=cum, k=10)) + "\n")


def expected_counts(corpus: str) -> Counter[str]:
    c: Counter[str] = Counter()
    for path in sorted(glob.glob(os.path.join(corpus, "part-*.txt"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                c.update(line.split())
    return c


def run_once(store: str, corpus: str, scratch: str, expected: Counter[str]) -> float:
    """One ``peer_wordcount.py`` process; its PROCESSING_SECONDS, the counts verified."""
    work = tempfile.mkdtemp(prefix=f"wc-{store}-", dir=scratch)
    out = os.path.join(work, "counts.json")
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "peer_wordcount.py"), "--corpus", corpus,
         "--out", out, "--workdir", work, "--state-store", store],
        capture_output=True, text=True, check=False, timeout=1800)
    try:
        if done.returncode != 0:
            raise RuntimeError(f"{store}: exit {done.returncode}\n{done.stderr[-2000:]}")
        with open(out, encoding="utf-8") as f:
            got = json.load(f)
        if got != dict(expected):
            raise RuntimeError(f"{store}: the counts differ from a Counter of the corpus")
        last = done.stdout.strip().splitlines()[-1]
        if not last.startswith("PROCESSING_SECONDS="):
            raise RuntimeError(f"{store}: no PROCESSING_SECONDS line: {last!r}")
        return float(last.split("=", 1)[1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(corpus: str, runs: int) -> dict[str, Any]:
    expected = expected_counts(corpus)
    words = sum(expected.values())
    seconds: dict[str, list[float]] = {s: [] for s in STORES}
    with tempfile.TemporaryDirectory(prefix="jstorm-wc-stores-") as scratch:
        for i in range(runs):
            for store in STORES:
                s = run_once(store, corpus, scratch, expected)
                seconds[store].append(s)
                print(f"# run {i + 1}/{runs} {store}: {s:.2f} s, {words / s:,.0f} words/s",
                      file=sys.stderr, flush=True)
    med = {s: statistics.median(v) for s, v in seconds.items()}
    return {"words": words, "distinct": len(expected), "runs": runs, "seconds": seconds,
            "median_s": med, "words_per_s": {s: words / v for s, v in med.items()},
            "rocksdb_vs_memory": med["memory"] / med["rocksdb"],
            "load_after": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="", help="directory of part-*.txt (the harness's)")
    p.add_argument("--sentences", type=int, default=200_000,
                   help="without --corpus: lines of the corpus made for the run")
    p.add_argument("--runs", type=int, default=3, help="runs per store (median)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    tmp = None
    corpus = a.corpus
    if not corpus:
        tmp = tempfile.mkdtemp(prefix="jstorm-wc-corpus-")
        make_corpus(tmp, a.sentences)
        corpus = tmp
    try:
        load = os.getloadavg()
        r = run(corpus, a.runs)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    r["load_before"] = load
    print(f"{r['words']:,} words ({r['distinct']:,} distinct), {a.runs} run(s) per store, "
          f"load average before {load[0]:.1f}, after {r['load_after'][0]:.1f}")
    for s in STORES:
        print(f"  {s:8} {r['median_s'][s]:7.2f} s  {r['words_per_s'][s]:>10,.0f} words/s")
    print(f"  rocksdb / memory: {r['rocksdb_vs_memory']:.2f}x (target >= 0.6x)")
    if a.json:
        emit_json(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
