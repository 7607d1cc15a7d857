"""Topologies the chaos tests run, and their exactly-once checks."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from jstormpy import (
    Bolt,
    FileSink,
    FileSpout,
    SequenceSpout,
    Spout,
    TopologyBuilder,
    read_committed,
)
from jstormpy.testing.semantics import check_sequences


class RunningSum(Bolt):
    """Per key: running sum and count (managed state); emits one record per input."""

    outputs = ("key", "seq", "value", "sum", "count")

    def prepare(self, conf, context):
        self.sums = self.state("sums")

    def execute(self, tup):
        key, seq, value = tup["key"], tup["seq"], tup["value"]
        total, count = self.sums.get(key, (0, 0))
        total += value
        count += 1
        self.sums[key] = (total, count)
        self.emit((key, seq, value, total, count))


class Parity(Bolt):
    """Passes through the events whose seq has the given parity."""

    outputs = ("key", "seq", "value")

    def __init__(self, parity: int) -> None:
        self.parity = parity

    def execute(self, tup):
        if tup["seq"] % 2 == self.parity:
            self.emit(tup.values)


class Split(Bolt):
    outputs = ("word",)

    def execute(self, tup):
        for word in tup["line"].split():
            self.emit((word,))


class CountEach(Bolt):
    """Word count emitting the new count at every occurrence."""

    outputs = ("word", "count")

    def prepare(self, conf, context):
        self.counts = self.state("counts")

    def execute(self, tup):
        word = tup["word"]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n
        self.emit((word, n))


class BatchSequenceSpout(SequenceSpout):
    """SequenceSpout through the batch API: ``next_batch`` emits the same events as columns."""

    def next_batch(self):
        total = self.total
        if self._emitted >= total:
            if not self.finished:
                self.finish()
            return
        count = min(self.batch, total - self._emitted)
        if self.rate_per_s is not None:
            count = min(count, self._allowance())
            if count <= 0:
                return
        owned = self._owned
        n_owned = len(owned)
        js = range(self._emitted, self._emitted + count)
        seqs = [j // n_owned for j in js]
        self.emit_batch({"key": [owned[j % n_owned] for j in js], "seq": seqs,
                         "value": [q * 7 % 13 for q in seqs]})
        self._emitted += count
        if self._emitted >= total:
            self.finish()


class BatchRunningSum(Bolt):
    """RunningSum through the batch API: one ``execute_batch`` + ``emit_batch`` per batch."""

    outputs = ("key", "seq", "value", "sum", "count")

    def prepare(self, conf, context):
        self.sums = self.state("sums")

    def execute_batch(self, batch):
        sums = self.sums
        out_sum, out_count = [], []
        for key, value in zip(batch["key"], batch["value"], strict=True):
            total, count = sums.get(key, (0, 0))
            total += value
            count += 1
            sums[key] = (total, count)
            out_sum.append(total)
            out_count.append(count)
        self.emit_batch([batch["key"], batch["seq"], batch["value"], out_sum, out_count])


def linear_batch(out: Path, keys: int = 20, per_key: int = 2000, rate: float | None = 8000):
    """The linear topology written with the batch API (per-tuple FileSink reads from it)."""
    b = TopologyBuilder("chaos-linear-batch")
    b.set_spout("events", BatchSequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("sum", BatchRunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


def linear(out: Path, keys: int = 20, per_key: int = 2000, rate: float | None = 8000):
    b = TopologyBuilder("chaos-linear")
    b.set_spout("events", SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


class Forward(Bolt):
    """Passes every event on."""

    outputs = ("key", "seq", "value")

    def execute(self, tup):
        self.emit((tup["key"], tup["seq"], tup["value"]))


def chained(out: Path, keys: int = 20, per_key: int = 2000, rate: float | None = 8000):
    """events -> forward -> sum -> out, 3 tasks each (one per worker of 3): ``forward``
    runs chained into the spout's thread and ``out`` into ``sum``'s (local_or_shuffle,
    paired one per worker; runtime/channel_plan.py)."""
    b = TopologyBuilder("chaos-chained")
    b.set_spout("events", SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate),
                parallelism=3)
    b.set_bolt("forward", Forward, parallelism=3).local_or_shuffle_grouping("events")
    b.set_bolt("sum", RunningSum, parallelism=3).fields_grouping("forward", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=3).local_or_shuffle_grouping("sum")
    return b.build()


def diamond(out: Path, keys: int = 20, per_key: int = 2000, rate: float | None = 8000):
    b = TopologyBuilder("chaos-diamond")
    b.set_spout("events", SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("even", Parity(0), parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("odd", Parity(1), parallelism=2).fields_grouping("events", ["key"])
    (b.set_bolt("sum", RunningSum, parallelism=2)
     .fields_grouping("even", ["key"]).fields_grouping("odd", ["key"]))
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("sum")
    return b.build()


def write_corpus(folder: Path, files: int = 4, lines: int = 1500) -> Counter[str]:
    """Deterministic word files; returns the expected word counts."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = [f"w{i}" for i in range(50)]
    expected: Counter[str] = Counter()
    for f in range(files):
        with open(folder / f"part-{f}.txt", "w") as fh:
            for i in range(lines):
                words = [vocab[(f * 31 + i * 7 + j * 13) % len(vocab)] for j in range(8)]
                expected.update(words)
                fh.write(" ".join(words) + "\n")
    return expected


class SlowFileSpout(FileSpout):
    """FileSpout emitting at most ``per_call`` lines per call with a small pause, so a run
    lasts long enough to be killed in the middle."""

    def __init__(self, paths: Any, per_call: int = 4) -> None:
        super().__init__(paths, batch=per_call)

    def next_tuple(self):
        import time

        super().next_tuple()
        time.sleep(0.002)


def wordcount(out: Path, corpus: Path):
    b = TopologyBuilder("chaos-wordcount")
    b.set_spout("lines", SlowFileSpout(str(corpus / "*.txt")), parallelism=2)
    b.set_bolt("split", Split, parallelism=2).shuffle_grouping("lines")
    b.set_bolt("count", CountEach, parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("count", ["word"])
    return b.build()


def multilang(out: Path, acks: Path, keys: int = 10, per_key: int = 400,
              runner: bool = False):
    """linear with a multilang spout and a multilang bolt in the path: a reliable pystorm
    spout (ids, re-emit on fail) and a pystorm bolt, then the native running sum. With
    ``runner`` the same classes run as ``python -m streamparse.run``: our pystorm runner."""
    import sys

    from jstormpy.multilang import ShellBolt, ShellSpout

    here = Path(__file__).parent / "multilang"
    acks.mkdir(parents=True, exist_ok=True)
    b = TopologyBuilder("chaos-multilang")
    fields = ("key", "seq", "value")
    if runner:
        sparse = [sys.executable, "-m", "streamparse.run"]
        spout = ShellSpout([*sparse, "sequence_spout.SequenceSpout"], outputs=fields,
                           cwd=str(here), env={"SEQUENCE_ARGS": f"{acks} {keys} {per_key}"})
        bolt = ShellBolt([*sparse, "forward_bolt.ForwardBolt"], outputs=fields, cwd=str(here))
    else:
        spout = ShellSpout([sys.executable, str(here / "sequence_spout.py"), str(acks),
                            str(keys), str(per_key)], outputs=fields)
        bolt = ShellBolt([sys.executable, str(here / "forward_bolt.py")], outputs=fields)
    b.set_spout("events", spout, parallelism=2)
    b.set_bolt("forward", bolt, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("forward", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("sum", ["key"])
    return b.build()


def check_keyed_sums(out: Path, keys: int, per_key: int, per_parity_order: bool = False) -> str:
    """Exactly-once check for linear/diamond; returns '' or the problems found."""
    records = read_committed(out)
    problems = []
    expected = {f"k{i}": per_key for i in range(keys)}
    value = SequenceSpout.value_of
    if per_parity_order:
        # across the two branches the interleaving is free; within a branch order is kept
        for parity in (0, 1):
            part = [r for r in records if r["seq"] % 2 == parity]
            rep = check_sequences([{"key": r["key"], "seq": r["seq"] // 2} for r in part],
                                  "key", "seq",
                                  {k: (per_key - parity + 1) // 2 for k in expected})
            if not rep.ok:
                problems.append(f"parity {parity}: {rep.summary()}")
    else:
        rep = check_sequences(records, "key", "seq", expected)
        if not rep.ok:
            problems.append(rep.summary())
    # output count per key must be 1..n in order (no loss, duplicate, reordering of outputs)
    counts: dict[str, list[int]] = defaultdict(list)
    sums: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r["key"]].append(r["count"])
        sums[r["key"]] += r["value"]
        if r["sum"] != sums[r["key"]]:
            problems.append(f"key {r['key']}: sum {r['sum']} at count {r['count']} != "
                            f"recomputed {sums[r['key']]}")
            break
    for key, n in expected.items():
        if counts[key] != list(range(1, n + 1)):
            problems.append(f"key {key}: counts are not 1..{n} in order")
        total = sum(value(s) for s in range(n))
        if sums[key] != total:
            problems.append(f"key {key}: final state {sums[key]} != batch recomputation {total}")
    return "\n".join(problems[:10])


def check_word_counts(out: Path, expected: Counter[str]) -> str:
    records = read_committed(out)
    rep = check_sequences([{"word": r["word"], "seq": r["count"] - 1} for r in records],
                          "word", "seq", dict(expected))
    return "" if rep.ok else rep.summary()


class FlakySpout(Spout):
    """A non-replayable spout (no snapshot/restore): refused under exactly_once."""

    outputs = ("n",)

    def next_tuple(self):
        self.emit((1,))
