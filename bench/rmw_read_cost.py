"""What a read-modify-write costs as a task's RocksDB state grows, in RocksDB alone.

One database with the store's options (:func:`jstormpy.state_store.store_options`, its
32 MB block cache), no engine and no snapshot thread: a share ``--present-share`` of the
operations re-read a key drawn uniformly from all the keys written so far, the others
write the next new key, each a ``get`` then a ``put`` of ``(count, 320-byte value)``
encoded as the store encodes it; writes go through a write cache of
:data:`~jstormpy.state_store.WRITE_CACHE_ENTRIES` entries written in batches (as the store
does) and the memtable is flushed every ``--flush-every`` writes (as a barrier's native
checkpoint does). The mix stays fixed while the state grows linearly to ``--keys``.

Printed per tenth of the operations: the task thread's CPU per operation
(``time.thread_time``: what other processes on a shared machine change little), the
compaction threads' CPU, the level-0 files (mean of samples) and, with ``--stats``,
RocksDB's own statistics per get over the tenth (data-block cache misses, SST files whose
bloom filter said no and said maybe, where the hits were found, SST block reads).
``--key-filter`` runs it as the store runs with its key filter on (the default where the
filter is compiled): reads of keys never written skip RocksDB, and the last level keeps no
bloom filter. Options under test go on top of the store's (``--index-restart``, ``--pin-top``,
``--partition-filters``, ``--block-kb``, ...), so the same run can be repeated with one
changed.

    python -m bench.rmw_read_cost --keys 3000000 --stats
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.rmw_store_bench import thread_cpu  # CPU per thread by name (rocksdb:low ...)
from jstormpy import state_store
from jstormpy.state_store import db_key, encode, rocksdict_module

MAX_PARALLELISM = 128
_MIX = 2_654_435_761  # odd: i -> i * _MIX mod 2**48 is a bijection (keys in random order)
_MASK = (1 << 48) - 1

COUNTERS = {
    "data_miss": "rocksdb.block.cache.data.miss",
    "data_hit": "rocksdb.block.cache.data.hit",
    "bloom_no": "rocksdb.bloom.filter.useful",
    "bloom_maybe": "rocksdb.bloom.filter.full.positive",
    "bloom_true": "rocksdb.bloom.filter.full.true.positive",
    "mem_hit": "rocksdb.memtable.hit",
    "l0_hit": "rocksdb.l0.hit",
    "l1_hit": "rocksdb.l1.hit",
    "l2up_hit": "rocksdb.l2andup.hit",
    "gets": "rocksdb.number.keys.read",
}
HISTOGRAMS = {"sst_reads": "rocksdb.sst.read.micros", "get_us": "rocksdb.db.get.micros"}


def parse_stats(text: str) -> dict[str, float]:
    """RocksDB's statistics dump: tickers as ``name COUNT : n``, histograms' count and sum."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split(" ", 1)[0]
        m = re.search(r"COUNT : (\d+)", line)
        if m is None:
            continue
        out[name] = float(m.group(1))
        s = re.search(r"SUM : (\d+)", line)
        if s is not None:
            out[name + ".sum"] = float(s.group(1))
    return out


def options(rd: Any, cache: Any, args: argparse.Namespace) -> Any:
    """The store's options with the ones under test on top."""
    opts = state_store.store_options(rd, cache, last_level_filters=not args.key_filter)
    if args.stats:
        opts.enable_statistics()
    if args.level0_trigger is not None:
        opts.set_level_zero_file_num_compaction_trigger(args.level0_trigger)
    if args.level1_mb is not None:
        opts.set_max_bytes_for_level_base(args.level1_mb << 20)
    if args.target_file_mb is not None:
        opts.set_target_file_size_base(args.target_file_mb << 20)
    if args.write_buffer_mb is not None:
        opts.set_write_buffer_size(args.write_buffer_mb << 20)
    if args.background_jobs is not None:
        opts.set_max_background_jobs(args.background_jobs)
    if args.subcompactions is not None:
        opts.set_max_subcompactions(args.subcompactions)
    if args.row_cache_mb:
        opts.set_row_cache(rd.Cache(args.row_cache_mb << 20))
    if args.compression is not None:
        opts.set_compression_type(getattr(rd.DBCompressionType, args.compression)())
    table_changed = (args.block_kb, args.bloom_bits, args.pin_top, args.partition_filters,
                     args.cache_index, args.index_restart)
    if any(v not in (None, False) for v in table_changed):
        table = rd.BlockBasedOptions()
        table.set_bloom_filter(args.bloom_bits or 10, False)
        table.set_block_cache(cache)
        if args.block_kb is not None:
            table.set_block_size(args.block_kb << 10)
        if args.index_restart is not None:
            table.set_index_block_restart_interval(args.index_restart)
        if args.partition_filters:
            table.set_index_type(rd.BlockBasedIndexType.two_level_index_search())
            table.set_partition_filters(True)
        table.set_cache_index_and_filter_blocks(bool(args.cache_index or args.partition_filters))
        if args.pin_top or args.partition_filters:
            table.set_pin_top_level_index_and_filter(True)
            table.set_pin_l0_filter_and_index_blocks_in_cache(True)
        opts.set_block_based_table_factory(table)
    return opts


def run(args: argparse.Namespace) -> dict[str, Any]:
    rd = rocksdict_module()
    home = Path(tempfile.mkdtemp(prefix="rmw-read-cost-", dir=args.dir))
    try:
        return _run(args, rd, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run(args: argparse.Namespace, rd: Any, home: Path) -> dict[str, Any]:
    cache = rd.Cache(state_store.BLOCK_CACHE_BYTES)
    opts = options(rd, cache, args)
    db = rd.Rdict(str(home / "db"), options=opts)
    n = args.keys
    share = args.present_share
    total = int(n / (1 - share))
    pad = "v" * args.value_bytes
    vb = args.value_bytes
    mp = MAX_PARALLELISM
    rng = random.Random(args.seed)
    cache_entries = state_store.WRITE_CACHE_ENTRIES
    batch_entries = state_store.WRITE_BATCH_ENTRIES
    wcache: dict[bytes, bytes] = {}
    written = 0  # distinct keys written
    since_flush = 0
    tenths: list[dict[str, Any]] = []
    prev_stats = parse_stats(opts.get_statistics() or "") if args.stats else {}
    prev_threads = thread_cpu()
    t_cpu = time.thread_time()
    t_wall = time.perf_counter()
    l0_samples: list[int] = []
    next_tenth = 1
    skip_new = args.key_filter
    acc = 0.0  # Bresenham: a share `share` of the operations re-read an old key

    def write_out() -> None:
        items = list(wcache.items())
        wcache.clear()
        for i in range(0, len(items), batch_entries):
            wb = rd.WriteBatch(raw_mode=True)
            for k, v in items[i:i + batch_entries]:
                wb.put(k, v)
            db.write(wb)

    for j in range(total):
        acc += share
        if acc >= 1.0 and written:
            acc -= 1.0
            i = rng.randrange(written)
            new = False
        else:
            i = written
            written += 1
            new = True
        k = (i * _MIX) & _MASK
        key = db_key(k, mp)
        raw = wcache.get(key)
        if raw is None and not (new and skip_new):
            raw = db.get(key)
        old = state_store.decode_entry(raw) if raw is not None else None
        wcache[key] = encode((old[0] + 1 if old else 1, f"{k:012d}{pad}"[:vb]))
        if len(wcache) >= cache_entries:
            write_out()
        since_flush += 1
        if since_flush >= args.flush_every:
            write_out()
            db.flush()
            since_flush = 0
        if j % 5000 == 0:
            l0_samples.append(int(db.property_value("rocksdb.num-files-at-level0") or 0))
        if (j + 1) * 10 >= next_tenth * total:
            cpu = time.thread_time()
            wall = time.perf_counter()
            threads = thread_cpu()
            ops = (j + 1) - sum(t["ops"] for t in tenths)
            row: dict[str, Any] = {
                "tenth": next_tenth, "keys": written, "ops": ops,
                "cpu_us": (cpu - t_cpu) / ops * 1e6, "wall_us": (wall - t_wall) / ops * 1e6,
                "compaction_s": (threads.get("rocksdb:low", 0.0)
                                 - prev_threads.get("rocksdb:low", 0.0)),
                "flush_s": (threads.get("rocksdb:high", 0.0)
                            - prev_threads.get("rocksdb:high", 0.0)),
                "l0_mean": sum(l0_samples) / max(1, len(l0_samples)),
                "l0_max": max(l0_samples or [0]),
                "sst_mb": int(db.property_int_value("rocksdb.total-sst-files-size") or 0) / 2**20,
                "levels": levels(db),
                "index_filter_mb": int(db.property_int_value("rocksdb.estimate-table-readers-mem")
                                       or 0) / 2**20,
            }
            if args.stats:
                stats = parse_stats(opts.get_statistics() or "")
                d = {key: stats.get(name, 0.0) - prev_stats.get(name, 0.0)
                     for key, name in COUNTERS.items()}
                gets = max(1.0, d["gets"])
                row.update({key: d[key] / gets for key in COUNTERS if key != "gets"})
                row["gets"] = d["gets"]
                for key, name in HISTOGRAMS.items():
                    cnt = stats.get(name, 0.0) - prev_stats.get(name, 0.0)
                    row[key] = cnt / gets
                    if key == "get_us":
                        row[key] = ((stats.get(name + ".sum", 0.0)
                                     - prev_stats.get(name + ".sum", 0.0)) / max(1.0, cnt))
                prev_stats = stats
            tenths.append(row)
            if args.progress:
                print(json.dumps(row), flush=True)
            prev_threads = threads
            t_cpu, t_wall = time.thread_time(), time.perf_counter()
            l0_samples = []
            next_tenth += 1
    write_out()
    db.close()
    return {"keys": n, "present_share": share, "ops": total, "tenths": tenths,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "args": {k: v for k, v in vars(args).items() if k not in ("dir",)}}


def levels(db: Any) -> str:
    """Files per non-empty level (``L<n>:<files>``)."""
    rows = (db.property_value("rocksdb.levelstats") or "").splitlines()[2:]
    return " ".join(f"L{r.split()[0]}:{r.split()[1]}" for r in rows
                    if r.split() and r.split()[1] != "0")


def report(r: dict[str, Any]) -> None:
    print(f"RocksDB alone, {r['keys']:,} keys, {r['ops']:,} get+put, "
          f"present share {r['present_share']}; peak RSS {r['peak_rss_mb']:.0f} MB")
    stats = "data_miss" in r["tenths"][0]
    head = "tenth keys      cpu_us  compact_s  L0 mean/max  sst_mb  idx+flt_mb  levels"
    if stats:
        head += "  | per get: data_miss bloom_no bloom_maybe mem l0 l1 l2up sst_reads get_us"
    print(head)
    for t in r["tenths"]:
        line = (f"{t['tenth']:>5} {t['keys']:>9,} {t['cpu_us']:>7.2f} {t['compaction_s']:>9.1f}"
                f"  {t['l0_mean']:>5.1f}/{t['l0_max']:<3} {t['sst_mb']:>7.0f} "
                f"{t['index_filter_mb']:>8.1f}  {t['levels']}")
        if stats:
            line += (f"  | {t['data_miss']:.3f} {t['bloom_no']:.3f} {t['bloom_maybe']:.3f} "
                     f"{t['mem_hit']:.3f} {t['l0_hit']:.3f} {t['l1_hit']:.3f} "
                     f"{t['l2up_hit']:.3f} {t['sst_reads']:.3f} {t['get_us']:.2f}")
        print(line)
    later = [t["cpu_us"] for t in r["tenths"][1:]]
    if later:
        print(f"CPU per op from the 2nd tenth: best {min(later):.2f} µs, worst {max(later):.2f} µs "
              f"(best/worst {min(later) / max(later):.2f})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--present-share", type=float, default=0.5)
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--flush-every", type=int, default=200_000,
                   help="writes between memtable flushes (a barrier's native checkpoint)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stats", action="store_true", help="RocksDB's statistics per tenth")
    p.add_argument("--level0-trigger", type=int)
    p.add_argument("--level1-mb", type=int)
    p.add_argument("--target-file-mb", type=int)
    p.add_argument("--write-buffer-mb", type=int)
    p.add_argument("--background-jobs", type=int)
    p.add_argument("--subcompactions", type=int)
    p.add_argument("--row-cache-mb", type=int, default=0)
    p.add_argument("--compression", help="none, snappy, lz4, zstd")
    p.add_argument("--block-kb", type=int)
    p.add_argument("--bloom-bits", type=int)
    p.add_argument("--index-restart", type=int, metavar="N",
                   help="index_block_restart_interval (keys per restart point in an index block)")
    p.add_argument("--pin-top", action="store_true")
    p.add_argument("--partition-filters", action="store_true")
    p.add_argument("--cache-index", action="store_true")
    p.add_argument("--key-filter", action="store_true",
                   help="as the store runs with its key filter on: a key never written is "
                        "not read from RocksDB (the probe knows which keys are new; the "
                        "filter's own ~0.1-0.2 µs a lookup is not counted) and the last "
                        "level keeps no bloom filter")
    p.add_argument("--dir", default=None)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    r = run(args)
    print(json.dumps(r) if args.json else "", end="\n" if args.json else "")
    if not args.json:
        report(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
