"""The running-count word count's own work with no engine: what issue 36's target leaves.

The peer harness's running-count entry (``jstormpy_eo_reduce``: lines spout -> split ->
fields-grouped count emitting ``(word, count)`` per word -> ``FileSink``) does, per word,
the user's split and count, and the sink writes one jsonl line. This probe does exactly
that work in one process and one thread, with no engine between the steps: each line is
read and decoded, handed to a ``split`` function as a tuple's values, each word to a
``count`` function the same way (a dict ``get`` and set, a ``(word, count)`` row), and
the rows are encoded as the sink writes them (``connectors/jsonl.py``'s text, here with
a plain ``%`` format) and written to one file. It prints the CPU per word of the two
parts (``time.process_time``, the fastest of ``--runs``).

Two cores running only this, with no engine, no second process and no exchange, would do
at most ``2 / (ns a word)`` words a second: the floor the engine's share is measured
against (docs/performance.md, "Harness runs of 2026-12-01").

    python -m bench.running_count_floor --corpus /tmp/peerbench/corpus-200000
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time


class _Values:
    """A tuple's one attribute the user's code reads (``tup.values``)."""

    __slots__ = ("values",)

    def __init__(self, values: tuple) -> None:
        self.values = values


def run_once(files: list[str], out_path: str) -> tuple[int, float, float]:
    """(words, user seconds, sink seconds) of one pass over ``files``."""
    counts: dict[str, int] = {}
    rows: list[tuple[str, int]] = []
    append = rows.append

    def count(tup: _Values) -> None:
        w = tup.values[0]
        c = counts.get(w, 0) + 1
        counts[w] = c
        append((w, c))

    def split(tup: _Values) -> None:
        for w in tup.values[0].split():
            count(_Values((w,)))

    t0 = time.process_time()
    for path in files:
        with open(path, "rb") as fh:
            for line in iter(fh.readline, b""):
                split(_Values((line.decode(),)))
    t1 = time.process_time()
    quote = json.encoder.encode_basestring_ascii
    text = "".join(['{"word":%s,"count":%d}\n' % (quote(w), c) for w, c in rows])
    with open(out_path, "wb") as f:
        f.write(text.encode())
    t2 = time.process_time()
    return len(rows), t1 - t0, t2 - t1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="directory holding part-*.txt")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(a.corpus, "part-*.txt")))
    if not files:
        print(f"no part-*.txt files in {a.corpus}", file=sys.stderr)
        return 2
    best: tuple[int, float, float] | None = None
    with tempfile.TemporaryDirectory(prefix="running-count-floor-") as tmp:
        for _ in range(a.runs):
            got = run_once(files, os.path.join(tmp, "out.jsonl"))
            if best is None or got[1] + got[2] < best[1] + best[2]:
                best = got
    assert best is not None
    words, user_s, sink_s = best
    per = 1e9 / words
    print(f"{words:,} words, fastest of {a.runs}: split + count {user_s * per:.0f} ns a word, "
          f"sink text + write {sink_s * per:.0f} ns a word, together "
          f"{(user_s + sink_s) * per:.0f} ns a word "
          f"(two cores at most {2 * words / (user_s + sink_s) / 1e6:.2f}M words/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
