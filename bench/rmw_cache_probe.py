"""What a bigger block cache or another table layout buys a read at a task's size, in
RocksDB alone (issue 34).

A task database of ``--keys`` keys as the store writes them (``db_key`` of an int key,
the value ``encode((count, 320-byte string))`` of the read-modify-write bench), built
once with ``SstFileWriter`` straight into the last level (no compaction: cheap on a
loaded machine), then, for each ``--cache-mb``, opened in a fresh process with the store's
options (:func:`jstormpy.state_store.store_options`) and a block cache of that size:
``--warm`` gets of random present keys to fill the cache, then ``--gets`` more (each
filling the cache or not as the store's reads do: ``READ_CACHE_ADMISSION``), measured:
RocksDB's data-block cache misses and hits per get, the get's CPU (``time.thread_time``)
and the process's RSS (the cache full), then the CPU of as many gets of absent keys.
Uniform random keys, as the bench reads them.

``--tables`` compares table layouts (block size, compression, the index's restart
interval, partitioned index and filters: :data:`TABLES`), each baked into its own build of
the database (in files of ``--file-keys`` keys: 160 000 is about the store's 8 MB files);
``--keys`` takes several sizes, to see what a get's cost does as the state grows; with
``--repeat N`` the candidates' probes alternate N times and the medians are printed, so a
change in the machine's load falls on all of them alike.

    python -m bench.rmw_cache_probe --keys 10000000 --cache-mb 32,128,256
    python -m bench.rmw_cache_probe --keys 1000000,10000000 --file-keys 160000 \\
        --tables irestart1,store --repeat 5
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

from jstormpy import state_store
from jstormpy.state_store import db_key, encode, parse_statistics, rocksdict_module

MAX_PARALLELISM = 128
FILE_KEYS = 1_000_000  # keys per SST file (~40 MB of compressed file at 320-byte values)


TABLES: dict[str, dict[str, Any]] = {
    "store": {},
    "block8k": {"block_kb": 8},
    "block16k": {"block_kb": 16},
    "irestart16": {"index_restart": 16},
    "lz4": {"compression": "lz4"},
    "nocompress": {"compression": "none"},
    "bloom16": {"bloom_bits": 16},
    "irestart1": {"index_restart": 1},  # the store's before issue 34's index change
    "irestart8": {"index_restart": 8},
    "irestart32": {"index_restart": 32},
    "irestart16-lz4": {"index_restart": 16, "compression": "lz4"},
    "partitioned": {"partitioned": True},
    "blockhash": {"block_hash": True},
    "block2k": {"block_kb": 2},
}
"""``--tables`` candidates: table options on top of the store's, baked into the files at
their build (block size, compression, filter, index layout)."""


def table_options(rd: Any, cache: Any, table: str, statistics: bool = True) -> Any:
    """The store's options (:func:`jstormpy.state_store.store_options`) with the table
    candidate ``table`` (:data:`TABLES`) on top."""
    opts = state_store.store_options(rd, cache, statistics=statistics)
    t = TABLES[table]
    if not t:
        return opts
    if "compression" in t:
        opts.set_compression_type(getattr(rd.DBCompressionType, t["compression"])())
    bbo = rd.BlockBasedOptions()
    bbo.set_bloom_filter(t.get("bloom_bits", 10), False)
    bbo.set_block_cache(cache)
    bbo.set_cache_index_and_filter_blocks(False)
    bbo.set_index_block_restart_interval(state_store.INDEX_RESTART_INTERVAL)
    if "block_kb" in t:
        bbo.set_block_size(t["block_kb"] << 10)
    if "index_restart" in t:
        bbo.set_index_block_restart_interval(t["index_restart"])
    if t.get("block_hash"):
        bbo.set_data_block_index_type(rd.DataBlockIndexType.binary_and_hash())
    if t.get("partitioned"):
        bbo.set_index_type(rd.BlockBasedIndexType.two_level_index_search())
        bbo.set_partition_filters(True)
        bbo.set_cache_index_and_filter_blocks(True)
        bbo.set_pin_top_level_index_and_filter(True)
        bbo.set_pin_l0_filter_and_index_blocks_in_cache(True)
    opts.set_block_based_table_factory(bbo)
    return opts


def build(path: Path, keys: int, value_bytes: int, table: str = "store",
          file_keys: int = FILE_KEYS) -> float:
    """The database of ``keys`` keys in the last level, in files of ``file_keys`` keys
    written with the table candidate ``table``; returns the build's CPU seconds."""
    rd = rocksdict_module()
    c0 = time.process_time()
    pad = "v" * value_bytes
    entries = sorted((db_key(k, MAX_PARALLELISM), k) for k in range(keys))
    opts = table_options(rd, rd.Cache(8 << 20), table, statistics=False)
    files = []
    for start in range(0, keys, file_keys):
        writer = rd.SstFileWriter(opts)
        name = str(path.parent / f"{path.name}-{start // file_keys}.sst")
        writer.open(name)
        for key, k in entries[start:start + file_keys]:
            writer[key] = encode((1, f"{k:012d}{pad}"[:value_bytes]))
        writer.finish()
        files.append(name)
    db = rd.Rdict(str(path), options=opts)
    db.ingest_external_file(files)
    db.close()
    for name in files:
        os.unlink(name)
    forget_options(path)
    return time.process_time() - c0


def forget_options(path: Path) -> None:
    """Remove the database's OPTIONS files: rocksdict opens an existing database with the
    options of its newest one (their cache's size among them), so without one the
    probe's own options apply."""
    for found in path.glob("OPTIONS-*"):
        found.unlink()


def read_all(db: Any, keys: list[bytes], share: float, uncached: Any,
             draw: Callable[[], float]) -> float:
    """Get each of ``keys``, a ``share`` of the gets (by ``draw``) adding their block to
    the cache and the others with ``uncached`` (``fill_cache`` off), as the store reads
    (``RocksState._entry``); returns the thread's CPU seconds."""
    get = db.get
    c0 = time.thread_time()
    for key in keys:
        if draw() < share:
            get(key)
        else:
            get(key, None, uncached)
    return time.thread_time() - c0


def probe(path: Path, keys: int, cache_mb: int, warm: int, gets: int,
          table: str = "store") -> dict[str, float]:
    """In this process: open ``path`` with a ``cache_mb`` cache and measure random gets
    of present keys, then (``absent_us_per_get``) as many of absent ones."""
    rd = rocksdict_module()
    forget_options(path)  # an earlier probe's
    opts = table_options(rd, rd.Cache(cache_mb << 20), table)
    db = rd.Rdict(str(path), options=opts)
    rng = random.Random(cache_mb)
    sample = [db_key(rng.randrange(keys), MAX_PARALLELISM) for _ in range(warm + gets)]
    absent = [db_key(keys + rng.randrange(keys), MAX_PARALLELISM) for _ in range(gets)]
    # as the store reads (RocksState._entry): a READ_CACHE_ADMISSION share of the gets
    # may add their block to the cache, the others read with fill_cache off
    uncached = rd.ReadOptions()
    uncached.fill_cache(False)
    draw, share, get = random.Random(11).random, state_store.READ_CACHE_ADMISSION, db.get
    for key in sample[:warm]:
        assert (get(key) if draw() < share else get(key, None, uncached)) is not None
    before = parse_statistics(opts.get_statistics() or "")
    cpu = read_all(db, sample[warm:], share, uncached, draw)
    after = parse_statistics(opts.get_statistics() or "")
    absent_cpu = read_all(db, absent, share, uncached, draw)

    def per_get(name: str) -> float:
        return (after.get(name, 0.0) - before.get(name, 0.0)) / gets

    rss = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    out = {
        "cache_mb": cache_mb, "table": table, "cpu_us_per_get": cpu / gets * 1e6,
        "absent_us_per_get": absent_cpu / gets * 1e6,
        "data_misses_per_get": per_get("rocksdb.block.cache.data.miss"),
        "data_hits_per_get": per_get("rocksdb.block.cache.data.hit"),
        "cache_capacity_mb": db.property_int_value("rocksdb.block-cache-capacity") / 2**20,
        "cache_used_mb": db.property_int_value("rocksdb.block-cache-usage") / 2**20,
        "sst_mb": db.property_int_value("rocksdb.total-sst-files-size") / 2**20,
        "table_readers_mb": db.property_int_value("rocksdb.estimate-table-readers-mem") / 2**20,
        "rss_mb": rss,
    }
    db.close()
    return out


def run_probe(db: Path, keys: int, mb: int, table: str,
              args: argparse.Namespace) -> dict[str, Any]:
    """One probe in a fresh process; prints its line and returns its figures."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.rmw_cache_probe", "--probe", str(db),
         "--keys", str(keys), "--cache-mb", str(mb), "--warm", str(args.warm),
         "--gets", str(args.gets), "--tables", table],
        check=True, capture_output=True, text=True)
    r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {table}, cache {mb} MB: {r['cpu_us_per_get']:.2f} µs CPU a present get, "
          f"{r['absent_us_per_get']:.2f} an absent one, data-block "
          f"misses / hits per get {r['data_misses_per_get']:.3f} / "
          f"{r['data_hits_per_get']:.3f}, cache used {r['cache_used_mb']:.0f} of "
          f"{r['cache_capacity_mb']:.0f} MB, SST {r['sst_mb']:.0f} MB, table "
          f"readers {r['table_readers_mb']:.1f} MB, RSS {r['rss_mb']:.0f} MB", flush=True)
    print("BENCH_JSON " + json.dumps({"keys": keys, **r}), flush=True)
    return r


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", default="2000000", help="database sizes, comma-separated")
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--cache-mb", default="32", help="block cache sizes, comma-separated")
    p.add_argument("--tables", default="store",
                   help=f"table candidates, comma-separated, each built anew: {', '.join(TABLES)}")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of probes, the candidates alternating; medians printed")
    p.add_argument("--file-keys", type=int, default=FILE_KEYS, help="keys per SST file")
    p.add_argument("--warm", type=int, default=300_000, help="gets that fill the cache first")
    p.add_argument("--gets", type=int, default=100_000, help="gets measured")
    p.add_argument("--dir", default=None)
    p.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # the child's database
    args = p.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(Path(args.probe), int(args.keys), int(args.cache_mb), args.warm,
                               args.gets, args.tables)))
        return 0
    tables = args.tables.split(",")
    for keys in (int(x) for x in args.keys.split(",")):
        home = Path(tempfile.mkdtemp(prefix="rmw-cache-", dir=args.dir))
        try:
            for table in tables:
                cpu = build(home / table, keys, args.value_bytes, table, args.file_keys)
                print(f"{keys:,} keys, table {table}: built in {cpu:.0f} s of CPU", flush=True)
            # the candidates' probes alternate (--repeat rounds), so a change in the
            # machine's load falls on all of them alike
            runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
            for _ in range(args.repeat):
                for table in tables:
                    for mb in (int(x) for x in args.cache_mb.split(",")):
                        r = run_probe(home / table, keys, mb, table, args)
                        runs.setdefault((table, mb), []).append(r)
            if args.repeat > 1:
                for (table, mb), rs in runs.items():
                    present = sorted(r["cpu_us_per_get"] for r in rs)
                    absent = sorted(r["absent_us_per_get"] for r in rs)
                    print(f"{keys:,} keys, table {table}, cache {mb} MB, median of "
                          f"{len(rs)}: {present[len(rs) // 2]:.2f} µs a present get "
                          f"(min {present[0]:.2f}), {absent[len(rs) // 2]:.2f} an absent one",
                          flush=True)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
