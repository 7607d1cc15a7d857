"""The word count the Spark tests and benchmark run: FileSpout → split → count → FileSink."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from jstormpy import Bolt, FileSink, FileSpout, TopologyBuilder


class PacedFileSpout(FileSpout):
    """FileSpout with a short pause per call, so a run lasts long enough to kill a worker
    in the middle (``pause_s=0`` for full speed)."""

    def __init__(self, paths: str, batch: int = 16, pause_s: float = 0.0) -> None:
        super().__init__(paths, batch=batch)
        self.pause_s = pause_s

    def next_tuple(self):
        import time

        super().next_tuple()
        if self.pause_s:
            time.sleep(self.pause_s)


class Split(Bolt):
    outputs = ("word",)

    def execute(self, tup):
        for word in tup["line"].split():
            self.emit((word,))


class CountEach(Bolt):
    """Word count with managed state, emitting the new count at every occurrence."""

    outputs = ("word", "count")

    def prepare(self, conf, context):
        self.counts = self.state("counts")

    def execute(self, tup):
        word = tup["word"]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n
        self.emit((word, n))


def write_corpus(folder: Path, files: int = 4, lines: int = 1000, vocab: int = 200) -> Counter[str]:
    """Deterministic text files; returns the word counts."""
    folder.mkdir(parents=True, exist_ok=True)
    words = [f"w{i}" for i in range(vocab)]
    expected: Counter[str] = Counter()
    for f in range(files):
        with open(folder / f"part-{f}.txt", "w") as fh:
            for i in range(lines):
                line = [words[(f * 31 + i * 7 + j * 13) % len(words)] for j in range(8)]
                expected.update(line)
                fh.write(" ".join(line) + "\n")
    return expected


def wordcount(out: Path, corpus: Path, fmt: str = "jsonl", pause_s: float = 0.002,
              name: str = "spark-wordcount", parallelism: int = 2):
    b = TopologyBuilder(name)
    b.set_spout("lines", PacedFileSpout(str(corpus / "*.txt"), pause_s=pause_s),
                parallelism=parallelism)
    b.set_bolt("split", Split, parallelism=parallelism).shuffle_grouping("lines")
    b.set_bolt("count", CountEach, parallelism=parallelism).fields_grouping("split", ["word"])
    b.set_bolt("out", FileSink(str(out), format=fmt), parallelism=parallelism) \
        .fields_grouping("count", ["word"])
    return b.build()
