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

``--incremental`` measures incremental native checkpoints of the RocksDB store instead
(``Config(state_store="rocksdb", incremental_checkpoints=True)``): ``--keys`` keys, then
``--intervals`` checkpoint intervals each changing ``--changed`` (a fraction, 1 % by
default) of the keys at random; every checkpoint goes the task's way (capture with the
native checkpoint on the "task thread", then the SST upload to a ``file://`` backend,
the snapshot and its ``.refs`` as the snapshot thread does, and retention keeping one).
Reported: the bytes each incremental checkpoint writes against the first (full) one and
against the memory format's snapshot of the same keys, checkpoint duration p50/p99 (the
task-thread pause plus the upload) and the task-thread pause p50/p99/max. The snapshot
thread's part runs on a thread of its own while the "task thread" goes on reading random
keys: the longest gap between two of its reads (the GIL or the database held by the
snapshot thread) is reported as the stall p50/p99/max, beside the longest gap in one
second of reads with no snapshot running (what a loaded machine's scheduling alone
costs).
``--value-bytes N`` writes values of N incompressible bytes (as
``bench/big_state_bench.py``) instead of int counters. Before each checkpoint
the bench waits until RocksDB's flushes and compactions are done (an interval long
enough for them; ``--no-settle``: checkpoints back to back, compactions straddling
them). ``--rocksdb-options`` (JSON, setter -> arguments) changes the store's RocksDB
options for experiments, e.g. scaled-down memtable and level sizes, or RocksDB's own
level-0 trigger (docs/performance.md, "Compaction settings and incremental checkpoint
bytes").

    python bench/state_store_bench.py [--keys 1000000] [--updates 1000000]
                                      [--stores memory,rocksdb] [--json]
    python bench/state_store_bench.py --incremental [--keys 1000000] [--intervals 10]
                                      [--changed 0.01] [--value-bytes 160]
                                      [--no-settle] [--rocksdb-options JSON] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import disk_bytes, emit_json, run_per_store  # noqa: E402

MAX_P = 128


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
        disk = disk_bytes(db_dir) if db_dir.exists() else 0
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


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def override_options(overrides: dict[str, Any]) -> None:
    """Experiments: after :func:`jstormpy.state_store.store_options` builds a database's
    Options, call ``opts.<setter>(*args)`` for each ``setter: args`` of ``overrides``
    (rocksdict's Options setters, e.g. ``{"set_level_zero_file_num_compaction_trigger":
    [8]}``; ``"set_compaction_style": ["DBCompactionStyle.universal()"]`` and
    ``"set_universal_compaction_options": {"max_size_amplification_percent": 50}`` are
    spelled out as rocksdict objects)."""
    import rocksdict

    from jstormpy import state_store

    built = state_store.store_options

    def arg(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("DBCompactionStyle."):
            return getattr(rocksdict.DBCompactionStyle, value.split(".")[1].rstrip("()"))()
        return value

    def options(rd: Any, *positional: Any, **named: Any) -> Any:
        opts = built(rd, *positional, **named)  # whatever store_options takes, as it came
        for setter, args in overrides.items():
            if setter == "set_universal_compaction_options":
                uni = rd.UniversalCompactOptions()
                for name, given in args.items():
                    setattr(uni, name, getattr(rd.UniversalCompactionStopStyle, given)()
                            if name == "stop_style" else given)
                opts.set_universal_compaction_options(uni)
            else:
                getattr(opts, setter)(*[arg(a) for a in args])
        return opts

    state_store.store_options = options  # type: ignore[assignment]


SETTLE_TIMEOUT_S = 120.0
BUSY = ("rocksdb.mem-table-flush-pending", "rocksdb.compaction-pending",
        "rocksdb.num-running-flushes", "rocksdb.num-running-compactions")


def settle(cf: Any) -> float:
    """Wait until RocksDB has no flush or compaction pending or running in column family
    ``cf`` (at most SETTLE_TIMEOUT_S); the seconds waited."""
    t0 = time.perf_counter()
    while any(cf.property_int_value(p) for p in BUSY):
        if time.perf_counter() - t0 > SETTLE_TIMEOUT_S:
            raise SystemExit(f"RocksDB still compacting after {SETTLE_TIMEOUT_S:.0f} s")
        time.sleep(0.02)
    return time.perf_counter() - t0


def run_incremental(keys: int, intervals: int, changed: float, seed: int,
                    value_bytes: int = 0, settled: bool = True) -> dict[str, Any]:
    """Incremental native checkpoints of one RocksDB task database, in this process.
    ``value_bytes`` > 0: each value is that many incompressible bytes (new ones per
    update), as in ``bench/big_state_bench.py``; 0: an int counter. ``settled``: before
    each checkpoint, wait until RocksDB's flushes and compactions are done (:func:`settle`:
    an interval long enough for compaction to keep up, as with the 20M-key job's 5 s;
    the bytes then do not depend on the machine's load)."""
    from jstormpy.runtime.snapshots import capture, release, serialise, upload_native
    from jstormpy.state_backends import open_backend
    from jstormpy.state_backends.shared_files import encode_refs
    from jstormpy.state_store import RocksDBStore

    buffer = random.Random(seed + 1).randbytes(4 << 20) if value_bytes else b""

    def value(i: int, version: int) -> Any:
        if not value_bytes:
            return version
        at = (i * 7919 + version * 104729) % (len(buffer) - value_bytes)
        return buffer[at:at + value_bytes]

    with tempfile.TemporaryDirectory(prefix="jstorm-inc-bench-") as tmp:
        store = RocksDBStore(Path(tmp) / "task-1", MAX_P)
        store.native_checkpoints = True
        store.key_groups = range(0, MAX_P)
        backend = open_backend(f"file://{tmp}/ckpt")
        d: Any = store.open("counts", None, None)
        for i in range(keys):
            d[f"user-{i}"] = value(i, 0)
        rng = random.Random(seed)
        reads = random.Random(seed + 1)
        idle = threading.Thread(target=time.sleep, args=(1.0,))  # the machine's own gaps
        idle.start()
        idle_stall = 0.0
        last = time.perf_counter()
        while idle.is_alive():
            d.get(f"user-{reads.randrange(keys)}")
            now = time.perf_counter()
            idle_stall = max(idle_stall, now - last)
            last = now
        rows = []
        for cid in range(1, intervals + 2):
            t0 = time.perf_counter()
            if cid > 1:
                for _ in range(int(keys * changed)):
                    i = rng.randrange(keys)
                    k = f"user-{i}"
                    old = d.get(k, 0)  # a read-modify-write, as a keyed bolt does
                    d[k] = old + 1 if not value_bytes else value(i, cid)
            update_s = time.perf_counter() - t0
            if settled:
                store.flush()
                settle(d.cf)
            level0 = d.cf.property_int_value("rocksdb.num-files-at-level0")
            t0 = time.perf_counter()
            view = capture({"states": {"counts": d}})
            pause_ms = (time.perf_counter() - t0) * 1000.0
            done: dict[str, Any] = {}

            def snapshot_thread(view: Any = view, cid: int = cid,
                                done: dict[str, Any] = done) -> None:
                try:
                    done["upload"] = upload_native(view, backend, task_id=1,
                                                   checkpoint_id=cid, generation=1,
                                                   attempt="bench")
                    done["data"] = serialise(view)
                except BaseException as exc:  # reported on the main thread
                    done["error"] = exc
                finally:
                    release(view)

            worker = threading.Thread(target=snapshot_thread)
            worker.start()
            stall = 0.0
            last = time.perf_counter()
            while worker.is_alive():  # the task thread reads on meanwhile
                d.get(f"user-{reads.randrange(keys)}")
                now = time.perf_counter()
                stall = max(stall, now - last)
                last = now
            worker.join()
            if "error" in done:
                raise done["error"]
            shared, written = done["upload"]
            data = done["data"]
            handle = backend.put_snapshot(cid, 1, data, 1, "bench", refs=encode_refs(shared))
            duration_ms = (time.perf_counter() - t0) * 1000.0
            backend.create_metadata(cid, {"tasks": {"1": {"handle": handle}}})
            backend.garbage_collect(keep=1)
            rows.append({"cid": cid, "bytes": written + len(data), "pause_ms": pause_ms,
                         "stall_ms": stall * 1000.0,
                         "duration_ms": duration_ms, "sst_files": len(shared),
                         "update_ops_s": int(keys * changed / update_s),
                         "level0_files": level0})
        # the memory format's snapshot of the same keys (what every checkpoint wrote before)
        memory_bytes = len(pickle.dumps(dict(d.items()), protocol=pickle.HIGHEST_PROTOCOL))
        disk = disk_bytes(Path(tmp) / "task-1")
        store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    full, inc = rows[0], rows[1:]
    inc_bytes = [r["bytes"] for r in inc]
    return {"value_bytes": value_bytes, "inc_bytes_p99": _pct(inc_bytes, 0.99),
            "inc_vs_full_mean": round(sum(inc_bytes) / len(inc_bytes) / full["bytes"], 4),
            "inc_vs_full_p99": round(_pct(inc_bytes, 0.99) / full["bytes"], 4),
"keys": keys, "intervals": intervals, "changed": changed,
            "full_bytes": full["bytes"], "full_duration_ms": round(full["duration_ms"], 1),
            "memory_format_bytes": memory_bytes, "disk_bytes": disk,
            "inc_bytes_p50": _pct(inc_bytes, 0.5), "inc_bytes_max": max(inc_bytes),
            "inc_bytes_mean": round(sum(inc_bytes) / len(inc_bytes)),
            "inc_vs_full_p50": round(_pct(inc_bytes, 0.5) / full["bytes"], 4),
            "inc_vs_memory_format_p50": round(_pct(inc_bytes, 0.5) / memory_bytes, 4),
            "duration_ms_p50": round(_pct([r["duration_ms"] for r in inc], 0.5), 1),
            "duration_ms_p99": round(_pct([r["duration_ms"] for r in inc], 0.99), 1),
            "pause_ms_p50": round(_pct([r["pause_ms"] for r in inc], 0.5), 1),
            "pause_ms_p99": round(_pct([r["pause_ms"] for r in inc], 0.99), 1),
            "pause_ms_max": round(max(r["pause_ms"] for r in inc), 1),
            "stall_ms_p50": round(_pct([r["stall_ms"] for r in inc], 0.5), 1),
            "stall_ms_p99": round(_pct([r["stall_ms"] for r in inc], 0.99), 1),
            "stall_ms_max": round(max(r["stall_ms"] for r in inc), 1),
            "stall_ms_idle": round(idle_stall * 1000.0, 1),
            "update_ops_s_p50": _pct([r["update_ops_s"] for r in inc], 0.5),
            "update_ops_s_min": min(r["update_ops_s"] for r in inc),
            "level0_files_max": max(r["level0_files"] for r in rows),
            "peak_rss_mb": round(rss_mb, 1), "per_checkpoint": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=1_000_000)
    ap.add_argument("--stores", default="memory,rocksdb")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    ap.add_argument("--incremental", action="store_true",
                    help="incremental native checkpoints of the RocksDB store")
    ap.add_argument("--intervals", type=int, default=10)
    ap.add_argument("--changed", type=float, default=0.01,
                    help="fraction of the keys changed per interval (--incremental)")
    ap.add_argument("--value-bytes", type=int, default=0,
                    help="--incremental: values of this many random bytes (0: int counters)")
    ap.add_argument("--rocksdb-options", default="",
                    help="experiments: JSON {setter: [args]} applied to the store's RocksDB "
                         "Options after store_options()")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="--incremental: do not wait for RocksDB's compactions before "
                         "each checkpoint (back-to-back checkpoints)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rocksdb_options:
        override_options(json.loads(args.rocksdb_options))
    if args.incremental:
        r = run_incremental(args.keys, args.intervals, args.changed, args.seed,
                            args.value_bytes, args.settle)
        for row in r["per_checkpoint"]:
            print(f"# checkpoint {row['cid']}: {row['bytes'] / 1e6:.2f} MB in "
                  f"{row['sst_files']} SST files, pause {row['pause_ms']:.1f} ms, "
                  f"stall {row['stall_ms']:.1f} ms, "
                  f"duration {row['duration_ms']:.1f} ms, {row['level0_files']} level-0 "
                  f"files", file=sys.stderr)
        print(f"keys {r['keys']:,}, {r['changed']:.1%} changed per interval, "
              f"{r['intervals']} intervals")
        print(f"full checkpoint      {r['full_bytes'] / 1e6:8.2f} MB "
              f"({r['full_duration_ms']:.0f} ms); memory format "
              f"{r['memory_format_bytes'] / 1e6:.2f} MB; database on disk "
              f"{r['disk_bytes'] / 1e6:.2f} MB")
        print(f"incremental p50/max  {r['inc_bytes_p50'] / 1e6:8.2f} / "
              f"{r['inc_bytes_max'] / 1e6:.2f} MB = {r['inc_vs_full_p50']:.1%} of the full "
              f"one, {r['inc_vs_memory_format_p50']:.1%} of the memory format; mean "
              f"{r['inc_bytes_mean'] / 1e6:.2f} MB = "
              f"{r['inc_bytes_mean'] / r['full_bytes']:.1%} (compactions rewrite files); "
              f"p99 {r['inc_bytes_p99'] / 1e6:.2f} MB = {r['inc_vs_full_p99']:.1%}")
        print(f"duration p50/p99     {r['duration_ms_p50']:8.1f} / {r['duration_ms_p99']:.1f} ms")
        print(f"task-thread pause    p50 {r['pause_ms_p50']:.1f} / p99 {r['pause_ms_p99']:.1f} "
              f"/ max {r['pause_ms_max']:.1f} ms; peak RSS {r['peak_rss_mb']:.0f} MB")
        print(f"task-thread stall    p50 {r['stall_ms_p50']:.1f} / p99 {r['stall_ms_p99']:.1f} "
              f"/ max {r['stall_ms_max']:.1f} ms (longest gap between its reads while the "
              f"snapshot thread works; {r['stall_ms_idle']:.1f} ms in 1 s without one)")
        print(f"updates per interval p50 {r['update_ops_s_p50']:,} / min "
              f"{r['update_ops_s_min']:,} ops/s; level-0 files at a barrier, max "
              f"{r['level0_files_max']} (RocksDB slows writes from its slowdown trigger)")
        if args.json:
            emit_json({k: v for k, v in r.items() if k != "per_checkpoint"})
        return 0
    if args.child:
        print(json.dumps(run_one(args.child, args.keys, args.updates, args.seed)))
        return 0
    extra = ("--rocksdb-options", args.rocksdb_options) if args.rocksdb_options else ()
    results = run_per_store(__file__, args.stores.split(","), "--keys", str(args.keys),
                            "--updates", str(args.updates), "--seed", str(args.seed), *extra)
    if results is None:
        return 1
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
