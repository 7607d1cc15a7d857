"""Word-count throughput on Spark (workers in barrier tasks) vs the same topology on
LocalCluster, and the Spark job's start-up time.

FileSpout over a generated corpus → split → count (managed state, final counts emitted when
the input ends) → FileSink, exactly-once, checkpoints every second. Figures:

* session: creating the SparkSession (JVM, and executor JVMs for local-cluster);
* start-up: ``submit()`` until every worker registered with the TM and runs;
* run: ``submit()`` until drained (all output committed); words/s = corpus words / run,
  and corpus words / (run - start-up).

Usage::

    python bench/spark_bench.py [--master 'local-cluster[2,1,1024]'] [--files 4]
        [--lines 20000] [--workers 2] [--skip-local]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jstormpy import Bolt, Config, FileSink, TopologyBuilder, read_committed  # noqa: E402
from tests.integration.spark_topologies import (  # noqa: E402
    PacedFileSpout,
    Split,
    write_corpus,
)


class FinalCount(Bolt):
    """Word count with managed state; emits (word, count) once the input is finished."""

    outputs = ("word", "count")

    def prepare(self, conf, context):
        self.counts = self.state("counts")

    def execute(self, tup):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1

    def on_inputs_finished(self):
        for word, n in sorted(self.counts.items()):
            self.emit((word, n))


def build(out: Path, corpus: Path, workers: int) -> Any:
    b = TopologyBuilder(f"spark-bench-{out.name}")
    b.set_spout("lines", PacedFileSpout(str(corpus / "*.txt"), batch=256), parallelism=workers)
    b.set_bolt("split", Split, parallelism=workers).shuffle_grouping("lines")
    b.set_bolt("count", FinalCount, parallelism=workers).fields_grouping("split", ["word"])
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("count")
    return b.build()


def run(cluster: Any, topology: Any, workers: int) -> tuple[float, float]:
    t0 = time.monotonic()
    handle = cluster.submit(topology, Config(workers=workers, log_level="WARNING"))
    started = None
    while started is None:
        ws = handle.workers()
        if len(ws) == workers and all(w.alive for w in ws) \
                and handle.status()["state"] in ("running", "drained"):
            started = time.monotonic() - t0
        else:
            time.sleep(0.01)
    handle.wait(timeout=1800, poll_s=0.02)
    return started, time.monotonic() - t0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--master", default="local-cluster[2,1,1024]")
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--lines", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--skip-local", action="store_true")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    expected = write_corpus(tmp / "corpus", files=args.files, lines=args.lines)
    words = sum(expected.values())
    print(f"corpus: {args.files} files, {words} words, {args.workers} workers")
    rows = []
    if not args.skip_local:
        from jstormpy import LocalCluster

        with LocalCluster(home=tmp / "home-local") as cluster:
            start, took = run(cluster, build(tmp / "local", tmp / "corpus", args.workers),
                              args.workers)
        assert {r["word"]: r["count"] for r in read_committed(tmp / "local")} == dict(expected)
        rows.append(("LocalCluster", 0.0, start, took))
    from jstormpy.deploy.spark import SparkCluster, create_session

    t0 = time.monotonic()
    spark = create_session(args.master, app_name="jstormpy-bench",
                           conf={"spark.ui.enabled": "false"})
    with SparkCluster(spark, home=tmp / "home-spark") as cluster:
        session = time.monotonic() - t0
        spark.sparkContext.parallelize([0], 1).count()  # executors up before timing submit
        start, took = run(cluster, build(tmp / "spark", tmp / "corpus", args.workers),
                          args.workers)
    spark.stop()
    assert {r["word"]: r["count"] for r in read_committed(tmp / "spark")} == dict(expected)
    rows.append((f"Spark {args.master}", session, start, took))
    print(f"{'launcher':<32} {'session s':>9} {'start-up s':>10} {'run s':>7} {'words/s':>10} "
          f"{'after start-up':>14}")
    for name, sess, start, took in rows:
        print(f"{name:<32} {sess:>9.1f} {start:>10.2f} {took:>7.2f} {words / took:>10.0f} "
              f"{words / max(took - start, 1e-9):>14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
