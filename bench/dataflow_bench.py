"""The dataflow API's cost: a per-tuple running word count written with ``jstormpy.dataflow``
against the same job written as hand-written bolts, on 2 workers, exactly-once.

Both read the same spout (``BenchSentences``, 2 tasks) and end in the same no-op sink
(2 tasks, counting what reaches it and stamping when its inputs end); in between:

* bolts: ``Split`` (2, ``local_or_shuffle``: chained into the spout's thread) →
  ``RunningCount`` (2, fields grouping on the word, managed state, emits ``(word, n)``
  per tuple) → sink (``local_or_shuffle``);
* dataflow: ``flat_map(str.split)`` → ``key_by(lambda w: w)`` → ``stateful_map(count)`` →
  sink, which the dataflow compiles onto the same shape (a chained flat_map bolt, a
  fields grouping on ``_key``, one stateful bolt, the sink adapter). The key function is
  the identity, so the keyed hop carries ``(word,)`` as the hand-written split's does.
  (``key_by("word")`` needs dict items: a ``{"word": w}`` per word costs more than it
  saves, docs/performance.md.)

Words/s = words / (last sink end − first spout tuple), as in ``bench/wordcount.py``.

    python bench/dataflow_bench.py [--sentences 100000] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    WORDS_PER_SENTENCE,
    BenchSentences,
    BenchSplit,
    _write_json,
    bench_home,
    emit_json,
    fmt_rate,
    read_results,
    run_until_drained,
)

from jstormpy import Bolt, Config, LocalCluster, TopologyBuilder  # noqa: E402
from jstormpy.barrier.twophase import Sink  # type: ignore[import-not-found]  # noqa: E402
from jstormpy.dataflow import Dataflow  # noqa: E402


class RunningCount(Bolt):
    """Per-tuple running count in managed state (the peer script's per-tuple count)."""

    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts = self.state("counts")

    def execute(self, tup: Any) -> None:
        w = tup.values[0]
        c = self.counts.get(w, 0) + 1
        self.counts[w] = c
        self.emit((w, c))


class EndSink(Sink):
    """A sink with nothing to write: counts the tuples it gets and stamps the end."""

    def __init__(self, result_dir: str) -> None:
        self.result_dir = result_dir
        self.seen = 0

    def begin(self, checkpoint_id: int) -> None:
        pass

    def write(self, tup: Any) -> None:
        self.seen += 1

    def pre_commit(self, checkpoint_id: int) -> None:
        pass

    def commit(self, checkpoint_id: int) -> None:
        pass

    def abort(self, checkpoint_id: int) -> None:
        pass

    def recover(self, completed_id: int | None) -> None:
        pass

    def snapshot(self) -> int:
        return self.seen

    def restore(self, snap: int) -> None:
        self.seen = snap

    def on_inputs_finished(self) -> None:
        _write_json(self.result_dir, f"report-{os.getpid()}-{time.monotonic_ns()}.json",
                    {"end": time.time(), "words": self.seen})


def bolts(result_dir: str, n: int) -> Any:
    b = TopologyBuilder("bench-df-bolts")
    b.set_spout("sentences", BenchSentences(n, result_dir), parallelism=2)
    b.set_bolt("split", BenchSplit(), parallelism=2).local_or_shuffle_grouping("sentences")
    b.set_bolt("count", RunningCount(), parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("end", EndSink(result_dir), parallelism=2).local_or_shuffle_grouping("count")
    return b.build()


def count(n: int | None, word: str) -> tuple[int, tuple[str, int]]:
    n = (n or 0) + 1
    return n, (word, n)


def dataflow(result_dir: str, n: int) -> Any:
    flow = Dataflow("bench-df-dataflow")
    (flow.source("sentences", BenchSentences(n, result_dir), parallelism=2)
         .flat_map(lambda r: r["sentence"].split(), name="split", parallelism=2)
         .key_by(lambda w: w)
         .stateful_map(count, name="count", parallelism=2)
         .sink("end", EndSink(result_dir), parallelism=2))
    return flow.build()


def run(kind: str, n: int, timeout_s: float) -> dict[str, Any]:
    with bench_home() as home:
        result_dir = str(home / "results")
        os.makedirs(result_dir)
        topo = (bolts if kind == "bolts" else dataflow)(result_dir, n)
        conf = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=1000,
                      log_level="WARNING")
        with LocalCluster() as cluster:
            handle = cluster.submit(topo, conf)
            poller = run_until_drained(handle, timeout_s)
            with contextlib.suppress(Exception):
                poller.poll()
        starts = [r["start"] for r in read_results(result_dir, "spout")]
        reports = read_results(result_dir, "report")
        words = sum(r["words"] for r in reports)
        elapsed = max(r["end"] for r in reports) - min(starts)
        cpu = {c: agg.get("cpu_seconds", 0.0)
               for c, agg in poller.metrics.get("components", {}).items()}
        return {"kind": kind, "words": words, "words_ok": words == n * WORDS_PER_SENTENCE,
                "elapsed_s": elapsed, "words_per_s": words / elapsed,
                "components": sorted(topo.components), "cpu_seconds": cpu}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=1, help="runs of each, alternating; the "
                   "best of each is kept (shared machines are noisy)")
    p.add_argument("--timeout", type=float, default=240.0)
    p.add_argument("--json", action="store_true", help="also print a BENCH_JSON line")
    args = p.parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    tries: dict[str, list[dict[str, Any]]] = {"bolts": [], "dataflow": []}
    for _ in range(args.repeat):
        for kind, runs in tries.items():
            runs.append(run(kind, args.sentences, args.timeout))
    result: dict[str, Any] = {}
    for kind, runs in tries.items():
        best = max(runs, key=lambda r: r["words_per_s"])
        best["all_words_per_s"] = [r["words_per_s"] for r in runs]
        result[kind] = best
        print(f"[{kind}] {best['words']:,} words ({'ok' if best['words_ok'] else 'MISMATCH'})"
              f" in {best['elapsed_s']:.2f} s: {fmt_rate(best['words_per_s'])} words/s "
              f"(runs: {', '.join(fmt_rate(x) for x in best['all_words_per_s'])}); "
              f"components {best['components']}", file=out, flush=True)
        print("  task-thread CPU seconds per component (last heartbeat): "
              + ", ".join(f"{c} {v:.2f}" for c, v in sorted(best["cpu_seconds"].items())),
              file=out, flush=True)
    ratio = result["dataflow"]["words_per_s"] / result["bolts"]["words_per_s"]
    result["dataflow_over_bolts"] = ratio
    print(f"dataflow / hand-written bolts: {ratio:.3f}", file=out, flush=True)
    if args.json:
        emit_json(result)
    return result


if __name__ == "__main__":
    main()
