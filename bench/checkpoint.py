"""Checkpoint costs.

1. Checkpoint duration p50/p99 (trigger → metadata written, from ``status()["checkpoints"]``)
   during an exactly-once word count at full speed.
2. Snapshot of 1M keys of managed state: a bolt whose state dict holds ``--keys`` keys;
   ``handle.checkpoint()`` is forced ``--repeat`` times and its duration read from status;
   pickling the same dict in this process is timed too.
3. Exactly-once overhead % = 1 − eo/amo words/s (word count, same checkpoint interval).

    python bench/checkpoint.py [--sentences 200000] [--checkpoint-interval-ms 1000]
                               [--keys 1000000] [--repeat 3] [--no-overhead] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cloudpickle  # noqa: E402
from _common import bench_home, emit_json, fmt_rate, mb, median, pct, run_wordcount  # noqa: E402

from jstormpy import Bolt, Config, LocalCluster, Spout, TopologyBuilder  # noqa: E402


class IdleSpout(Spout):
    """A replayable spout that emits a trickle (1 tuple per call, ~100/s) forever."""

    outputs = ("n",)

    def __init__(self) -> None:
        self.offset = 0

    def next_tuple(self):
        time.sleep(0.01)
        self.emit((self.offset,))
        self.offset += 1

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class BigState(Bolt):
    """Holds ``keys`` keys of managed state (filled in prepare, like a warmed-up count)."""

    outputs = ()

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def prepare(self, conf, context):
        self.table = self.state("table")
        if not self.table:
            for i in range(self.keys):
                self.table[f"key:{i:09d}"] = i

    def execute(self, tup):
        self.table[f"key:{tup.values[0] % self.keys:09d}"] = tup.values[0]


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def snapshot_1m(keys: int, repeat: int, timeout_s: float = 180.0,
                state_backend: str = "") -> dict:
    """Force checkpoints of a topology holding ``keys`` keys of state; read their duration."""
    state = {f"key:{i:09d}": i for i in range(keys)}
    t0 = time.perf_counter()
    blob = pickle.dumps({"states": {"table": state}}, protocol=pickle.HIGHEST_PROTOCOL)
    pickle_ms = (time.perf_counter() - t0) * 1000
    size = len(blob)
    del state, blob
    with bench_home():
        b = TopologyBuilder("bench-bigstate")
        b.set_spout("trickle", IdleSpout(), parallelism=1)
        b.set_bolt("big", BigState(keys), parallelism=1).shuffle_grouping("trickle")
        conf = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=3_600_000,
                      checkpoint_timeout_ms=int(timeout_s * 1000), log_level="WARNING",
                      state_backend=state_backend)
        with LocalCluster() as cluster:
            handle = cluster.submit(b.build(), conf)
            deadline = time.monotonic() + timeout_s
            while handle.status()["state"] != "running":
                if time.monotonic() > deadline:
                    raise TimeoutError("big-state topology did not start")
                time.sleep(0.1)
            durations, sizes, rss = [], [], {}
            for _ in range(repeat):
                cid = handle.checkpoint(timeout_s=timeout_s)
                st = handle.status()
                entry = next(c for c in st["checkpoints"] if c["id"] == cid)
                durations.append(entry["duration_ms"])
                sizes.append(entry["size_bytes"])
                for w in st["workers"]:
                    rss[w["id"]] = max(rss.get(w["id"], 0), w.get("rss_bytes") or 0)
    return {"keys": keys, "pickle_ms": pickle_ms, "pickled_bytes": size,
            "checkpoint_ms": durations, "checkpoint_ms_median": median(durations),
            "snapshot_bytes": max(sizes), "worker_rss_bytes": rss}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=200_000)
    p.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-overhead", action="store_true",
                   help="skip the at-most-once run (overhead % not computed)")
    p.add_argument("--timeout", type=float, default=240.0)
    p.add_argument("--backend", choices=["file", "hdfs", "hbase"], default="file",
                   help="state backend; hdfs/hbase use the protocol test servers of "
                        "jstormpy.testing, started here on loopback")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with backend_uri(args.backend) as uri:
        return run(args, uri)


@contextlib.contextmanager
def backend_uri(kind: str):
    """The state-backend URI for ``kind`` (a test server runs while the context is open)."""
    if kind == "file":
        yield ""
    elif kind == "hdfs":
        from jstormpy.testing.servers.webhdfs import WebHdfsServer

        with WebHdfsServer(tempfile.mkdtemp(prefix="bench-hdfs-")) as server:
            yield f"hdfs://127.0.0.1:{server.port}/jstorm/ckpt"
    else:
        from jstormpy.testing.servers.hbase import HBaseThriftServer

        with HBaseThriftServer() as server:
            yield f"hbase://127.0.0.1:{server.port}/jstorm_ckpt"


def run(args: argparse.Namespace, uri: str) -> dict:
    out = sys.stderr if args.json else sys.stdout

    def say(*a):
        print(*a, file=out, flush=True)

    result: dict = {}
    result["backend"] = args.backend
    eo = run_wordcount(args.sentences, "exactly_once", args.checkpoint_interval_ms,
                       timeout_s=args.timeout, state_backend=uri)
    durs = [c["duration_ms"] for c in eo["checkpoints"]]
    aligns = [c["alignment_ms"] for c in eo["checkpoints"]]
    result["wordcount_checkpoints"] = {
        "n": len(durs), "p50_ms": pct(durs, 0.5), "p99_ms": pct(durs, 0.99),
        "max_ms": max(durs) if durs else None, "alignment_p50_ms": pct(aligns, 0.5),
        "alignment_max_ms": max(aligns) if aligns else None,
        "interval_ms": args.checkpoint_interval_ms}
    result["eo_words_per_s"] = eo["words_per_s"]
    c = result["wordcount_checkpoints"]
    say(f"[{args.backend}] exactly-once word count: {fmt_rate(eo['words_per_s'])} words/s; "
        f"{c['n']} checkpoints "
        f"every {args.checkpoint_interval_ms} ms: duration p50 {c['p50_ms']} ms, p99 "
        f"{c['p99_ms']} ms, max {c['max_ms']} ms (alignment p50 {c['alignment_p50_ms']} ms, "
        f"max {c['alignment_max_ms']} ms)")
    if not args.no_overhead:
        amo = run_wordcount(args.sentences, "at_most_once", args.checkpoint_interval_ms,
                            timeout_s=args.timeout)
        result["amo_words_per_s"] = amo["words_per_s"]
        result["eo_overhead_pct"] = (1 - eo["words_per_s"] / amo["words_per_s"]) * 100
        say(f"at-most-once word count: {fmt_rate(amo['words_per_s'])} words/s → exactly-once "
            f"overhead {result['eo_overhead_pct']:.1f} %")
    if args.keys:
        big = snapshot_1m(args.keys, args.repeat, args.timeout, uri)
        result["big_state"] = big
        say(f"{big['keys']:,} keys of managed state: pickle in-process {big['pickle_ms']:.0f} ms "
            f"({big['pickled_bytes'] / 1e6:.1f} MB); forced checkpoint {big['checkpoint_ms']} ms "
            f"(median {big['checkpoint_ms_median']:.0f} ms, snapshot "
            f"{big['snapshot_bytes'] / 1e6:.1f} MB); worker RSS "
            + ", ".join(f"w{w}={mb(v)}" for w, v in sorted(big["worker_rss_bytes"].items())))
    if args.json:
        emit_json(result)
    return result


if __name__ == "__main__":
    main()
