"""Dataflow join buffers in the memory vs the RocksDB state store (docs/state-stores.md,
"Dataflow joins and count windows in the store"): ``--rows`` buffered rows, RSS and
records/s.

Each store and join runs in its own child process (so peak RSS is that run's alone),
through the engine's own pieces: the compiled bolt of ``KeyedStream.join(...,
window=TumblingWindows(1 h))`` or ``.interval_join(..., -1 h, +1 h)``, with the task's
store installed as the worker does (``use_state_store``; with RocksDB the buffers are
its column family and only the timer index stays in RAM). Phases:

1. *buffer*: ``--rows`` left rows over ``--keys`` keys, all in one window (none pairs:
   no right row yet, and the watermark stays below the window's end);
2. *probe*: ``--probes`` right rows on random keys, each pairing with every left row of
   its key (the pairs are counted and checked);
3. *checkpoint*: the task's barrier path (``capture`` of the managed states, then
   ``serialise``), its pause and bytes;
4. *close*: end of input: the watermark goes to +inf and the buffers empty (checked).

Reported per run: records/s of each phase, peak RSS of the child (MB), RSS growth over
the empty task after buffering, the database's bytes on disk, the checkpoint's pause and
bytes, the entries of the in-RAM timer index.

    python bench/join_state_bench.py [--rows 1000000] [--keys 100000] [--probes 10000]
                                     [--joins window,interval] [--stores memory,rocksdb]
                                     [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import disk_bytes, emit_json, process_rss_mb, run_per_store  # noqa: E402

MAX_P = 128
HOUR_MS = 3_600_000


class _Collector:
    """Counts the pairs the bolt emits (no list: RSS is the buffers')."""

    def __init__(self) -> None:
        self.pairs = 0

    def emit(self, values: Any, stream: str = "default") -> None:
        self.pairs += 1

    def emit_watermark(self, watermark_ms: float) -> None:
        pass


def run_one(child: str, rows: int, keys: int, probes: int, seed: int) -> dict[str, Any]:
    """One join over one store (``child``: ``<join>:<store>``), in this process."""
    from jstormpy.api.component import (
        TopologyContext,
        Tuple,
        bind_task,
        managed_states,
        use_state_store,
    )
    from jstormpy.dataflow.interval_join import IntervalJoinBolt
    from jstormpy.dataflow.records import KEYED_FIELDS
    from jstormpy.dataflow.window_join import WindowJoinBolt
    from jstormpy.runtime.snapshots import capture, release, serialise
    from jstormpy.state_store import RocksDBStore, open_store
    from jstormpy.window import TumblingWindows

    join, kind = child.split(":")
    sides = {("left", "default"): 0, ("right", "default"): 1}
    ts = (lambda r: r["ts"], lambda r: r["ts"])
    bolt: Any = (WindowJoinBolt(sides, TumblingWindows(HOUR_MS), ts) if join == "window"
                 else IntervalJoinBolt(sides, -HOUR_MS, HOUR_MS, ts))
    index = {f: i for i, f in enumerate(KEYED_FIELDS)}
    with tempfile.TemporaryDirectory(prefix="jstorm-join-bench-") as tmp:
        db_dir = Path(tmp) / "task-1"
        store = open_store(kind, db_dir, MAX_P)
        col = _Collector()
        bind_task(bolt, col, None)  # type: ignore[arg-type]  # emit only
        use_state_store(bolt, store)
        bolt.prepare({}, TopologyContext(topology="b", component="j", task_id=1,
                                         task_index=0, worker_id=0, input_tasks=(1, 2)))
        base_rss = process_rss_mb()
        execute = bolt.execute
        t0 = time.perf_counter()
        for i in range(rows):  # rows made on the fly: the bench holds no list of them
            item = {"id": i, "ts": i % 1000, "user": f"user-{i % keys}"}
            execute(Tuple((item["user"], item), index, "left", "default", 1))
        buffer_s = time.perf_counter() - t0
        buffered_rss = process_rss_mb()
        rng = random.Random(seed)
        per_key = [rows // keys + (1 if k < rows % keys else 0) for k in range(keys)]
        want = 0
        t0 = time.perf_counter()
        for j in range(probes):
            k = rng.randrange(keys)
            want += per_key[k]
            item = {"id": j, "ts": 500, "user": f"user-{k}"}
            execute(Tuple((item["user"], item), index, "right", "default", 2))
        probe_s = time.perf_counter() - t0
        if col.pairs != want:
            raise SystemExit(f"{child}: {col.pairs} pairs, expected {want}")
        timers = bolt._df_clock.timer_count()
        t0 = time.perf_counter()
        view = capture({"states": managed_states(bolt), "custom": None})
        pause_ms = (time.perf_counter() - t0) * 1000.0
        data = serialise(view)
        release(view)
        disk = disk_bytes(db_dir) if db_dir.exists() else 0
        t0 = time.perf_counter()
        bolt.on_inputs_finished()
        close_s = time.perf_counter() - t0
        if bolt.buffered_records:
            raise SystemExit(f"{child}: {bolt.buffered_records} rows left after the close")
        if isinstance(store, RocksDBStore):
            store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"join": join, "store": kind, "rows": rows, "keys": keys, "probes": probes,
            "buffer_rec_s": round(rows / buffer_s), "probe_rec_s": round(probes / probe_s),
            "close_s": round(close_s, 2), "peak_rss_mb": round(rss_mb, 1),
            "rss_growth_mb": round(buffered_rss - base_rss, 1), "disk_bytes": disk,
            "checkpoint_pause_ms": round(pause_ms, 1), "checkpoint_bytes": len(data),
            "timer_entries": timers}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--probes", type=int, default=10_000)
    ap.add_argument("--joins", default="window,interval")
    ap.add_argument("--stores", default="memory,rocksdb")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.rows, args.keys, args.probes, args.seed)))
        return 0
    runs = [f"{j}:{s}" for j in args.joins.split(",") for s in args.stores.split(",")]
    results = run_per_store(__file__, runs, "--rows", str(args.rows), "--keys",
                            str(args.keys), "--probes", str(args.probes), "--seed",
                            str(args.seed))
    if results is None:
        return 1
    print(f"{'join':8} {'store':8} {'buffer/s':>9} {'probe/s':>8} {'close s':>8} "
          f"{'peak RSS':>9} {'growth':>7} {'disk MB':>8} {'pause ms':>9} {'ckpt MB':>8} "
          f"{'timers':>7}")
    for r in results.values():
        print(f"{r['join']:8} {r['store']:8} {r['buffer_rec_s']:>9,} {r['probe_rec_s']:>8,} "
              f"{r['close_s']:>8.2f} {r['peak_rss_mb']:>9.1f} {r['rss_growth_mb']:>7.1f} "
              f"{r['disk_bytes'] / 1e6:>8.1f} {r['checkpoint_pause_ms']:>9.1f} "
              f"{r['checkpoint_bytes'] / 1e6:>8.1f} {r['timer_entries']:>7,}")
    if args.json:
        emit_json({"rows": args.rows, "keys": args.keys, "probes": args.probes,
                   "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
