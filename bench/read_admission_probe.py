"""Which point reads should fill the block cache (issue 34; ``READ_CACHE_ADMISSION`` in
jstormpy/state_store.py), in RocksDB alone.

One task database of ``--keys`` keys as the store writes them, built straight into the
last level (:func:`bench.rmw_cache_probe.build`), opened with the store's options and a
32 MB block cache. Gets of present keys, each adding the data block it read to the cache
with probability ``share`` (one of ``--shares``; the others with RocksDB's ``fill_cache``
off, as the store reads), in two patterns:

- ``uniform``: keys drawn from the whole database (a big state read at random: the
  cache can hold a few per cent of its blocks whatever enters it);
- ``hot``: 80 % of the reads on ``--hot-keys`` keys (their blocks fit the cache), the rest
  uniform.

Printed per share and pattern: the get's CPU (``time.thread_time``, medians of
``--repeat`` rounds, the shares alternating so a change in the machine's load falls on all
alike) and the data-block cache's hit ratio (RocksDB's statistics).

    python -m bench.read_admission_probe --keys 10000000
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.rmw_cache_probe import (
    MAX_PARALLELISM,
    build,
    forget_options,
    read_all,
    table_options,
)
from jstormpy.state_store import db_key, parse_statistics, rocksdict_module

HIT, MISS = "rocksdb.block.cache.data.hit", "rocksdb.block.cache.data.miss"


def measure(db: Any, opts: Any, keys: list[bytes], share: float,
            uncached: Any) -> tuple[float, float]:
    """CPU µs per get and the data-block hit ratio of reading ``keys``, a ``share`` of
    the reads filling the cache."""
    before = parse_statistics(opts.get_statistics() or "")
    cpu = read_all(db, keys, share, uncached, random.Random(11).random)
    after = parse_statistics(opts.get_statistics() or "")
    hits = after.get(HIT, 0.0) - before.get(HIT, 0.0)
    misses = after.get(MISS, 0.0) - before.get(MISS, 0.0)
    return cpu / len(keys) * 1e6, hits / max(1.0, hits + misses)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=10_000_000)
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--shares", default="1,0.125,0.0625,0.03125,0",
                   help="shares of the reads that fill the cache, comma-separated")
    p.add_argument("--gets", type=int, default=300_000, help="gets per round and pattern")
    p.add_argument("--hot-keys", type=int, default=5_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache-mb", type=int, default=32)
    p.add_argument("--dir", default=None)
    args = p.parse_args(argv)
    shares = [float(x) for x in args.shares.split(",")]
    home = Path(tempfile.mkdtemp(prefix="read-admission-", dir=args.dir))
    try:
        cpu = build(home / "db", args.keys, args.value_bytes, file_keys=160_000)
        print(f"{args.keys:,} keys built in {cpu:.0f} s of CPU", flush=True)
        rd = rocksdict_module()
        forget_options(home / "db")
        results: dict[tuple[str, float], list[tuple[float, float]]] = {}
        rng = random.Random(5)
        hot = [db_key(rng.randrange(args.keys), MAX_PARALLELISM) for _ in range(args.hot_keys)]
        for _ in range(args.repeat):
            for share in shares:
                # a fresh cache per share and round: each starts from the same (empty) cache
                opts = table_options(rd, rd.Cache(args.cache_mb << 20), "store")
                db = rd.Rdict(str(home / "db"), options=opts)
                uncached = rd.ReadOptions()
                uncached.fill_cache(False)
                uniform = [db_key(rng.randrange(args.keys), MAX_PARALLELISM)
                           for _ in range(args.gets)]
                mixed = [hot[rng.randrange(len(hot))] if rng.random() < 0.8
                         else db_key(rng.randrange(args.keys), MAX_PARALLELISM)
                         for _ in range(2 * args.gets)]
                results.setdefault(("uniform", share), []).append(
                    measure(db, opts, uniform, share, uncached))
                measure(db, opts, mixed[:args.gets], share, uncached)  # the hot set warms
                results.setdefault(("hot", share), []).append(
                    measure(db, opts, mixed[args.gets:], share, uncached))
                db.close()
                forget_options(home / "db")
        for (pattern, share), rs in sorted(results.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
            us = sorted(r[0] for r in rs)
            ratio = sorted(r[1] for r in rs)
            print(f"{pattern:7} share {share:<7g}: {us[len(us) // 2]:.2f} µs a get "
                  f"(min {us[0]:.2f}, max {us[-1]:.2f}), data-block hit ratio "
                  f"{ratio[len(ratio) // 2]:.3f}", flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
