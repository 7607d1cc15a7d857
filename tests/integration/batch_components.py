"""Components of the batch-API integration test (importable by the worker processes)."""

from __future__ import annotations

from typing import Any

from jstormpy import Batch, Bolt, Spout


def corpus(n: int) -> list[str]:
    """``n`` deterministic sentences of 6 words over a 40-word vocabulary."""
    return [" ".join(f"w{(i * 7 + j * 11) % 40}" for j in range(6)) for i in range(n)]


class BatchLines(Spout):
    """A batch spout: ``next_batch`` emits up to ``per_call`` lines as one column."""

    outputs = ("sentence",)

    def __init__(self, n: int, per_call: int = 64) -> None:
        self.n = n
        self.per_call = per_call
        self.offset = 0

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.lines = corpus(self.n)[context.task_index::context.parallelism]

    def next_batch(self) -> None:
        chunk = self.lines[self.offset:self.offset + self.per_call]
        if chunk:
            self.emit_batch({"sentence": chunk})
        self.offset += len(chunk)
        if self.offset >= len(self.lines):
            self.finish()

    def snapshot(self) -> int:
        return self.offset

    def restore(self, snap: int) -> None:
        self.offset = snap


class TupleSplit(Bolt):
    """A per-tuple bolt reading from the batch spout."""

    outputs = ("word",)

    def execute(self, tup: Any) -> None:
        for w in tup["sentence"].split():
            self.emit((w,))


class BatchRunningCount(Bolt):
    """A batch bolt reading from a per-tuple bolt: running count per word (managed state);
    every ``execute_batch`` checks that its batch has one source task and stream."""

    outputs = ("word", "count")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts = self.state("counts")

    def execute_batch(self, batch: Batch) -> None:
        assert batch.source == "split" and batch.fields == ("word",)
        assert all(t.task == batch.task for t in batch)
        counts = self.counts
        out = []
        for w in batch["word"]:
            c = counts.get(w, 0) + 1
            counts[w] = c
            out.append(c)
        self.emit_batch({"word": batch["word"], "count": out})
