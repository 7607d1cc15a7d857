"""Keyed sliding-window aggregation benchmark (60 s windows sliding by 1 s, 10k keys).

Measures records/s through the pure WindowOperator and through WindowedBolt (with a
BoundedOutOfOrderness watermark and a null collector), and samples memory at intervals
to show it stays flat in the number of records: RSS (psutil) during the timed runs, and
tracemalloc's traced size in a separate, slower pass (``--tracemalloc``).

``--api tuple`` (the default) feeds one record at a time: ``WindowOperator.process`` /
``WindowedBolt.execute`` with one ``Tuple`` built per record. ``--api batch`` feeds
channel batches of ``--batch`` records, as the engine delivers them:
``WindowOperator.process_batch`` / ``WindowedBolt.execute_batch`` (the batch API);
``--api both`` runs both.

Usage:
    python bench/window_bench.py                      # 2M records, operator + bolt
    python bench/window_bench.py --api batch          # the batch API
    python bench/window_bench.py --records 200000 --no-slicing   # per-window path
    python bench/window_bench.py --tracemalloc --only operator
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Any

import psutil

from jstormpy.api.batch import Batch, rows_from_columns
from jstormpy.api.component import Tuple, bind_task
from jstormpy.window import (
    BoundedOutOfOrderness,
    Mean,
    SlidingWindows,
    WindowedBolt,
    WindowOperator,
)

SIZE_MS = 60_000
SLIDE_MS = 1_000
INDEX = {"sensor": 0, "ts": 1, "temp": 2}
FIELDS = ("key", "window_start", "window_end", "result", "kind")


class Avg:
    """Average of floats: accumulator (sum, count)."""

    def create(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, acc: tuple[float, int], value: float) -> tuple[float, int]:
        return (acc[0] + value, acc[1] + 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, key: Any, window: Any, acc: tuple[float, int]) -> float:
        return acc[0] / acc[1]


class AvgTemp(WindowedBolt):
    window = SlidingWindows(size_ms=SIZE_MS, slide_ms=SLIDE_MS)
    timestamp = "ts"
    key = "sensor"
    watermark = BoundedOutOfOrderness(max_lag_ms=2_000)

    def create(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, acc: tuple[float, int], tup: Tuple) -> tuple[float, int]:
        return (acc[0] + tup[2], acc[1] + 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, key: Any, window: Any, acc: tuple[float, int]) -> float:
        return acc[0] / acc[1]


class MeanTemp(WindowedBolt):
    """The same average with the built-in aggregate (``--agg builtin``)."""

    window = SlidingWindows(size_ms=SIZE_MS, slide_ms=SLIDE_MS)
    timestamp = "ts"
    key = "sensor"
    watermark = BoundedOutOfOrderness(max_lag_ms=2_000)
    aggregate = Mean("temp")


class NullCollector:
    """Counts what a bolt emits."""

    def __init__(self) -> None:
        self.tuples = 0
        self.watermarks = 0

    def emit(self, values: Any, stream: str = "default") -> None:
        self.tuples += 1

    def emit_direct(self, task: int, values: Any, stream: str = "default") -> None:
        self.tuples += 1

    def emit_batch(self, columns: Any, stream: str = "default") -> None:
        # the rows are built as the engine's collector builds them
        self.tuples += len(rows_from_columns(columns, FIELDS, "avg", stream))

    def emit_watermark(self, watermark_ms: float) -> None:
        self.watermarks += 1


@dataclass(frozen=True)
class Sample:
    records: int
    seconds: float
    rss_mb: float
    traced_mb: float | None
    live: int


@dataclass(frozen=True)
class RunResult:
    name: str
    records: int
    seconds: float
    firings: int
    samples: list[Sample]
    snapshot: tuple[float, float] | None = None
    """(seconds, MiB) of one snapshot() of the final (steady) state, before finish."""
    cpu_seconds: float | None = None
    """CPU time of the process over the same span (the figure to read on a busy machine)."""

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def records(n: int, keys: int, rate: int, lag: int) -> Iterator[tuple[int, int, float]]:
    """Deterministic keyed stream: ``rate`` records per event-time second, out of order
    by up to ``lag`` ms."""
    per_ms = rate / 1000
    for i in range(n):
        yield (i * 2654435761) % keys, int(i / per_ms) - (i * 7919) % lag, float(i % 50)


def _aggregate(args: argparse.Namespace) -> Any:
    return Mean() if args.agg == "builtin" else Avg()


def _sample(done: int, t0: float, traced: bool, live: int) -> Sample:
    rss = psutil.Process().memory_info().rss / 2**20
    cur = tracemalloc.get_traced_memory()[0] / 2**20 if traced else None
    return Sample(done, time.perf_counter() - t0, rss, cur, live)


def run_operator(args: argparse.Namespace, traced: bool) -> RunResult:
    op = WindowOperator(SlidingWindows(SIZE_MS, SLIDE_MS), _aggregate(args),
                        slicing=None if args.slicing else False)
    process, advance = op.process, op.advance_watermark
    firings = 0
    max_ts = 0
    samples = []
    t0, c0 = time.perf_counter(), time.process_time()
    for i, (key, ts, value) in enumerate(records(args.records, args.keys, args.rate,
                                                 args.lag)):
        firings += len(process(key, ts, value))
        max_ts = max(max_ts, ts)
        if i % 1000 == 999:
            firings += len(advance(max_ts - args.lag))
        if i % args.sample_every == args.sample_every - 1:
            samples.append(_sample(i + 1, t0, traced, op.window_count))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    blob = op.snapshot()["blob"]
    snap = (time.perf_counter() - t1, len(blob) / 2**20)
    del blob
    t1, c1 = time.perf_counter(), time.process_time()
    firings += len(op.finish())
    elapsed += time.perf_counter() - t1
    cpu += time.process_time() - c1
    return RunResult("operator", args.records, elapsed, firings, samples, snap, cpu)


def run_bolt(args: argparse.Namespace, traced: bool) -> RunResult:
    bolt = MeanTemp() if args.agg == "builtin" else AvgTemp()
    col = NullCollector()
    bind_task(bolt, col, None)  # what the engine does
    from jstormpy.api.component import TopologyContext
    bolt.prepare({}, TopologyContext("bench", "avg", 1, 0, 0, input_tasks=(0,)))
    execute = bolt.execute
    samples = []
    t0, c0 = time.perf_counter(), time.process_time()
    for i, (key, ts, value) in enumerate(records(args.records, args.keys, args.rate,
                                                 args.lag)):
        execute(Tuple((key, ts, value), INDEX, "src", "default", 0))
        if i % args.sample_every == args.sample_every - 1:
            live = bolt.__dict__["_jw_rt"].op.window_count
            samples.append(_sample(i + 1, t0, traced, live))
    bolt.on_inputs_finished()
    return RunResult("bolt", args.records, time.perf_counter() - t0, col.tuples, samples,
                     cpu_seconds=time.process_time() - c0)


def batches(args: argparse.Namespace) -> Iterator[list[tuple[int, int, float]]]:
    """The same stream as :func:`records`, cut into channel batches of ``args.batch``."""
    it = records(args.records, args.keys, args.rate, args.lag)
    while True:
        rows = list(islice(it, args.batch))
        if not rows:
            return
        yield rows


def run_operator_batch(args: argparse.Namespace, traced: bool) -> RunResult:
    op = WindowOperator(SlidingWindows(SIZE_MS, SLIDE_MS), _aggregate(args),
                        slicing=None if args.slicing else False)
    lag = args.lag
    firings = 0
    max_ts = 0
    done = 0
    samples = []
    t0, c0 = time.perf_counter(), time.process_time()
    for rows in batches(args):
        keys, tss, values = zip(*rows, strict=True)
        # the watermark after each record, as the per-record run advances it (every
        # 1000 records to the maximum timestamp seen minus the lag)
        running = list(accumulate(tss, max, initial=max_ts))
        max_ts = running[-1]
        wms = [-math.inf] * len(tss)
        for j in range((999 - done) % 1000, len(tss), 1000):
            wms[j] = running[j + 1] - lag
        firings += len(op.process_batch(keys, tss, values, wms))
        before = done
        done += len(rows)
        if done // args.sample_every > before // args.sample_every:
            samples.append(_sample(done, t0, traced, op.window_count))
    firings += len(op.finish())
    return RunResult("operator, process_batch", args.records, time.perf_counter() - t0,
                     firings, samples, cpu_seconds=time.process_time() - c0)


def run_bolt_batch(args: argparse.Namespace, traced: bool) -> RunResult:
    bolt = MeanTemp() if args.agg == "builtin" else AvgTemp()
    col = NullCollector()
    bind_task(bolt, col, None)  # what the engine does
    from jstormpy.api.component import TopologyContext
    bolt.prepare({}, TopologyContext("bench", "avg", 1, 0, 0, input_tasks=(0,)))
    execute_batch = bolt.execute_batch
    tuple_cls = Tuple.bound(INDEX, "src", "default", 0)
    samples = []
    done = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for rows in batches(args):
        execute_batch(Batch(rows, INDEX, "src", "default", 0, tuple_cls))
        before = done
        done += len(rows)
        if done // args.sample_every > before // args.sample_every:
            live = bolt.__dict__["_jw_rt"].op.window_count
            samples.append(_sample(done, t0, traced, live))
    bolt.on_inputs_finished()
    return RunResult("bolt, execute_batch", args.records, time.perf_counter() - t0,
                     col.tuples, samples, cpu_seconds=time.process_time() - c0)


def report(res: RunResult, out: Callable[[str], Any]) -> None:
    cpu = (f"; CPU {res.cpu_seconds:.1f} s = {res.records / res.cpu_seconds:,.0f} "
           f"records per CPU second") if res.cpu_seconds else ""
    out(f"\n{res.name}: {res.records:,} records in {res.seconds:.1f} s = "
        f"{res.rate:,.0f} records/s{cpu}; {res.firings:,} firings "
        f"({res.firings / res.seconds:,.0f}/s)")
    if res.snapshot is not None:
        out(f"  snapshot() of the steady state: {res.snapshot[0]:.2f} s, "
            f"{res.snapshot[1]:.1f} MiB (not included in the rate)")
    out(f"  {'records':>10} {'elapsed s':>10} {'RSS MiB':>9} {'traced MiB':>11} {'live':>9}")
    for s in res.samples:
        traced = f"{s.traced_mb:11.1f}" if s.traced_mb is not None else f"{'-':>11}"
        out(f"  {s.records:>10,} {s.seconds:>10.1f} {s.rss_mb:>9.1f} {traced} {s.live:>9,}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=10_000,
                        help="records per event-time second (default 10k = 1/key/s: 2M "
                        "records span 200 s of event time; state is steady after 60 s)")
    parser.add_argument("--lag", type=int, default=2_000, help="out-of-orderness, ms")
    parser.add_argument("--sample-every", type=int, default=200_000)
    parser.add_argument("--only", choices=["operator", "bolt"])
    parser.add_argument("--api", choices=["tuple", "batch", "both"], default="tuple",
                        help="feed records one by one (process / execute), in channel "
                        "batches (process_batch / execute_batch), or both")
    parser.add_argument("--agg", choices=["user", "builtin"], default="user",
                        help="user: create/add/merge/result written in Python (default); "
                        "builtin: the built-in Mean aggregate (window/aggregates.py)")
    parser.add_argument("--batch", type=int, default=512,
                        help="records per batch with --api batch (the engine's default "
                        "Config.batch_size)")
    parser.add_argument("--no-slicing", dest="slicing", action="store_false",
                        help="operator: one accumulator per window (Flink's layout)")
    parser.add_argument("--json", action="store_true",
                        help="also print one BENCH_JSON line (for bench/run.py)")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also trace allocations (slower; separate pass)")
    args = parser.parse_args(argv)
    out = sys.stdout.write
    out(f"sliding {SIZE_MS // 1000} s / {SLIDE_MS // 1000} s, {args.keys:,} keys, "
        f"{args.rate:,} records per event-time second, lag {args.lag} ms, "
        f"python {sys.version.split()[0]}\n")
    runners = []
    if args.api in ("tuple", "both"):
        runners += [("operator", "operator", run_operator), ("bolt", "bolt", run_bolt)]
    if args.api in ("batch", "both"):
        runners += [("operator", "operator_batch", run_operator_batch),
                    ("bolt", "bolt_batch", run_bolt_batch)]
    summary: dict[str, float] = {}
    for kind, name, run in runners:
        if args.only and kind != args.only:
            continue
        gc.collect()
        result = run(args, traced=False)
        summary[f"{name}_records_per_s"] = round(result.rate)
        report(result, lambda s: out(s + "\n"))
        if args.tracemalloc:
            gc.collect()
            tracemalloc.start()
            res = run(args, traced=True)
            tracemalloc.stop()
            report(RunResult(res.name + " (tracemalloc pass; slower)", res.records,
                             res.seconds, res.firings, res.samples, res.snapshot,
                             res.cpu_seconds),
                   lambda s: out(s + "\n"))
    if args.json:
        # the bolt figure first: it is what a topology sees
        ordered = dict(sorted(summary.items(), key=lambda kv: not kv[0].startswith("bolt")))
        print("BENCH_JSON " + json.dumps(ordered), flush=True)


if __name__ == "__main__":
    main()
