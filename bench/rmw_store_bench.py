"""Read-modify-write against pure write on one task's RocksDB store, in one process.

The state path of ``bench/rmw_state_bench.py`` without the engine around it: two task
databases (:class:`jstormpy.state_store.RocksDBStore`, the store's own options), one
written by read-modify-write (``old = kv.get(k); kv[k] = (old[0] + 1 if old else 1,
value)``), one by pure writes (``kv[k] = (1, value)``), fed the same key sequence (``--keys``
keys twice each, from two permutations, so a key is often new and often present; a
320-byte value). The two run interleaved in chunks of ``--chunk`` records on one thread,
so a loaded machine slows both alike and their ratio stays comparable; each takes a
barrier every ``--barrier-records`` of its records as the engine does (write caches sealed
on the task thread, applied and a native checkpoint taken on a snapshot thread, then
released).

Printed: records/s per tenth of the records for each and their ratio, by the wall clock
and by the task thread's CPU time (``time.thread_time``: what other processes on a shared
machine do not change much); the CPU seconds of RocksDB's compaction (``rocksdb:low``) and
flush (``rocksdb:high``) threads; the cost of one read at the end (RocksDB's get of a
present and of an absent key, the state's ``get``); the files per level, SST bytes and the
process's peak RSS (both databases). Options under test (``--block-cache-mb``,
``--compression``, ``--memtable-bloom``, ``--no-verify`` ...) are applied on top of the
store's own (:func:`jstormpy.state_store.store_options`) for both databases.

    python -m bench.rmw_store_bench --keys 2000000
    python -m bench.rmw_store_bench --keys 2000000 --block-cache-mb 128 --no-verify
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from rmw_state_bench import _A1, _A2, permutation  # noqa: E402

from jstormpy import state_store  # noqa: E402
from jstormpy.state_store import (  # noqa: E402
    FrozenStore,
    RocksDBMemory,
    RocksDBStore,
    db_key,
    rocksdict_module,
)

MAX_PARALLELISM = 128


class Side:
    """One of the two databases and its clock."""

    def __init__(self, name: str, path: Path, cache: Any = None,
                 memory: RocksDBMemory | None = None) -> None:
        self.name = name
        self.store = RocksDBStore(path, MAX_PARALLELISM, memory=memory)
        if cache is not None:  # --shared-cache: one block cache for both databases
            self.store.block_cache = cache
        self.kv: Any = self.store.open("kv", None, None)
        self.busy_s = 0.0
        self.cpu_s = 0.0
        self.cpu_tenths: list[float] = []
        self.tenth_cpu = 0.0
        self.done = 0
        self.since_barrier = 0
        self.snapshot: threading.Thread | None = None
        self.tenths: list[float] = []
        self.tenth_t = 0.0
        self.tenth_n = 0
        self.barriers = 0
        self.present = 0  # reads that found the key (read-modify-write side)
        self.present_tenths: list[float] = []
        self.tenth_present = 0
        self.probes: list[dict[str, float]] = []
        self.stats: list[dict[str, float]] = []  # --stats: RocksDB's counters per tenth
        self.last_figures: dict[str, float] = {}
        self.last_compaction_cpu = 0.0
        self.last_flush_cpu = 0.0
        self.uploaded: set[str] = set()  # SST files an earlier checkpoint "uploaded"
        self.uploads: list[int] = []  # per barrier: bytes of the SST files new to it
        self.disk_peak = 0  # the most SST bytes on disk at a barrier (this tenth)
        self.live = 0  # RocksDB's estimate of the live data, at the last barrier

    def barrier(self, keep: Path) -> None:
        """Seal the caches (task thread) and take the native checkpoint on a thread."""
        if self.snapshot is not None:
            self.snapshot.join()
        frozen: FrozenStore = self.store.freeze()

        def take() -> None:
            frozen.materialise()
            # what an incremental checkpoint would upload: the SST files of this native
            # checkpoint no earlier one had (upload_native's rule), and the disk now
            files = {f.name: f.stat().st_size for f in frozen.path.rglob("*.sst")}
            self.uploads.append(sum(b for name, b in files.items()
                                    if name not in self.uploaded))
            self.uploaded |= set(files)
            cf = self.kv.cf
            self.disk_peak = max(self.disk_peak,
                                 int(cf.property_int_value("rocksdb.total-sst-files-size")
                                     or 0))
            self.live = int(cf.property_int_value("rocksdb.estimate-live-data-size") or 0)
            frozen.release()

        self.snapshot = threading.Thread(target=take, daemon=True)
        self.snapshot.start()
        self.barriers += 1


def level0_files(store: RocksDBStore) -> int:
    cf = store.families["kv"]
    return int(cf.property_value("rocksdb.num-files-at-level0") or 0)


def sst_bytes(store: RocksDBStore) -> int:
    cf = store.families["kv"]
    return int(cf.property_int_value("rocksdb.total-sst-files-size") or 0)


def override_options(args: argparse.Namespace) -> None:
    """Apply the options under test on top of the store's (module defaults, then what
    :func:`state_store.store_options` builds)."""
    state_store.BLOCK_CACHE_BYTES = args.block_cache_mb << 20
    for name in ("level1_mb", "target_file_mb", "write_buffer_mb"):
        value = getattr(args, name)
        if value is not None:
            const = {"level1_mb": "LEVEL1_BYTES", "target_file_mb": "TARGET_FILE_BYTES",
                     "write_buffer_mb": "WRITE_BUFFER_BYTES"}[name]
            setattr(state_store, const, value << 20)
    if args.level0_trigger is not None:
        state_store.LEVEL0_COMPACTION_TRIGGER = args.level0_trigger
    if args.universal:
        state_store.COMPACTION_STYLE = "universal"
    if args.compaction_style is not None:
        state_store.COMPACTION_STYLE = args.compaction_style
    base = state_store.store_options

    def options(rd: Any, *given: Any, **named: Any) -> Any:
        # whatever store_options takes, passed on as it came (only the cache is read here)
        opts = base(rd, *given, **named)
        block_cache = inspect.signature(base).bind(rd, *given, **named).arguments.get(
            "block_cache")
        if args.compression is not None:
            opts.set_compression_type(getattr(rd.DBCompressionType, args.compression)())
        if args.compression_per_level is not None:
            opts.set_compression_per_level([getattr(rd.DBCompressionType, c)()
                                            for c in args.compression_per_level.split(",")])
        if args.bottommost is not None:
            opts.set_bottommost_compression_type(getattr(rd.DBCompressionType,
                                                         args.bottommost)())
        if args.level_multiplier is not None:
            opts.set_max_bytes_for_level_multiplier(args.level_multiplier)
        if args.universal_options is not None:
            u = rd.UniversalCompactOptions()
            for name, value in json.loads(args.universal_options).items():
                setattr(u, name, value)
            opts.set_universal_compaction_options(u)
        if (args.bloom_bits is not None or args.block_kb is not None or args.block_hash
                or args.partitioned):
            table = rd.BlockBasedOptions()
            table.set_bloom_filter(args.bloom_bits or 10, False)
            if block_cache is not None:
                table.set_block_cache(block_cache)
            table.set_cache_index_and_filter_blocks(False)
            if args.block_kb is not None:
                table.set_block_size(args.block_kb << 10)
            if args.partitioned:  # two-level index and partitioned filters
                table.set_index_type(rd.BlockBasedIndexType.two_level_index_search())
                table.set_partition_filters(True)
            if args.block_hash:
                table.set_data_block_index_type(rd.DataBlockIndexType.binary_and_hash())
                table.set_data_block_hash_ratio(0.75)
            opts.set_block_based_table_factory(table)
        if args.memtable_bloom is not None:
            opts.set_memtable_prefix_bloom_ratio(args.memtable_bloom)
            opts.set_memtable_whole_key_filtering(True)
        if args.mmap_reads:
            opts.set_allow_mmap_reads(True)
        if args.filters_for_hits:
            opts.set_optimize_filters_for_hits(True)
        if args.dynamic_levels is not None:
            opts.set_level_compaction_dynamic_level_bytes(args.dynamic_levels == "on")
        return opts

    state_store.store_options = options


def levels(store: RocksDBStore) -> str:
    """Files per level (``level:files``, non-empty levels) and the compaction written."""
    cf = store.families["kv"]
    rows = (cf.property_value("rocksdb.levelstats") or "").splitlines()[2:]
    per = [f"L{r.split()[0]}:{r.split()[1]}" for r in rows if r.split() and r.split()[1] != "0"]
    stats = cf.property_value("rocksdb.cfstats") or ""
    cum = next((ln.split(":", 1)[1].strip() for ln in stats.splitlines()
                if ln.startswith("Cumulative compaction")), "?")
    return " ".join(per) + f"; compaction {cum}"


def probe_reads(side: Side, n: int, count: int = 50_000) -> dict[str, float]:
    """Microseconds per read at the end, on the read-modify-write database: RocksDB's own
    get of a present and of an absent key, and the state's ``get`` of a present key."""
    if side.snapshot is not None:
        side.snapshot.join()
    rng = random.Random(7)
    present = [rng.randrange(n) for _ in range(count)]
    absent = [n + rng.randrange(n) for _ in range(count)]
    out = {}
    cost = _per_read_us(side, present, absent, time.perf_counter)
    out["rocksdb_present"], out["rocksdb_absent"] = cost["present"], cost["absent"]
    out["state_present"] = cost["state_present"]
    return out


def _per_read_us(side: Side, present: list[int], absent: list[int],
                 clock: Any) -> dict[str, float]:
    """Microseconds by ``clock`` per RocksDB get of the ``present`` and the ``absent``
    keys, and per state ``get`` of the ``present`` ones."""
    get = side.kv.cf.get
    out: dict[str, float] = {}
    for name, keys in (("present", present), ("absent", absent)):
        raw = [db_key(k, MAX_PARALLELISM) for k in keys]
        c0 = clock()
        for rk in raw:
            get(rk)
        out[name] = (clock() - c0) / len(keys) * 1e6
    kv_get = side.kv.get
    c0 = clock()
    for k in present:
        kv_get(k)
    out["state_present"] = (clock() - c0) / len(present) * 1e6
    return out


def probe_tenth(side: Side, n: int, done: int, a1: int, b1: int,
                count: int = 4000) -> dict[str, float]:
    """CPU microseconds (``time.thread_time``) per read now, on the read-modify-write
    database: RocksDB's get of a key already written (from the first permutation's part
    done) and of a key never written, the state's ``get`` of a written key; and the
    level-0 files and block cache use at this point."""
    rng = random.Random(done)
    half = max(done // 2, 1)
    present = [(a1 * rng.randrange(half) + b1) % n for _ in range(count)]
    absent = [n + rng.randrange(n) for _ in range(count)]
    out = _per_read_us(side, present, absent, time.thread_time)
    out["level0"] = level0_files(side.store)
    out["cache_mb"] = side.store.block_cache.get_usage() / 2**20
    return out


def rss_mb() -> tuple[float, float]:
    """This process's resident set now and at its peak (MB)."""
    now = peak = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            now = int(line.split()[1]) / 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return now, peak


def stats_tenth(side: Side, records: int, cpu_s: float) -> dict[str, float]:
    """RocksDB's own counters over the tenth just ended (``RocksDBStore.figures``): per
    get the data-block cache misses and hits and RocksDB's time; the compactions' CPU
    (their threads' CPU time from /proc, this process's); the task thread's CPU per record;
    the block cache's use, the SST files and the process's RSS now."""
    f = side.store.figures()
    d = {k: f.get(k, 0.0) - side.last_figures.get(k, 0.0) for k in f}
    side.last_figures = f
    gets = max(d.get("gets_total", 0.0), 1.0)
    threads = thread_cpu()
    low, high = threads.get("rocksdb:low", 0.0), threads.get("rocksdb:high", 0.0)
    compaction_s, side.last_compaction_cpu = low - side.last_compaction_cpu, low
    flush_s, side.last_flush_cpu = high - side.last_flush_cpu, high
    rss, peak = rss_mb()
    if side.snapshot is not None:
        side.snapshot.join()
    uploads, side.uploads = side.uploads, []
    disk_peak, side.disk_peak = side.disk_peak, 0
    return {
        "upload_max_mb": max(uploads, default=0) / 2**20,
        "upload_p50_mb": sorted(uploads)[len(uploads) // 2] / 2**20 if uploads else 0.0,
        "upload_sum_mb": sum(uploads) / 2**20,
        "disk_peak_mb": disk_peak / 2**20, "live_mb": side.live / 2**20,
        "cpu_us_per_record": cpu_s / max(records, 1) * 1e6,
        "data_misses_per_get": d.get("block_cache_data_misses_total", 0.0) / gets,
        "data_hits_per_get": d.get("block_cache_data_hits_total", 0.0) / gets,
        "get_us": d.get("get_micros_total", 0.0) / gets,
        "compaction_cpu_s": compaction_s,
        "flush_cpu_s": flush_s,
        "compaction_mb": d.get("compaction_write_bytes_total", 0.0) / 1e6,
        "cache_mb": f.get("block_cache_bytes", 0.0) / 2**20,
        "table_readers_mb": f.get("table_readers_bytes", 0.0) / 2**20,
        "sst_mb": f.get("sst_bytes", 0.0) / 2**20,
        "rss_mb": rss, "peak_rss_mb": peak,
    }


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's live threads by name (RocksDB's compactions run in
    ``rocksdb:low``, its memtable flushes in ``rocksdb:high``)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    override_options(args)
    home = Path(tempfile.mkdtemp(prefix="rmw-store-", dir=args.dir))
    try:
        return _run(args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    n = args.keys
    total = 2 * n
    (a1, b1), (a2, b2) = permutation(n, _A1), permutation(n, _A2)
    shared = (rocksdict_module().Cache(2 * (args.block_cache_mb << 20))
              if args.shared_cache else None)
    memory = None if args.memory_mb is None else RocksDBMemory(args.memory_mb)
    rmw, write = (Side("rmw", home / "rmw", shared, memory),
                  Side("write", home / "write", shared, memory))
    sides = (rmw,) if args.rmw_only else (rmw, write)
    if args.no_verify:
        for side in (rmw, write):
            ro = rocksdict_module().ReadOptions()
            ro.set_verify_checksums(False)
            side.kv.cf.set_read_options(ro)
    pad = "v" * args.value_bytes
    vb = args.value_bytes
    pos = 0
    mixed: list[int] | None = None  # --present-share: this chunk's keys, drawn beforehand
    mixed_at = 0
    rng = random.Random(11)
    written = 0
    while pos < total:
        end = min(total, pos + args.chunk)
        if args.present_share is not None:
            mixed, mixed_at = [], pos
            for _ in range(pos, end):
                if written and rng.random() < args.present_share:
                    t = rng.randrange(written)
                else:
                    t, written = written, written + 1
                mixed.append((a1 * t + b1) % n)
        for side in sides:
            kv = side.kv
            t0, c0 = time.perf_counter(), time.thread_time()
            if mixed is not None:
                keys = mixed[pos - mixed_at:end - mixed_at]
                if side is rmw:
                    for k in keys:
                        old = kv.get(k)
                        if old:
                            side.present += 1
                        kv[k] = (old[0] + 1 if old else 1, f"{k:012d}{pad}"[:vb])
                else:
                    for k in keys:
                        kv[k] = (1, f"{k:012d}{pad}"[:vb])
            elif side is rmw:
                for i in range(pos, end):
                    t = i >> 1
                    k = (a2 * t + b2) % n if i & 1 else (a1 * t + b1) % n
                    value = f"{k:012d}{pad}"[:vb]
                    old = kv.get(k)
                    if old:
                        side.present += 1
                    kv[k] = (old[0] + 1 if old else 1, value)
            else:
                for i in range(pos, end):
                    t = i >> 1
                    k = (a2 * t + b2) % n if i & 1 else (a1 * t + b1) % n
                    kv[k] = (1, f"{k:012d}{pad}"[:vb])
            side.since_barrier += end - pos
            if side.since_barrier >= args.barrier_records:
                side.since_barrier = 0
                side.barrier(home)
            side.busy_s += time.perf_counter() - t0
            side.cpu_s += time.thread_time() - c0
            side.done = end
            while side.done >= (len(side.tenths) + 1) * total // 10:
                side.tenths.append((side.done - side.tenth_n) / max(side.busy_s - side.tenth_t,
                                                                     1e-9))
                side.cpu_tenths.append((side.done - side.tenth_n)
                                       / max(side.cpu_s - side.tenth_cpu, 1e-9))
                side.tenth_t, side.tenth_n = side.busy_s, side.done
                side.tenth_cpu = side.cpu_s
                if side is rmw:
                    side.present_tenths.append((side.present - side.tenth_present)
                                               / (total // 10))
                    side.tenth_present = side.present
                    if args.probe_tenths:
                        side.probes.append(probe_tenth(side, n, side.done, a1, b1))
                    if args.stats:
                        side.stats.append(stats_tenth(side, total // 10,
                                                      total // 10 / side.cpu_tenths[-1]))
                        if args.progress:
                            print(f"  tenth {len(side.stats)}: " + json.dumps(side.stats[-1]),
                                  flush=True)
        pos = end
        if args.progress and pos % (total // 20 or 1) < args.chunk:
            print(f"  {pos / total:4.0%}  rmw {rmw.done / max(rmw.busy_s, 1e-9):,.0f}/s  "
                  f"write {write.done / max(write.busy_s, 1e-9):,.0f}/s  "
                  f"L0 {level0_files(rmw.store)}/{level0_files(write.store)}  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    probe = probe_reads(rmw, n)
    if args.rmw_only:  # no second database: its figures repeat the first's
        write.busy_s, write.cpu_s = rmw.busy_s, rmw.cpu_s
        write.tenths, write.cpu_tenths = rmw.tenths, rmw.cpu_tenths
    result = {
        "keys": n, "probe_us": probe, "options": {k: v for k, v in vars(args).items()
                               if k not in ("dir", "progress", "json")},
        "rmw_per_s": total / rmw.busy_s, "write_per_s": total / write.busy_s,
        "ratio": write.busy_s / rmw.busy_s,
        "rmw_tenths": rmw.tenths, "write_tenths": write.tenths,
        "rmw_cpu_per_s": total / rmw.cpu_s, "write_cpu_per_s": total / write.cpu_s,
        "cpu_ratio": write.cpu_s / rmw.cpu_s,
        "rmw_cpu_tenths": rmw.cpu_tenths, "write_cpu_tenths": write.cpu_tenths,
        "thread_cpu_s": thread_cpu(),
        "present_tenths": rmw.present_tenths, "probe_tenths": rmw.probes,
        "stats_tenths": rmw.stats,
        "level0_files": [level0_files(rmw.store), level0_files(write.store)],
        "sst_bytes": [sst_bytes(rmw.store), sst_bytes(write.store)],
        "levels": [levels(rmw.store), levels(write.store)],
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "load_end": os.getloadavg()[0],
    }
    for side in (rmw, write):
        if side.snapshot is not None:
            side.snapshot.join()
        side.store.close()
    return result


def report(r: dict[str, Any]) -> None:
    print(f"\n{r['keys']:,} keys x 2 on one task database, options {r['options']}")
    print(f"  read-modify-write {r['rmw_per_s']:,.0f}/s, pure write {r['write_per_s']:,.0f}/s: "
          f"ratio {r['ratio']:.2f}")
    print("  rmw per tenth:   " + ", ".join(f"{x / 1000:.0f}k" for x in r["rmw_tenths"]))
    print("  write per tenth: " + ", ".join(f"{x / 1000:.0f}k" for x in r["write_tenths"]))
    print(f"  CPU of the task thread: read-modify-write {r['rmw_cpu_per_s']:,.0f}/s, pure write "
          f"{r['write_cpu_per_s']:,.0f}/s: ratio {r['cpu_ratio']:.2f}")
    print("  rmw per tenth (CPU):   " + ", ".join(f"{x / 1000:.0f}k" for x in r["rmw_cpu_tenths"]))
    print("  write per tenth (CPU): " + ", ".join(f"{x / 1000:.0f}k"
                                                  for x in r["write_cpu_tenths"]))
    print("  ratio per tenth (CPU): " + ", ".join(
        f"{a / b:.2f}" if b else "-"
        for a, b in zip(r["rmw_cpu_tenths"], r["write_cpu_tenths"], strict=True)))
    print("  reads finding the key, per tenth: " + ", ".join(
        f"{x:.0%}" for x in r["present_tenths"]))
    if r["probe_tenths"]:
        print("  per tenth, CPU us per get (present / absent / state present), L0 files, "
              "cache MB:")
        for i, pr in enumerate(r["probe_tenths"]):
            print(f"    {i + 1:2d}: {pr['present']:.2f} / {pr['absent']:.2f} / "
                  f"{pr['state_present']:.2f}, L0 {pr['level0']:.0f}, cache "
                  f"{pr['cache_mb']:.0f}")
    if r.get("stats_tenths"):
        print("  per tenth: CPU us/record, data-block misses / hits per get, get us, "
              "compaction CPU s / MB written, flush CPU s, block cache MB, table readers MB, "
              "SST MB, RSS MB; task + compaction + flush CPU us/record; SST MB at a barrier, "
              "most / live; checkpoint upload MB max / p50 / sum:")
        for i, st in enumerate(r["stats_tenths"]):
            print(f"    {i + 1:2d}: {st['cpu_us_per_record']:.1f}, "
                  f"{st['data_misses_per_get']:.2f} / {st['data_hits_per_get']:.2f}, "
                  f"{st['get_us']:.1f}, {st['compaction_cpu_s']:.1f} / "
                  f"{st['compaction_mb']:.0f}, {st.get('flush_cpu_s', 0.0):.1f}, "
                  f"{st['cache_mb']:.0f}, "
                  f"{st['table_readers_mb']:.0f}, {st['sst_mb']:.0f}, {st['rss_mb']:.0f}; "
                  f"{total_us(st, r['keys']):.1f}; {st['disk_peak_mb']:.0f} / "
                  f"{st['live_mb']:.0f}; {st['upload_max_mb']:.1f} / "
                  f"{st['upload_p50_mb']:.1f} / {st['upload_sum_mb']:.0f}")
    print("  thread CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in
                                         sorted(r["thread_cpu_s"].items())))
    rt = r["rmw_tenths"][1:]
    print(f"  rmw flatness (2nd-10th tenth): min/max {min(rt) / max(rt):.2f}; "
          f"ratio per tenth: " + ", ".join(f"{a / b:.2f}" if b else "-" for a, b in
                                           zip(r["rmw_tenths"], r["write_tenths"], strict=True)))
    print("  reads at the end (us): " + ", ".join(f"{k} {v:.2f}" for k, v in
                                                r["probe_us"].items()))
    print(f"  levels: rmw {r['levels'][0]}; write {r['levels'][1]}")
    print(f"  level-0 files {r['level0_files']}, SST {[b >> 20 for b in r['sst_bytes']]} MB, "
          f"peak RSS {r['peak_rss_bytes'] >> 20} MB (both databases), load at the end "
          f"{r['load_end']:.1f}")


def total_us(st: dict[str, float], keys: int) -> float:
    """The task thread's, the compactions' and the flushes' CPU per record in a tenth
    (a tenth is ``2 * keys / 10`` records): what the database costs the cores per record."""
    records = 2 * keys / 10
    return st["cpu_us_per_record"] + (st["compaction_cpu_s"] + st.get("flush_cpu_s", 0.0)) \
        / records * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=2_000_000, help="keys of the one task")
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--chunk", type=int, default=5000)
    p.add_argument("--barrier-records", type=int, default=70_000,
                   help="records between barriers (~2 s of one task in the job)")
    p.add_argument("--block-cache-mb", type=int,
                   default=state_store.BLOCK_CACHE_BYTES >> 20)
    p.add_argument("--level1-mb", type=int, default=None)
    p.add_argument("--target-file-mb", type=int, default=None)
    p.add_argument("--write-buffer-mb", type=int, default=None)
    p.add_argument("--level0-trigger", type=int, default=None)
    p.add_argument("--compression", default=None, help="none, snappy, lz4, zstd")
    p.add_argument("--compression-per-level", default=None,
                   help="one type a level from L0, e.g. none,none,lz4,lz4,lz4,lz4,lz4")
    p.add_argument("--bottommost", default=None, help="the last level's compression")
    p.add_argument("--level-multiplier", type=float, default=None,
                   help="max_bytes_for_level_multiplier (RocksDB's 10)")
    p.add_argument("--universal", action="store_true",
                   help="universal compaction (--compaction-style universal)")
    p.add_argument("--compaction-style", choices=("level", "universal"), default=None,
                   help="the store's compaction style (default: the store's)")
    p.add_argument("--universal-options", default=None,
                   help='universal compaction\'s options as JSON, e.g. '
                        '\'{"max_size_amplification_percent": 100, "size_ratio": 10}\'')
    p.add_argument("--partitioned", action="store_true",
                   help="partitioned index and filters (two-level index)")
    p.add_argument("--bloom-bits", type=int, default=None)
    p.add_argument("--block-kb", type=int, default=None)
    p.add_argument("--dynamic-levels", choices=("on", "off"), default=None)
    p.add_argument("--memtable-bloom", type=float, default=None,
                   help="memtable bloom filter, this share of the memtable")
    p.add_argument("--block-hash", action="store_true",
                   help="a hash index in each data block (binary_and_hash)")
    p.add_argument("--mmap-reads", action="store_true", help="SST files read through mmap")
    p.add_argument("--filters-for-hits", action="store_true",
                   help="no bloom filters on the last level (optimize_filters_for_hits)")
    p.add_argument("--present-share", type=float, default=None,
                   help="instead of the two permutations: each record reads a key already "
                        "written with this probability, else the next new key (a fixed mix "
                        "while the state grows: 0.5 ends near --keys keys)")
    p.add_argument("--probe-tenths", action="store_true",
                   help="at each tenth, CPU per get of a present and an absent key")
    p.add_argument("--stats", action="store_true",
                   help="at each tenth, RocksDB's counters of the read-modify-write database "
                        "(data-block misses per get, get time, compaction CPU) and the RSS")
    p.add_argument("--rmw-only", action="store_true",
                   help="only the read-modify-write database (no pure-write one beside it)")
    p.add_argument("--shared-cache", action="store_true",
                   help="one block cache of twice --block-cache-mb for both databases (as a "
                        "worker's tasks share one)")
    p.add_argument("--memory-mb", type=int, default=None,
                   help="both databases on one worker's RocksDB memory of this budget "
                        "(Config.rocksdb_memory_mb: a shared cache, memtables charged to it)")
    p.add_argument("--no-verify", action="store_true", help="reads skip checksums")
    p.add_argument("--dir", default=None, help="where the databases go (temp dir)")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    r = run(args)
    report(r)
    if args.json:
        print("BENCH_JSON " + json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
