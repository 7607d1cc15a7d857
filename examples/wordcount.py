"""Word count: sentences spout → split bolt → count bolt → transactional file sink.

Run it with ``python examples/wordcount.py`` or ``jstorm run examples/wordcount.py``.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sys
import tempfile
from collections import Counter

from jstormpy import (
    Bolt,
    Config,
    Fields,
    FileSink,
    LocalCluster,
    Spout,
    TopologyBuilder,
    read_committed,
)

WORDS = ("the quick brown fox jumps over the lazy dog and the cat sat on the mat while "
         "a storm of tuples flows through bolts and spouts").split()


def corpus(n_sentences: int) -> list[str]:
    """A deterministic corpus of ``n_sentences`` sentences of 10 words."""
    out = []
    for i in range(n_sentences):
        out.append(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(10)))
    return out


class Sentences(Spout):
    """Emits a fixed corpus; its position is the replayable offset."""

    outputs = ("sentence",)

    def __init__(self, n_sentences: int = 20_000) -> None:
        self.n_sentences = n_sentences
        self.offset = 0

    def open(self, conf, context):
        # task i of n emits sentences i, i+n, i+2n, ...
        self.lines = corpus(self.n_sentences)[context.task_index::context.parallelism]

    def next_tuple(self):
        end = min(self.offset + 100, len(self.lines))
        for line in itertools.islice(self.lines, self.offset, end):
            self.emit((line,))
        self.offset = end
        if self.offset >= len(self.lines):
            self.finish()

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class Split(Bolt):
    outputs = ("word",)

    def execute(self, tup):
        for word in tup.values[0].split():
            self.emit((word,))


class Count(Bolt):
    outputs = ("word", "count")

    def prepare(self, conf, context):
        self.counts = self.state("counts")

    def execute(self, tup):
        word = tup.values[0]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n

    def on_inputs_finished(self):
        for word, n in sorted(self.counts.items()):
            self.emit((word, n))


def build(out_dir: str, n_sentences: int = 20_000, name: str = "wordcount",
          sentences: Spout | None = None):
    """The word count's wiring; ``sentences`` replaces the spout (``Sentences(n_sentences)``
    by default) with one that emits the same corpus."""
    b = TopologyBuilder(name)
    b.set_spout("sentences", sentences or Sentences(n_sentences), parallelism=2)
    b.set_bolt("split", Split, parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("count", Count, parallelism=2).fields_grouping("split", Fields("word"))
    b.set_bolt("out", FileSink(out_dir, format="jsonl"), parallelism=1).global_grouping("count")
    return b.build()


# a new directory name, made by the sink when it first writes: each worker imports this
# module too (for the classes above), and a directory made here would be made there, empty
out_dir = os.path.join(tempfile.gettempdir(), f"wordcount-out-{secrets.token_hex(4)}")
topology = build(out_dir)
config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=1000)


def verify(handle=None) -> bool:
    """Print the top words and check the committed counts against a plain Counter
    (``jstorm run`` calls this after the run drains)."""
    got = {r["word"]: r["count"] for r in read_committed(out_dir)}
    expected = Counter(w for line in corpus(20_000) for w in line.split())
    for word, n in Counter(got).most_common(10):
        print(f"{word:>8} {n}")
    ok = got == dict(expected)
    print("verified: counts equal a plain Counter over the corpus" if ok else "MISMATCH")
    return ok


def main() -> int:
    with LocalCluster() as cluster:
        handle = cluster.submit(topology, config)
        handle.wait(timeout=120)
    return 0 if verify(handle) else 1


if __name__ == "__main__":
    sys.exit(main())
