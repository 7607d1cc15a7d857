"""Memory vs RocksDB state store (docs/state-stores.md): keyed throughput, RSS, disk, and
the checkpoint of ``--keys`` keys.

Each store runs in its own child process (so peak RSS is that store's alone), through
the engine's own pieces: the state is what ``self.state("counts")`` returns with that
store (:func:`jstormpy.state_store.open_store`), and the checkpoint is the task's
barrier path (``jstormpy.runtime.snapshots.capture`` on the "task thread", then
``serialise``, as the snapshot thread does). Phases:

1. *load*: insert ``--keys`` keys (``d[key] = 0``);
2. *update*: ``--updates`` read-modify-writes on random keys (``d[k] = d.get(k, 0) + 1``),
   the word-count pattern;
3. *checkpoint*: the pause on the task thread (capture) and the serialisation time, with
   the snapshot's bytes.

Reported per store: load and update rates (ops/s), peak RSS of the child (MB), bytes on
disk of the database, checkpoint pause / serialise ms and snapshot bytes.

    python bench/state_store_bench.py [--keys 1000000] [--updates 1000000]
                                      [--stores memory,rocksdb] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json  # noqa: E402

MAX_P = 128


def _disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_one(kind: str, keys: int, updates: int, seed: int) -> dict[str, Any]:
    """One store, in this process."""
    from jstormpy.runtime.snapshots import capture, release, serialise
    from jstormpy.state_store import open_store

    with tempfile.TemporaryDirectory(prefix="jstorm-store-bench-") as tmp:
        db_dir = Path(tmp) / "task-1"
        store = open_store(kind, db_dir, MAX_P)
        d = store.open("counts", None, None)
        # keys are made on the fly: the bench holds no list of them (RSS is the store's)
        t0 = time.perf_counter()
        for i in range(keys):
            d[f"user-{i}"] = 0
        load_s = time.perf_counter() - t0
        rng = random.Random(seed)
        t0 = time.perf_counter()
        get = d.get
        for _ in range(updates):
            k = f"user-{rng.randrange(keys)}"
            d[k] = get(k, 0) + 1
        update_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        view = capture({"states": {"counts": d}})
        pause_ms = (time.perf_counter() - t0) * 1000.0
        t0 = time.perf_counter()
        data = serialise(view)
        serialise_ms = (time.perf_counter() - t0) * 1000.0
        release(view)
        disk = _disk_bytes(db_dir) if db_dir.exists() else 0
        total = sum(d.values()) if keys <= 2_000_000 else None
        store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if total is not None and total != updates:
        raise SystemExit(f"{kind}: the counts add up to {total}, not {updates}")
    return {"store": kind, "keys": keys, "updates": updates,
            "load_ops_s": round(keys / load_s), "update_ops_s": round(updates / update_s),
            "peak_rss_mb": round(rss_mb, 1), "disk_bytes": disk,
            "checkpoint_pause_ms": round(pause_ms, 1),
            "checkpoint_serialise_ms": round(serialise_ms, 1),
            "snapshot_bytes": len(data)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=1_000_000)
    ap.add_argument("--stores", default="memory,rocksdb")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.keys, args.updates, args.seed)))
        return 0
    results = {}
    for kind in args.stores.split(","):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind,
                               "--keys", str(args.keys), "--updates", str(args.updates),
                               "--seed", str(args.seed)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"# {kind}: {results[kind]}", file=sys.stderr, flush=True)
    print(f"{'store':8} {'load/s':>10} {'update/s':>10} {'RSS MB':>8} {'disk MB':>8} "
          f"{'pause ms':>9} {'serialise ms':>12} {'snapshot MB':>11}")
    for r in results.values():
        print(f"{r['store']:8} {r['load_ops_s']:>10,} {r['update_ops_s']:>10,} "
              f"{r['peak_rss_mb']:>8.1f} {r['disk_bytes'] / 1e6:>8.1f} "
              f"{r['checkpoint_pause_ms']:>9.1f} {r['checkpoint_serialise_ms']:>12.1f} "
              f"{r['snapshot_bytes'] / 1e6:>11.1f}")
    if args.json:
        emit_json({"keys": args.keys, "updates": args.updates, "stores": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
