"""What level-0 files cost a RocksDB get, apart from the state's size.

For each ``--keys`` size: a database with the store's options
(:func:`jstormpy.state_store.store_options`, its 32 MB block cache; the level-0 triggers
raised so nothing compacts level 0 during the probe) is loaded with that many keys of
``(1, 320-byte value)`` and compacted into the last level; then level-0 files of 70 000
random overwrites each (one barrier's memtable flush in the job) are added, and at 0, 6
and 12 of them the task thread's CPU per get is measured for 100 000 present and 100 000
absent keys (the second of two passes).

    python -m bench.rmw_level0_probe --keys 1000000,3000000,6000000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jstormpy import state_store
from jstormpy.state_store import db_key, encode, rocksdict_module

MAX_PARALLELISM = 128
_MIX, _MASK = 2_654_435_761, (1 << 48) - 1  # as bench/rmw_read_cost.py
LEVEL0_COUNTS = (0, 6, 12)
FILE_WRITES = 70_000
PROBES = 100_000


def key(i: int) -> bytes:
    return db_key((i * _MIX) & _MASK, MAX_PARALLELISM)


def value(i: int, count: int, value_bytes: int) -> bytes:
    k = (i * _MIX) & _MASK
    return encode((count, f"{k:012d}{'v' * value_bytes}"[:value_bytes]))


def probe(n: int, home: Path, value_bytes: int) -> dict[str, Any]:
    rd = rocksdict_module()
    opts = state_store.store_options(rd, rd.Cache(state_store.BLOCK_CACHE_BYTES))
    opts.set_level_zero_file_num_compaction_trigger(100)
    opts.set_level_zero_slowdown_writes_trigger(200)
    opts.set_level_zero_stop_writes_trigger(300)
    db = rd.Rdict(str(home), options=opts)
    for start in range(0, n, 20_000):
        wb = rd.WriteBatch(raw_mode=True)
        for i in range(start, min(n, start + 20_000)):
            wb.put(key(i), value(i, 1, value_bytes))
        db.write(wb)
    db.flush()
    db.compact_range(None, None)
    rng = random.Random(3)
    out: dict[str, Any] = {"keys": n}
    added = 0
    for want in LEVEL0_COUNTS:
        while added < want:
            wb = rd.WriteBatch(raw_mode=True)
            for _ in range(FILE_WRITES):
                i = rng.randrange(n)
                wb.put(key(i), value(i, 2, value_bytes))
            db.write(wb)
            db.flush()
            added += 1
        present = [key(rng.randrange(n)) for _ in range(PROBES)]
        absent = [key(n + 10_000_000 + rng.randrange(n)) for _ in range(PROBES)]
        get = db.get
        for name, keys in (("present", present), ("absent", absent)):
            us = 0.0
            for _ in range(2):  # the second pass is the one kept (the first warms up)
                t = time.thread_time()
                for k in keys:
                    get(k)
                us = (time.thread_time() - t) / len(keys) * 1e6
            out[f"{name}_level0_{want}_us"] = round(us, 2)
    rows = (db.property_value("rocksdb.levelstats") or "").splitlines()[2:]
    out["levels"] = " ".join(f"L{r.split()[0]}:{r.split()[1]}" for r in rows
                             if r.split() and r.split()[1] != "0")
    out["index_filter_mb"] = round(
        int(db.property_int_value("rocksdb.estimate-table-readers-mem") or 0) / 2**20, 1)
    db.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", default="1000000,3000000",
                   help="comma-separated database sizes")
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--dir", default=None)
    args = p.parse_args(argv)
    for n in (int(x) for x in args.keys.split(",")):
        home = Path(tempfile.mkdtemp(prefix="rmw-level0-", dir=args.dir))
        try:
            print(json.dumps(probe(n, home / "db", args.value_bytes)), flush=True)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
