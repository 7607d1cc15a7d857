"""Sustained backpressure: a bolt ~10x slower than its spout, for a fixed time.

Prints worker memory (RSS from the OS: baseline after warm-up vs peak), the bottleneck's
throughput per second (mean and coefficient of variation), how often the spout was
throttled, and checkpoint durations while the topology is overloaded.

    python bench/backpressure.py [--seconds 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import psutil

from jstormpy import Bolt, Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder


class Slow(Bolt):
    """~0.2 ms per tuple: about 5k tuples/s, ~10x below what the spout can emit here."""

    outputs = ("key", "seq", "value")

    def execute(self, tup):
        end = time.perf_counter() + 0.0002
        while time.perf_counter() < end:  # CPU work, like a real slow bolt
            pass
        self.emit(tup.values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--queue-capacity", type=int, default=Config().queue_capacity,
                        help="items a task inbox holds: bounds the data ahead of a barrier")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("JSTORM_HOME", tempfile.mkdtemp(prefix="jstorm-bench-"))
    out = tempfile.mkdtemp(prefix="bp-bench-")
    b = TopologyBuilder("bench-backpressure")
    b.set_spout("events", SequenceSpout(keys=16, per_key=10_000_000, batch=500), parallelism=1)
    b.set_bolt("slow", Slow, parallelism=1).shuffle_grouping("events")
    b.set_bolt("out", FileSink(out), parallelism=1).shuffle_grouping("slow")
    config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=1000,
                    heartbeat_interval_ms=100, queue_capacity=args.queue_capacity)
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), config)
        while handle.status()["state"] != "running":
            time.sleep(0.05)
        procs = [psutil.Process(w.pid) for w in handle.workers()]
        time.sleep(args.warmup)
        baseline = sum(p.memory_info().rss for p in procs)
        peak = baseline
        rates = []
        last = handle.metrics()["components"]["slow"]["executed"]
        t_end = time.monotonic() + args.seconds
        while time.monotonic() < t_end:
            time.sleep(1.0)
            peak = max(peak, sum(p.memory_info().rss for p in procs))
            executed = handle.metrics()["components"]["slow"]["executed"]
            rates.append(executed - last)
            last = executed
        status = handle.status()
    done = [c["duration_ms"] for c in status["checkpoints"] if c["status"] == "completed"]
    done.sort()
    result = {
        "seconds": args.seconds, "queue_capacity": args.queue_capacity,
        "rss_baseline_mb": baseline / 1e6, "rss_peak_mb": peak / 1e6,
        "rss_growth_mb": (peak - baseline) / 1e6,
        "bottleneck_tuples_per_s": statistics.mean(rates) if rates else 0.0,
        "throughput_cv": statistics.pstdev(rates) / statistics.mean(rates) if rates else None,
        "throttle_count": status["backpressure"]["throttle_count"],
        "checkpoints_completed": len(done),
        "checkpoint_p50_ms": done[len(done) // 2] if done else None,
        "checkpoint_p99_ms": done[min(len(done) - 1, int(len(done) * 0.99))] if done else None,
    }
    print(f"bolt ~10x slower than its spout, {args.seconds:.0f} s after {args.warmup:.0f} s "
          f"warm-up: RSS {result['rss_baseline_mb']:.0f} MB -> peak "
          f"{result['rss_peak_mb']:.0f} MB (+{result['rss_growth_mb']:.1f} MB); bottleneck "
          f"{result['bottleneck_tuples_per_s']:.0f} tuples/s (CV "
          f"{result['throughput_cv'] or 0:.2f}); spout throttled {result['throttle_count']}x; "
          f"{len(done)} checkpoints, p50 {result['checkpoint_p50_ms']} ms, "
          f"p99 {result['checkpoint_p99_ms']} ms", file=sys.stderr)
    if args.json:
        print("BENCH_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
