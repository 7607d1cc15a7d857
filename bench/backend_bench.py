"""Time put/get of a 1M-key pickled dict snapshot (~30 MB) on every state backend.

    .venv/bin/python bench/backend_bench.py [--keys 1000000] [--repeat 3]

hdfs:// and hbase:// run against the in-process protocol test servers
(:mod:`jstormpy.testing.servers.webhdfs`, :mod:`jstormpy.testing.servers.hbase`) on
localhost, so the figures measure the client stack + protocol cost, not a real cluster's
disks/network.
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.testing.servers.hbase import HBaseThriftServer
from jstormpy.testing.servers.webhdfs import WebHdfsServer

log = logging.getLogger("backend_bench")


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench(name: str, backend: StateBackend, blob: bytes, repeat: int) -> tuple[str, ...]:
    """Put then get ``blob`` ``repeat`` times; returns a table row."""
    handle = backend.put_snapshot(1, 0, blob)
    puts = _timed(lambda: backend.put_snapshot(1, 0, blob), repeat)
    gets = _timed(lambda: backend.get_snapshot(handle), repeat)
    assert backend.get_snapshot(handle) == blob
    backend.discard_checkpoint(1)
    mb = len(blob) / 1e6
    put_s, get_s = statistics.median(puts), statistics.median(gets)
    return (name, f"{put_s * 1000:8.0f}", f"{mb / put_s:8.0f}", f"{get_s * 1000:8.0f}",
            f"{mb / get_s:8.0f}")


def main() -> None:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true",
                        help="also print a BENCH_JSON line (for bench/run.py)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    state = {f"user:{i:09d}": (i, i * 0.5) for i in range(args.keys)}
    t0 = time.perf_counter()
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    t_pickle = time.perf_counter() - t0
    t0 = time.perf_counter()
    pickle.loads(blob)
    t_unpickle = time.perf_counter() - t0
    print(f"snapshot: {args.keys:,} keys, {len(blob) / 1e6:.1f} MB pickled "
          f"(pickle {t_pickle * 1000:.0f} ms, unpickle {t_unpickle * 1000:.0f} ms); "
          f"median of {args.repeat}")
    header = ("backend", "put ms", "put MB/s", "get ms", "get MB/s")
    rows = [header]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(bench("memory://", open_backend(f"memory://bench-{uuid.uuid4().hex}"),
                          blob, args.repeat))
        rows.append(bench("file://", open_backend(f"file://{tmp}/file"), blob, args.repeat))
        with WebHdfsServer(Path(tmp) / "hdfs") as hdfs_srv:
            backend = open_backend(f"hdfs://127.0.0.1:{hdfs_srv.port}/bench")
            rows.append(bench("hdfs:// (WebHdfsServer)", backend, blob, args.repeat))
            backend.close()
        with HBaseThriftServer() as hbase_srv:
            backend = open_backend(f"hbase://127.0.0.1:{hbase_srv.port}/bench")
            rows.append(bench("hbase:// (HBaseThriftServer, 1 MiB chunks)", backend, blob,
                              args.repeat))
            backend.close()
    width = max(len(r[0]) for r in rows)
    for row in rows:
        print(f"{row[0]:<{width}} " + " ".join(f"{c:>9}" for c in row[1:]))
    if args.json:
        print("BENCH_JSON " + json.dumps({
            "keys": args.keys, "snapshot_mb": len(blob) / 1e6, "pickle_ms": t_pickle * 1000,
            "unpickle_ms": t_unpickle * 1000,
            "backends": {r[0]: {"put_ms": float(r[1]), "put_mb_s": float(r[2]),
                                "get_ms": float(r[3]), "get_mb_s": float(r[4])}
                         for r in rows[1:]}}), flush=True)


if __name__ == "__main__":
    main()
