"""What a bigger block cache buys a read at a task's size, in RocksDB alone (issue 34).

A task database of ``--keys`` keys as the store writes them (``db_key`` of an int key,
the value ``encode((count, 320-byte string))`` of the read-modify-write bench), built
once with ``SstFileWriter`` straight into the last level (no compaction: cheap on a
loaded machine), then, for each ``--cache-mb``, opened in a fresh process with the store's
options (:func:`jstormpy.state_store.store_options`) and a block cache of that size:
``--warm`` gets of random present keys to fill the cache, then ``--gets`` more, measured:
RocksDB's data-block cache misses and hits per get, the get's CPU (``time.thread_time``)
and the process's RSS (the cache full). Uniform random keys, as the bench reads them.

    python -m bench.rmw_cache_probe --keys 10000000 --cache-mb 32,128,256
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
from pathlib import Path
from typing import Any

from jstormpy import state_store
from jstormpy.state_store import db_key, encode, parse_statistics, rocksdict_module

MAX_PARALLELISM = 128
FILE_KEYS = 1_000_000  # keys per SST file (~40 MB of compressed file at 320-byte values)


def build(path: Path, keys: int, value_bytes: int) -> float:
    """The database of ``keys`` keys in the last level; returns the build's CPU seconds."""
    rd = rocksdict_module()
    c0 = time.process_time()
    pad = "v" * value_bytes
    entries = sorted((db_key(k, MAX_PARALLELISM), k) for k in range(keys))
    opts = state_store.store_options(rd, rd.Cache(8 << 20), statistics=False)
    files = []
    for start in range(0, keys, FILE_KEYS):
        writer = rd.SstFileWriter(opts)
        name = str(path.parent / f"{path.name}-{start // FILE_KEYS}.sst")
        writer.open(name)
        for key, k in entries[start:start + FILE_KEYS]:
            writer[key] = encode((1, f"{k:012d}{pad}"[:value_bytes]))
        writer.finish()
        files.append(name)
    db = rd.Rdict(str(path), options=opts)
    db.ingest_external_file(files)
    db.close()
    for name in files:
        os.unlink(name)
    # rocksdict opens an existing database with the options of its newest OPTIONS file
    # (their cache's size among them): without one, the probe's options apply
    for found in path.glob("OPTIONS-*"):
        found.unlink()
    return time.process_time() - c0


def probe(path: Path, keys: int, cache_mb: int, warm: int, gets: int) -> dict[str, float]:
    """In this process: open ``path`` with a ``cache_mb`` cache and measure random gets."""
    rd = rocksdict_module()
    for found in path.glob("OPTIONS-*"):  # an earlier probe's (see build)
        found.unlink()
    opts = state_store.store_options(rd, rd.Cache(cache_mb << 20))
    db = rd.Rdict(str(path), options=opts)
    rng = random.Random(cache_mb)
    sample = [db_key(rng.randrange(keys), MAX_PARALLELISM) for _ in range(warm + gets)]
    for key in sample[:warm]:
        assert db.get(key) is not None
    before = parse_statistics(opts.get_statistics() or "")
    c0 = time.thread_time()
    for key in sample[warm:]:
        db.get(key)
    cpu = time.thread_time() - c0
    after = parse_statistics(opts.get_statistics() or "")

    def per_get(name: str) -> float:
        return (after.get(name, 0.0) - before.get(name, 0.0)) / gets

    rss = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    out = {
        "cache_mb": cache_mb, "cpu_us_per_get": cpu / gets * 1e6,
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=2_000_000)
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--cache-mb", default="32,128,256", help="block cache sizes, comma-separated")
    p.add_argument("--warm", type=int, default=300_000, help="gets that fill the cache first")
    p.add_argument("--gets", type=int, default=100_000, help="gets measured")
    p.add_argument("--dir", default=None)
    p.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # the child's database
    args = p.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(Path(args.probe), args.keys, int(args.cache_mb), args.warm,
                               args.gets)))
        return 0
    home = Path(tempfile.mkdtemp(prefix="rmw-cache-", dir=args.dir))
    try:
        db = home / "db"
        cpu = build(db, args.keys, args.value_bytes)
        print(f"{args.keys:,} keys built in {cpu:.0f} s of CPU", flush=True)
        for mb in (int(x) for x in args.cache_mb.split(",")):
            out = subprocess.run(
                [sys.executable, "-m", "bench.rmw_cache_probe", "--probe", str(db),
                 "--keys", str(args.keys), "--cache-mb", str(mb), "--warm", str(args.warm),
                 "--gets", str(args.gets)], check=True, capture_output=True, text=True)
            r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  cache {mb} MB: {r['cpu_us_per_get']:.2f} µs CPU a get, data-block "
                  f"misses / hits per get {r['data_misses_per_get']:.3f} / "
                  f"{r['data_hits_per_get']:.3f}, cache used {r['cache_used_mb']:.0f} of "
                  f"{r['cache_capacity_mb']:.0f} MB, "
                  f"SST {r['sst_mb']:.0f} MB, table readers {r['table_readers_mb']:.0f} MB, "
                  f"RSS {r['rss_mb']:.0f} MB", flush=True)
            print("BENCH_JSON " + json.dumps({"keys": args.keys, **r}), flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
