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
  subprocesses (jstormpy.multilang, ``python -m streamparse.run``): our pystorm runner,
  binary frames of many messages;
* ``streamparse-json``: the same subprocesses on Storm's JSON protocol, pystorm's own loop
  (``protocol="json"``, what ran them before the runner).

The spout is the peer entry's replayable file spout in every run; after the per-tuple
counts a native bolt keeps each word's last count and writes the final counts, which are
checked against the corpus. It prints, per way, words/s and the cost per word
(processing seconds / words: first spout call to drained), and the ratio to ``native``
and to ``native-batch``; the multilang ratio is the price of the subprocess hop.

    python -m bench.foreign_wc --words 300000
    python -m bench.foreign_wc --words 20000 --ways native,heronpy   # a smoke run
    python -m bench.foreign_wc --words 200000 --ways native,streamparse --floor

Each way's CPU per word (the workers' and the master's, and, in brackets, the part spent in
the multilang subprocesses, sampled from /proc) is printed too: on a shared machine the
CPU figures and the ratios within one run are the ones to compare. ``--floor`` also runs
the two streamparse bolts alone on pre-written input files, under pystorm's own loop
(JSON) and in our pystorm runner (frames): the subprocess side's floor.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
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

WAYS = ("native-batch", "native", "heronpy", "streamparse", "streamparse-json")
HERE = Path(__file__).resolve().parent
VOCABULARY = 5000
WORDS_PER_LINE = 10
FILES = 4


def draw(words: int, seed: int = 39) -> list[str]:
    """``words`` Zipf-distributed words over the vocabulary."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(VOCABULARY)]
    weights = [1.0 / (rank + 1) for rank in range(VOCABULARY)]
    return rng.choices(vocab, weights=weights, k=words)


def write_corpus(folder: Path, words: int, seed: int = 39) -> Counter:
    """``words`` Zipf-distributed words in ``FILES`` part files; their counts."""
    drawn = draw(words, seed)
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


def _sparse(cls: str, outputs: tuple[str, ...], protocol: str) -> ShellBolt:
    return ShellBolt([sys.executable, "-m", "streamparse.run", f"foreign_wc_sparse.{cls}"],
                     outputs=outputs, cwd=str(HERE), protocol=protocol)


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
        protocol = "json" if way == "streamparse-json" else "auto"
        split = _sparse("SplitBolt", ("word",), protocol)
        count = _sparse("CountBolt", ("word", "count"), protocol)
    b = TopologyBuilder(f"foreign-wc-{way}")
    b.set_spout("lines", peer_wordcount.Lines(files, stamps), parallelism=par)
    b.set_bolt("split", split, parallelism=par).local_or_shuffle_grouping("lines")
    b.set_bolt("count", count, parallelism=par).fields_grouping("split", ["word"])
    b.set_bolt("last", LastCount, parallelism=par).fields_grouping("count", ["word"])
    b.set_bolt("sink", FileSink(out), parallelism=par).local_or_shuffle_grouping("last")
    return b.build()


class SubprocessCpu:
    """The CPU seconds of this run's multilang subprocesses (``streamparse.run``, runner
    or runner zygote command lines descending from this process), sampled from /proc
    every ``period_s`` while a run goes on: the subprocess side of the hop, the rest of
    the run's CPU is the host's (workers, master)."""

    def __init__(self, period_s: float = 0.02) -> None:
        self.period_s = period_s
        self.seen: dict[int, float] = {}
        self.forked: set[int] = set()
        """The zygotes and the runners they forked (their command line the zygote's): no
        process whose CPU reaches this one's ``RUSAGE_CHILDREN`` waits for them (the
        workers exit without waiting for the zygote, which exits without waiting for its
        children), so :func:`run_way` adds their part to the rusage figure."""
        self.stop = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SubprocessCpu:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()

    def seconds(self) -> float:
        return sum(self.seen.values())

    def unreaped_seconds(self) -> float:
        """The CPU seconds of the zygotes and their forked runners."""
        return sum(cpu for pid, cpu in self.seen.items() if pid in self.forked)

    def _run(self) -> None:
        me = os.getpid()
        while not self.stop.wait(self.period_s):
            stats: dict[int, list[str]] = {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/stat") as f:
                        stats[int(name)] = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
            for pid, fields in stats.items():
                if not self._descends(pid, me, stats):  # (other jobs on the machine)
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if (b"streamparse.run" not in cmdline and b"pystorm_runner" not in cmdline
                        and b"runner_zygote" not in cmdline):  # (and the runners it forks)
                    continue
                if b"runner_zygote" in cmdline:
                    self.forked.add(pid)
                self.seen[pid] = (int(fields[11]) + int(fields[12])) / self.tick

    @staticmethod
    def _descends(pid: int, ancestor: int, stats: dict[int, list[str]]) -> bool:
        """Whether ``pid`` is a descendant of ``ancestor`` (``stats``: /proc's stat fields
        by pid, the parent pid the second field after the name)."""
        for _ in range(64):
            fields = stats.get(pid)
            if fields is None:
                return False
            pid = int(fields[1])
            if pid == ancestor:
                return True
        return False


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def subprocess_floor(drawn: list[str], work: Path) -> dict[str, float]:
    """The unmodified streamparse bolts alone, no host: each reads a pre-written file of its
    tuple messages (the handshake, then one message per line of the corpus for split, per
    word for count) and writes its emits and acks to a file. Their CPU microseconds per
    word (interpreter start-up subtracted) are the least any host can cost with them."""
    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def run(argv: list[str], messages: list[list[str]] | None) -> float:
        folder = work / "floor"
        folder.mkdir(parents=True, exist_ok=True)
        inp, out = folder / "in", folder / "out"
        handshake = {"conf": {}, "pidDir": str(folder),
                     "context": {"task->component": {"1": "x"}, "taskid": 1,
                                 "componentid": "x",
                                 # the input's fields, as a host sends them (pystorm
                                 # then makes a namedtuple of each tuple's values)
                                 "source->stream->fields": {"s": {"default": ["value"]}}}}
        with open(inp, "w") as f:
            f.write(json.dumps(handshake) + "\nend\n")
            for i, values in enumerate(messages or ()):
                f.write(json.dumps({"id": str(i), "comp": "s", "stream": "default",
                                    "task": 1, "tuple": values}) + "\nend\n")
        before = cpu()
        with open(inp) as stdin, open(out, "w") as stdout:
            subprocess.run(argv, stdin=stdin, stdout=stdout, cwd=str(HERE), check=False)
        return cpu() - before

    def sparse(cls: str) -> list[str]:
        return [sys.executable, "-m", "streamparse.run", f"foreign_wc_sparse.{cls}"]

    words = len(drawn)
    start = run(sparse("SplitBolt"), None)  # start-up, handshake, EOF: no tuples
    lines = [[" ".join(drawn[i:i + WORDS_PER_LINE])] for i in range(0, words, WORDS_PER_LINE)]
    split = run(sparse("SplitBolt"), lines) - start
    count = run(sparse("CountBolt"), [[w] for w in drawn]) - start
    return {"split_cpu_us_per_word": split / words * 1e6,
            "count_cpu_us_per_word": count / words * 1e6,
            "cpu_us_per_word": (split + count) / words * 1e6}


def runner_floor(drawn: list[str], work: Path, batch: int = 512) -> dict[str, float]:
    """The same bolts in our pystorm runner, no host: each reads a pre-written file of
    frames (the handshake, then frames of ``batch`` tuples, as ShellBolt sends a channel
    batch) and its answers are read to their end. CPU microseconds per word, the runner's
    start-up (an empty input) subtracted."""
    from jstormpy.multilang import pystorm_runner as runner
    from jstormpy.multilang.frames import RUNNER

    def run(cls: str, rows: list[list[str]]) -> float:
        folder = work / "runner-floor"
        folder.mkdir(parents=True, exist_ok=True)
        inp = folder / "in"
        handshake = {"conf": {"topology.name": "floor"}, "pidDir": str(folder),
                     "context": {"task->component": {"1": "x"}, "taskid": 1,
                                 "componentid": "x",
                                 # the input's fields, as a host sends them (pystorm
                                 # then makes a namedtuple of each tuple's values)
                                 "source->stream->fields": {"s": {"default": ["value"]}}}}
        with open(inp, "wb") as f:
            f.write(runner.encode_frame([handshake]))
            for i in range(0, len(rows), batch):
                f.write(runner.encode_frame([(runner.TUPLES, i + 1, "s", "default", 1,
                                              rows[i:i + batch])]))
        before = _children_cpu()
        with open(inp, "rb") as stdin:  # its stdout a pipe, as under a host
            subprocess.run([sys.executable, RUNNER, f"foreign_wc_sparse.{cls}"], stdin=stdin,
                           capture_output=True, cwd=str(HERE), check=False)
        return _children_cpu() - before

    words = len(drawn)
    start = run("SplitBolt", [])
    lines = [[" ".join(drawn[i:i + WORDS_PER_LINE])] for i in range(0, words, WORDS_PER_LINE)]
    split = run("SplitBolt", lines) - start
    count = run("CountBolt", [[w] for w in drawn]) - start
    return {"runner_split_cpu_us_per_word": split / words * 1e6,
            "runner_count_cpu_us_per_word": count / words * 1e6,
            "runner_cpu_us_per_word": (split + count) / words * 1e6,
            "runner_start_cpu_s": start}


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
    cpu0 = _children_cpu()
    with SubprocessCpu() as sub, LocalCluster() as cluster:
        handle = cluster.submit(topo, conf)
        status = handle.wait(timeout=3600, poll_s=0.01)
        end = time.time()
    # the workers and master (and what they waited for), and the forked runners
    cpu = _children_cpu() - cpu0 + sub.unreaped_seconds()
    starts = [float((stamps / n).read_text()) for n in os.listdir(stamps)]
    seconds = end - min(starts)
    counts = {r["word"]: r["count"] for r in read_committed(out)}
    words = sum(expected.values())
    return {"way": way, "state": status["state"], "seconds": seconds,
            "words_per_s": words / seconds, "us_per_word": seconds / words * 1e6,
            "cpu_us_per_word": cpu / words * 1e6,
            "subprocess_cpu_us_per_word": sub.seconds() / words * 1e6,
            "correct": counts == dict(expected)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=300_000, help="corpus size (default 300k)")
    ap.add_argument("--ways", default=",".join(WAYS), help=f"subset of {','.join(WAYS)}")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--floor", action="store_true",
                    help="also run the streamparse bolts alone on pre-written input files "
                         "(the subprocess side's floor, CPU per word)")
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
    floor = ({**subprocess_floor(draw(a.words), work), **runner_floor(draw(a.words), work)}
             if a.floor else None)
    if a.json:
        print(json.dumps({"ways": results, "floor": floor} if floor else results, indent=2))
        return 0
    print(f"word count, {a.words:,} words (Zipf, {VOCABULARY:,}-word vocabulary), "
          f"{a.workers} workers, exactly-once, 1 s checkpoints")
    print(f"{'way':<13} {'words/s':>10} {'us/word':>8} {'x native':>9} {'x batch':>8}  ok"
          "   cpu us/word (of it in multilang subprocesses)")
    for r in results:
        xn = f"{r['x_native']:.2f}" if "x_native" in r else "-"
        xb = f"{r['x_native-batch']:.2f}" if "x_native-batch" in r else "-"
        print(f"{r['way']:<13} {r['words_per_s']:>10,.0f} {r['us_per_word']:>8.2f} {xn:>9} "
              f"{xb:>8}  {'yes' if r['correct'] and r['state'] == 'drained' else 'NO':<3}"
              f"  {r['cpu_us_per_word']:>8.2f} ({r['subprocess_cpu_us_per_word']:.2f})")
    if floor:
        print(f"streamparse bolts alone on files (no host), cpu us/word: split "
              f"{floor['split_cpu_us_per_word']:.2f} + count {floor['count_cpu_us_per_word']:.2f}"
              f" = {floor['cpu_us_per_word']:.2f}")
        print(f"the same in our pystorm runner on frames (no host), cpu us/word: split "
              f"{floor['runner_split_cpu_us_per_word']:.2f} + count "
              f"{floor['runner_count_cpu_us_per_word']:.2f} = "
              f"{floor['runner_cpu_us_per_word']:.2f} (start-up "
              f"{floor['runner_start_cpu_s']:.2f} s each, not included)")
    return 0 if all(r["correct"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
