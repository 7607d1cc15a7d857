"""Open windows in the memory vs the RocksDB state store (docs/state-stores.md, "Windows"):
``--keys`` keys with one open tumbling window each, peak RSS and records/s.

Each store runs in its own child process (so peak RSS is that store's alone), through
the engine's own pieces: a :class:`~jstormpy.window.WindowedBolt` counting per key in
1-hour event-time tumbling windows, with the task's store installed as the worker does
(``use_state_store``; with RocksDB the open windows are its column family and only a
timer index stays in RAM). Phases:

1. *open*: one record for each of ``--keys`` keys (one open window each; none fires);
2. *update*: ``--updates`` more records on random keys (read-modify-write of a window);
3. *checkpoint*: the task's barrier path (``capture`` of the managed states and the
   bolt's snapshot, then ``serialise``), its pause and bytes;
4. *fire*: the watermark passes the windows' end: every window fires once (checked).

Reported per store: records/s of each phase, peak RSS of the child (MB), RSS growth over
the empty task, the database's bytes on disk, the checkpoint's pause and bytes.

    python bench/window_state_bench.py [--keys 1000000] [--updates 500000]
                                       [--stores memory,rocksdb] [--json]
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
    """Counts what the bolt emits (no list: RSS is the windows')."""

    def __init__(self) -> None:
        self.fired = 0
        self.total = 0

    def emit(self, values: Any, stream: str = "default") -> None:
        if stream == "default":
            self.fired += 1
            self.total += values[3]

    def emit_watermark(self, watermark_ms: float) -> None:
        pass


def run_one(kind: str, keys: int, updates: int, seed: int) -> dict[str, Any]:
    """One store, in this process."""
    from jstormpy.api.component import (
        TopologyContext,
        Tuple,
        bind_task,
        managed_states,
        use_state_store,
    )
    from jstormpy.runtime.snapshots import capture, release, serialise
    from jstormpy.state_store import RocksDBStore, open_store
    from jstormpy.window import TumblingWindows, WindowedBolt

    class CountPerKey(WindowedBolt):
        window = TumblingWindows(HOUR_MS)
        timestamp = "ts"
        key = "k"

        def create(self) -> int:
            return 0

        def add(self, acc: int, tup: Any) -> int:
            return acc + 1

        def merge(self, a: int, b: int) -> int:
            return a + b

        def result(self, key: Any, window: Any, acc: int) -> int:
            return acc

    index = {"k": 0, "ts": 1}
    with tempfile.TemporaryDirectory(prefix="jstorm-window-bench-") as tmp:
        db_dir = Path(tmp) / "task-1"
        store = open_store(kind, db_dir, MAX_P)
        bolt = CountPerKey()
        col = _Collector()
        bind_task(bolt, col, None)  # type: ignore[arg-type]  # emit and watermarks only
        use_state_store(bolt, store)
        bolt.prepare({}, TopologyContext(topology="b", component="w", task_id=1,
                                         task_index=0, worker_id=0, input_tasks=(1,)))
        base_rss = process_rss_mb()
        execute = bolt.execute
        t0 = time.perf_counter()
        for i in range(keys):  # keys made on the fly: the bench holds no list of them
            execute(Tuple((f"user-{i}", i % 1000), index, "src", "default", 1))
        open_s = time.perf_counter() - t0
        rng = random.Random(seed)
        t0 = time.perf_counter()
        for j in range(updates):
            execute(Tuple((f"user-{rng.randrange(keys)}", 1000 + j % 1000), index, "src",
                          "default", 1))
        update_s = time.perf_counter() - t0
        open_rss = process_rss_mb()
        t0 = time.perf_counter()
        view = capture({"states": managed_states(bolt), "custom": bolt.snapshot()})
        pause_ms = (time.perf_counter() - t0) * 1000.0
        data = serialise(view)
        release(view)
        disk = disk_bytes(db_dir) if db_dir.exists() else 0
        t0 = time.perf_counter()
        bolt.on_watermark(float(HOUR_MS))
        fire_s = time.perf_counter() - t0
        if col.fired != keys or col.total != keys + updates:
            raise SystemExit(f"{kind}: {col.fired} windows fired counting {col.total}, "
                             f"expected {keys} counting {keys + updates}")
        if isinstance(store, RocksDBStore):
            store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"store": kind, "keys": keys, "updates": updates,
            "open_rec_s": round(keys / open_s), "update_rec_s": round(updates / update_s),
            "fire_windows_s": round(keys / fire_s),
            "peak_rss_mb": round(rss_mb, 1), "rss_growth_mb": round(open_rss - base_rss, 1),
            "disk_bytes": disk, "checkpoint_pause_ms": round(pause_ms, 1),
            "checkpoint_bytes": len(data)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=500_000)
    ap.add_argument("--stores", default="memory,rocksdb")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.keys, args.updates, args.seed)))
        return 0
    results = run_per_store(__file__, args.stores.split(","), "--keys", str(args.keys),
                            "--updates", str(args.updates), "--seed", str(args.seed))
    if results is None:
        return 1
    print(f"{'store':8} {'open rec/s':>10} {'update/s':>9} {'fire/s':>9} {'peak RSS':>9} "
          f"{'growth':>7} {'disk MB':>8} {'pause ms':>9} {'ckpt MB':>8}")
    for r in results.values():
        print(f"{r['store']:8} {r['open_rec_s']:>10,} {r['update_rec_s']:>9,} "
              f"{r['fire_windows_s']:>9,} {r['peak_rss_mb']:>9.1f} {r['rss_growth_mb']:>7.1f} "
              f"{r['disk_bytes'] / 1e6:>8.1f} {r['checkpoint_pause_ms']:>9.1f} "
              f"{r['checkpoint_bytes'] / 1e6:>8.1f}")
    if args.json:
        emit_json({"keys": args.keys, "updates": args.updates, "stores": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
