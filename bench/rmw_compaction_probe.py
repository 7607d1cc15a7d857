"""Compaction CPU per written record at a task's full size, in RocksDB alone (issue 34).

``bench/rmw_store_bench.py --stats`` shows the compactions' CPU per tenth as the state
grows, but on a loaded machine its run to 10M keys takes hours. This probe starts where
that run ends: a database of ``--keys`` keys built once straight into the last level
(``SstFileWriter``, the store's keys and ``(count, 320-byte value)`` entries, as
``bench/rmw_cache_probe.py`` builds it), then, per candidate, a copy of it opened with the
store's options (:func:`jstormpy.state_store.store_options`) and the candidate's on top
takes ``--writes`` writes of the job's mix at ``--present-share`` (a share overwrites a
key drawn from the whole state, the rest write new keys), in batches of 2 048 as the
store writes, the memtable flushed every ``--flush-every`` writes as a barrier's native
checkpoint flushes it. Printed per half of the writes: the CPU of RocksDB's compaction
(``rocksdb:low``) and flush (``rocksdb:high``) threads per written record, the bytes the
compactions wrote, the level-0 files, and at each flush what an incremental checkpoint
would upload then (the bytes of the live SST files no earlier flush saw: max, p50, sum)
and the SST bytes on disk (their most); at the end the pending compaction bytes, the
files per level, RocksDB's estimate of the live data and the CPU of a get of a present and
of an absent key (``time.thread_time``). Candidates ``level`` and ``universal`` name the
compaction style; ``universal-amp100`` ... set universal's options on top.
Each candidate runs in its own process (side by side: the CPU counters do not depend on
the load the way the wall clock does).

    python -m bench.rmw_compaction_probe --keys 10000000 --writes 2000000 \\
        --candidates store,lz4,universal,trigger24
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from rmw_cache_probe import MAX_PARALLELISM, build, forget_options  # noqa: E402
from rmw_store_bench import thread_cpu  # noqa: E402

from jstormpy import state_store  # noqa: E402
from jstormpy.state_store import db_key, encode, parse_statistics, rocksdict_module  # noqa: E402

BATCH = 2048


def _compression(name: str) -> Callable[[Any, Any], None]:
    return lambda rd, o: o.set_compression_type(getattr(rd.DBCompressionType, name)())


def _trigger(n: int) -> Callable[[Any, Any], None]:
    def apply(rd: Any, o: Any) -> None:
        o.set_level_zero_file_num_compaction_trigger(n)
        o.set_level_zero_slowdown_writes_trigger(max(state_store.LEVEL0_SLOWDOWN_TRIGGER,
                                                     2 * n + 6))
        o.set_level_zero_stop_writes_trigger(max(state_store.LEVEL0_STOP_TRIGGER,
                                                 2 * n + 24))
    return apply


def _universal(**settings: int) -> Callable[[Any, Any], None]:
    def apply(rd: Any, o: Any) -> None:
        o.set_compaction_style(rd.DBCompactionStyle.universal())
        u = rd.UniversalCompactOptions()
        for name, value in settings.items():
            setattr(u, name, value)
        o.set_universal_compaction_options(u)
    return apply


def _base128(rd: Any, o: Any) -> None:
    o.set_max_bytes_for_level_base(128 << 20)
    o.set_target_file_size_base(32 << 20)


CANDIDATES: dict[str, Callable[[Any, Any], None]] = {
    "store": lambda rd, o: None,
    "lz4": _compression("lz4"),
    "snappy": _compression("snappy"),  # RocksDB's default, the store's before LZ4
    "none": _compression("none"),
    "l0-none": lambda rd, o: o.set_compression_per_level(
        [rd.DBCompressionType.none()] + [rd.DBCompressionType.snappy()] * 6),
    "bottom-zstd": lambda rd, o: o.set_bottommost_compression_type(
        rd.DBCompressionType.zstd()),
    "level": lambda rd, o: o.set_compaction_style(rd.DBCompactionStyle.level()),
    "universal": lambda rd, o: o.set_compaction_style(rd.DBCompactionStyle.universal()),
    "universal-amp100": _universal(max_size_amplification_percent=100),
    "universal-amp400": _universal(max_size_amplification_percent=400),
    "universal-ratio10": _universal(size_ratio=10),
    "universal-width4": _universal(min_merge_width=4),
    "trigger4": _trigger(4),
    "trigger24": _trigger(24),
    "base128": _base128,
    "multiplier5": lambda rd, o: o.set_max_bytes_for_level_multiplier(5.0),
    "static-levels": lambda rd, o: o.set_level_compaction_dynamic_level_bytes(False),
}


def written_options(path: Path) -> dict[str, str]:
    """What RocksDB wrote to the database's newest OPTIONS file for the default column
    family, of the settings the candidates change (the candidate reached the database)."""
    newest = max(path.glob("OPTIONS-*"), key=lambda f: int(f.name.split("-")[1]))
    wanted = ("compaction_style", "compression", "bottommost_compression",
              "level0_file_num_compaction_trigger", "max_bytes_for_level_base",
              "max_bytes_for_level_multiplier", "level_compaction_dynamic_level_bytes")
    out: dict[str, str] = {}
    section = ""
    for line in newest.read_text().splitlines():
        if line.startswith("["):
            section = line.strip()
        elif section == '[CFOptions "default"]' and "=" in line:
            key, _, value = line.strip().partition("=")
            if key in wanted:
                out[key] = value
    return out


def run_candidate(path: Path, name: str, keys: int, writes: int, share: float,
                  flush_every: int, value_bytes: int) -> dict[str, Any]:
    """In this process: the writes on the database at ``path`` with candidate ``name``."""
    rd = rocksdict_module()
    forget_options(path)
    opts = state_store.store_options(rd, rd.Cache(state_store.BLOCK_CACHE_BYTES))
    CANDIDATES[name](rd, opts)
    db = rd.Rdict(str(path), options=opts)
    applied = written_options(path)
    rng = random.Random(5)
    pad = "v" * value_bytes
    new = keys
    halves: list[dict[str, float]] = []
    t0 = thread_cpu()
    s0 = parse_statistics(opts.get_statistics() or "")
    level0: list[int] = []
    since_flush = 0
    seen = {f.name for f in path.glob("*.sst")}  # the base: "uploaded" before the writes
    uploads: list[int] = []  # per flush (a barrier's): bytes of SST files new since the last
    disk_peak = 0
    for _half in range(2):
        done = 0
        while done < writes // 2:
            wb = rd.WriteBatch(raw_mode=True)
            for _ in range(BATCH):
                if rng.random() < share:
                    k = rng.randrange(new)
                else:
                    k, new = new, new + 1
                wb.put(db_key(k, MAX_PARALLELISM), encode((2, f"{k:012d}{pad}"[:value_bytes])))
            db.write(wb)
            done += BATCH
            since_flush += BATCH
            if since_flush >= flush_every:
                since_flush = 0
                db.flush(True)
                level0.append(int(db.property_value("rocksdb.num-files-at-level0") or 0))
                # a checkpoint now holds the current version's files (live_files): those
                # no earlier one held are its upload; the disk also holds a running
                # compaction's output so far and inputs not deleted yet
                live = {f["name"].lstrip("/"): int(f["size"]) for f in db.live_files()}
                uploads.append(sum(b for n, b in live.items() if n not in seen))
                seen |= set(live)
                on_disk = 0
                for f in path.glob("*.sst"):
                    try:
                        on_disk += f.stat().st_size
                    except FileNotFoundError:  # a compaction's input, deleted meanwhile
                        pass
                disk_peak = max(disk_peak, on_disk)
        t1 = thread_cpu()
        s1 = parse_statistics(opts.get_statistics() or "")
        halves.append({
            "compaction_us_per_write": (t1.get("rocksdb:low", 0.0) - t0.get("rocksdb:low", 0.0))
            / done * 1e6,
            "flush_us_per_write": (t1.get("rocksdb:high", 0.0) - t0.get("rocksdb:high", 0.0))
            / done * 1e6,
            "compaction_mb": (s1.get("rocksdb.compact.write.bytes", 0.0)
                              - s0.get("rocksdb.compact.write.bytes", 0.0)) / 1e6,
            "level0_mean": sum(level0) / max(len(level0), 1),
            "level0_max": max(level0, default=0),
            "upload_max_mb": max(uploads, default=0) / 1e6,
            "upload_p50_mb": sorted(uploads)[len(uploads) // 2] / 1e6 if uploads else 0.0,
            "upload_sum_mb": sum(uploads) / 1e6,
            "disk_peak_mb": disk_peak / 1e6,
        })
        t0, s0, level0, uploads, disk_peak = t1, s1, [], [], 0
    pending = int(db.property_int_value("rocksdb.estimate-pending-compaction-bytes") or 0)
    rows = (db.property_value("rocksdb.levelstats") or "").splitlines()[2:]
    files = " ".join(f"L{r.split()[0]}:{r.split()[1]}" for r in rows
                     if r.split() and r.split()[1] != "0")
    sst = int(db.property_int_value("rocksdb.total-sst-files-size") or 0)
    live = int(db.property_int_value("rocksdb.estimate-live-data-size") or 0)
    sample = [db_key(rng.randrange(keys), MAX_PARALLELISM) for _ in range(50_000)]
    absent = [db_key(new + 1 + rng.randrange(keys), MAX_PARALLELISM) for _ in range(50_000)]
    costs = {}
    for label, ks in (("present", sample), ("absent", absent)):
        c0 = time.thread_time()
        for key in ks:
            db.get(key)
        costs[label] = (time.thread_time() - c0) / len(ks) * 1e6
    db.close()
    return {"candidate": name, "options": applied, "halves": halves,
            "pending_mb": pending / 1e6, "levels": files,
            "sst_mb": sst / 1e6, "live_mb": live / 1e6, "get_present_us": costs["present"],
            "get_absent_us": costs["absent"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--writes", type=int, default=2_000_000)
    p.add_argument("--present-share", type=float, default=0.5)
    p.add_argument("--flush-every", type=int, default=200_000)
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--candidates", default="store,lz4,universal,trigger24",
                   help="comma-separated: " + ", ".join(CANDIDATES))
    p.add_argument("--dir", default=None)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child: candidate name
    p.add_argument("--db", default=None, help=argparse.SUPPRESS)  # child: its database
    args = p.parse_args(argv)
    if args.one is not None:
        r = run_candidate(Path(args.db), args.one, args.keys, args.writes, args.present_share,
                          args.flush_every, args.value_bytes)
        print("PROBE_JSON " + json.dumps(r), flush=True)
        return 0
    names = args.candidates.split(",")
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        p.error(f"unknown candidates {unknown}; known: {', '.join(CANDIDATES)}")
    home = Path(tempfile.mkdtemp(prefix="rmw-compaction-", dir=args.dir))
    try:
        base = home / "base"
        cpu = build(base, args.keys, args.value_bytes)
        print(f"built {args.keys:,} keys in {cpu:.0f} s of CPU", flush=True)
        procs = []
        for name in names:
            copy = home / name
            shutil.copytree(base, copy)
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--one", name, "--db", str(copy),
                 *[f"--{k.replace('_', '-')}={v}" for k, v in
                   (("keys", args.keys), ("writes", args.writes),
                    ("present_share", args.present_share), ("flush_every", args.flush_every),
                    ("value_bytes", args.value_bytes))]],
                stdout=subprocess.PIPE, text=True))
        for proc in procs:
            out, _ = proc.communicate()
            line = next((x for x in out.splitlines() if x.startswith("PROBE_JSON ")), None)
            if line is None:
                print(f"candidate failed: {out[-2000:]}")
                continue
            r = json.loads(line[len("PROBE_JSON "):])
            print(json.dumps(r))
            h = r["halves"]
            print(f"{r['candidate']:>14}: compaction µs/write {h[0]['compaction_us_per_write']:.2f}"
                  f" / {h[1]['compaction_us_per_write']:.2f}, flush µs/write "
                  f"{h[0]['flush_us_per_write']:.2f} / {h[1]['flush_us_per_write']:.2f}, "
                  f"compaction MB {h[0]['compaction_mb']:.0f} / {h[1]['compaction_mb']:.0f}, "
                  f"L0 mean {h[0]['level0_mean']:.1f} / {h[1]['level0_mean']:.1f}, pending "
                  f"{r['pending_mb']:.0f} MB, get present / absent {r['get_present_us']:.2f} / "
                  f"{r['get_absent_us']:.2f} µs, SST {r['sst_mb']:.0f} MB (live "
                  f"{r['live_mb']:.0f}), {r['levels']}; per flush, SST MB on disk at most "
                  f"{h[0]['disk_peak_mb']:.0f} / {h[1]['disk_peak_mb']:.0f}, new SST MB "
                  f"(an incremental upload) max {h[0]['upload_max_mb']:.1f} / "
                  f"{h[1]['upload_max_mb']:.1f}, p50 {h[0]['upload_p50_mb']:.1f} / "
                  f"{h[1]['upload_p50_mb']:.1f}, sum {h[0]['upload_sum_mb']:.0f} / "
                  f"{h[1]['upload_sum_mb']:.0f}", flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
