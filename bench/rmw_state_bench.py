"""Large state as users write it (issue 34): read-modify-write on RocksDB with the defaults.

The job a new user writes from docs/state-stores.md: ``Config(state_store="rocksdb")`` and
nothing else about checkpoints (so the store's default, incremental checkpoint), 2
workers, a checkpoint every ``--interval-ms`` (2 s), a ``file://`` backend. A replayable
spout (2 tasks) emits ``--keys`` keys twice each (a position's key comes from one of two
permutations, so a key is often new and often present); a bolt (2 tasks, fields grouping)
does the most common stateful thing::

    old = kv.get(k)
    kv[k] = (old[0] + 1 if old else 1, value)      # a --value-bytes (320) value

and emits ``(key, count)`` once a key's count reaches 2 into a ``FileSink``. One worker is
SIGKILLed early (after the first completed checkpoint past ``--kill-at`` of the records).
At the end the committed output is checked exactly once: every key once, with count 2.

Reported: time from submit to drained, records/s per tenth of the records (with about how
many keys the state held then), each worker's peak RSS, the checkpoints completed against
those due (one per interval from the first trigger until drained), checkpoint bytes p50
and max against the state's logical size (keys × value bytes), and the TM's checkpoint
durations.

``--write-only`` runs the same job without the read (``kv[k] = (1, value)``, no output):
the pure-write rate read-modify-write is measured against.

    python -m bench.rmw_state_bench --keys 3000000          # the issue's job
    python -m bench.rmw_state_bench --keys 20000000 --no-kill [--write-only]
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import cloudpickle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import bench_home, emit_json, pct  # noqa: E402
from big_state_bench import RssSampler, disk_bytes  # noqa: E402

from jstormpy import (  # noqa: E402
    Bolt,
    Config,
    FileSink,
    LocalCluster,
    Spout,
    TopologyBuilder,
    read_committed,
)

CHUNK = 500
"""Records a spout emits per ``next_tuple`` call."""

_A1, _A2 = 2_654_435_761, 1_597_334_677  # multipliers of the two permutations


def permutation(n: int, a: int) -> tuple[int, int]:
    """An affine permutation ``t -> (a * t + b) % n`` of ``range(n)`` (``a`` made coprime)."""
    while math.gcd(a, n) != 1:
        a += 1
    return a, n // 3


class TwiceKeys(Spout):
    """Emits positions ``0 .. 2 * keys - 1`` split over its tasks: an even position
    ``2t`` carries key ``p1(t)`` (its first write), an odd one ``2t + 1`` key ``p2(t)``
    (its second: present if ``p1`` reached it already). The position is the snapshot."""

    outputs = ("key",)

    def __init__(self, keys: int) -> None:
        self.keys = keys
        self.pos = 0

    def open(self, conf, context):
        self.par, self.idx = context.parallelism, context.task_index
        self.p1 = permutation(self.keys, _A1)
        self.p2 = permutation(self.keys, _A2)
        self.mine = len(range(self.idx, 2 * self.keys, self.par))

    def next_tuple(self):
        if self.pos >= self.mine:
            return self.finish()
        emit, n, par, idx = self.emit, self.keys, self.par, self.idx
        (a1, b1), (a2, b2) = self.p1, self.p2
        end = min(self.mine, self.pos + CHUNK)
        for j in range(self.pos, end):
            i = idx + j * par
            t = i >> 1
            emit(((a2 * t + b2) % n if i & 1 else (a1 * t + b1) % n,))
        self.pos = end

    def snapshot(self):
        return self.pos

    def restore(self, snap):
        self.pos = snap


class CountTwice(Bolt):
    """Read-modify-write of ``(count, value)`` per key; emits a key once its count
    reaches 2 (a replayed write would emit it again with 3: a duplicate shows)."""

    outputs = ("key", "count")

    def __init__(self, value_bytes: int, write_only: bool = False) -> None:
        self.value_bytes = value_bytes
        self.write_only = write_only

    def prepare(self, conf, context):
        self.kv = self.state("kv")
        self.pad = "v" * self.value_bytes

    def execute(self, tup):
        k = tup.values[0]
        value = f"{k:012d}{self.pad}"[:self.value_bytes]
        if self.write_only:
            self.kv[k] = (1, value)
            return
        old = self.kv.get(k)
        count = old[0] + 1 if old else 1
        self.kv[k] = (count, value)
        if count >= 2:
            self.emit((k, count))


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def build(keys: int, value_bytes: int, out: Path, write_only: bool = False):
    b = TopologyBuilder("bench-rmw-state")
    b.set_spout("keys", TwiceKeys(keys), parallelism=2)
    b.set_bolt("kv", CountTwice(value_bytes, write_only), parallelism=2) \
        .fields_grouping("keys", ["key"])
    if not write_only:
        b.set_bolt("out", FileSink(str(out), format="jsonl")).shuffle_grouping("kv")
    return b.build()


def verify(out: Path, keys: int) -> list[str]:
    """Problems with the committed output (empty: exactly once)."""
    seen: dict[int, int] = {}
    dups = wrong = 0
    for rec in read_committed(str(out)):
        k = rec["key"]
        if k in seen:
            dups += 1
        seen[k] = rec["count"]
        wrong += rec["count"] != 2
    problems = []
    if len(seen) != keys:
        problems.append(f"{keys - len(seen)} of {keys} keys missing")
    if dups:
        problems.append(f"{dups} duplicate records")
    if wrong:
        problems.append(f"{wrong} records with a count other than 2")
    return problems


def executed(handle: Any) -> int:
    m = handle.metrics("kv")
    return sum(int(v["executed"]) for v in m.get("tasks", {}).values())


def run(args: argparse.Namespace) -> dict[str, Any]:
    with bench_home() as home:
        return _run(args, home)


def _run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    out = home / "out"
    total = 2 * args.keys
    conf = Config(workers=2, checkpoint_interval_ms=args.interval_ms,
                  state_store="rocksdb", state_store_dir=str(home / "state"),
                  state_backend=f"file://{home}/ckpt")
    checkpoints: dict[int, dict[str, Any]] = {}
    tenths: list[dict[str, Any]] = []
    kill: dict[str, Any] | None = None
    with LocalCluster() as cluster:
        t0 = time.monotonic()
        handle = cluster.submit(build(args.keys, args.value_bytes, out, args.write_only),
                                conf)
        rss = RssSampler(handle)
        rss.start()
        last_tenth, last_t, last_n, last_print = 0, t0, 0, t0
        while True:
            st = handle.status()
            if st["state"] in ("failed", "killed"):
                raise RuntimeError(f"topology {st['state']}: {st.get('failure')}")
            for c in st.get("checkpoints", []):
                checkpoints.setdefault(c["id"], c)
            if st["state"] == "drained":
                break
            now = time.monotonic()
            n = executed(handle)
            # a restarted worker's counters start over: count what the generation redid
            while last_tenth < 10 and n >= (last_tenth + 1) * total // 10:
                f = (last_tenth + 1) / 10
                tenths.append({"records": n, "fraction": f,
                               "keys_loaded_about": round(args.keys * f * (2 - f)),
                               "records_per_s": (n - last_n) / max(now - last_t, 1e-9)})
                last_tenth, last_t, last_n = last_tenth + 1, now, n
            completed = [c for c in checkpoints.values() if c["status"] == "completed"]
            if (args.kill and kill is None and n >= args.kill_at * total and completed):
                pid = next(w["pid"] for w in st["workers"] if w["id"] == 1)
                os.kill(pid, signal.SIGKILL)
                kill = {"at_records": n, "at_s": now - t0, "pid": pid}
                print(f"[{now - t0:6.1f} s] SIGKILL worker 1 (pid {pid}) at {n:,} records",
                      flush=True)
            if now - last_print >= args.progress_s:
                last_print = now
                last = completed[-1] if completed else None
                cp = (f"last checkpoint {last['id']}: {last['size_bytes'] / 1e6:.1f} MB in "
                      f"{last['duration_ms']:.0f} ms" if last else "no checkpoint yet")
                mem = ", ".join(f"w{w} {b / 1e6:.0f} MB" for w, b in sorted(rss.last.items()))
                print(f"[{now - t0:6.1f} s] {n:,} records ({n / max(now - t0, 1e-9):,.0f}/s); "
                      f"RSS {mem}; {cp}; load {os.getloadavg()[0]:.1f}", flush=True)
            time.sleep(0.25)  # the poll interval of this loop
        elapsed = time.monotonic() - t0
        drained_wall = time.time()
        rss.stop.set()
        peak = dict(rss.peak)
        state_dir = disk_bytes(home / "state")
    done = sorted((c for c in checkpoints.values() if c["status"] == "completed"),
                  key=lambda c: c["id"])
    sizes = [c["size_bytes"] for c in done]
    logical = args.keys * args.value_bytes
    # due: one per interval from the first trigger (start-up spawns processes first) until
    # the topology drained
    first = min((c["started_at"] for c in checkpoints.values()), default=drained_wall)
    due = int(max(0.0, drained_wall - first) * 1000 // args.interval_ms) + 1
    result = {
        "keys": args.keys, "value_bytes": args.value_bytes, "write_only": args.write_only,
        "interval_ms": args.interval_ms, "elapsed_s": elapsed,
        "records_per_s": total / elapsed, "tenths": tenths, "kill": kill,
        "peak_rss_bytes": peak, "state_dir_bytes": state_dir, "logical_state_bytes": logical,
        "checkpoints_completed": len(done), "checkpoints_due": due,
        "checkpoints_failed": sum(c["status"] != "completed" for c in checkpoints.values()),
        "checkpoint_bytes_p50": pct(sizes, 0.5) if sizes else None,
        "checkpoint_bytes_max": max(sizes) if sizes else None,
        "checkpoint_ms_p50": pct([c["duration_ms"] for c in done], 0.5) if done else None,
        "checkpoint_ms_max": max(c["duration_ms"] for c in done) if done else None,
        "alignment_ms_p50": pct([c["alignment_ms"] for c in done], 0.5) if done else None,
        "history": [{k: c[k] for k in ("id", "status", "duration_ms", "alignment_ms",
                                       "size_bytes", "started_at")}
                    for c in sorted(checkpoints.values(), key=lambda c: c["id"])],
        "problems": [] if args.write_only else verify(out, args.keys),
    }
    return result


def report(r: dict[str, Any]) -> None:
    what = "pure write" if r["write_only"] else "read-modify-write"
    print(f"\n{what}, {r['keys']:,} keys x 2 writes of {r['value_bytes']} B: "
          f"{r['elapsed_s']:.1f} s submit to drained, {r['records_per_s']:,.0f} records/s")
    for t in r["tenths"]:
        print(f"  up to {t['fraction']:.0%} of the records (~{t['keys_loaded_about']:,} keys): "
              f"{t['records_per_s']:,.0f} records/s")
    print("  peak RSS: " + ", ".join(f"worker {w} {b / 1e6:.0f} MB"
                                     for w, b in sorted(r["peak_rss_bytes"].items())))
    p50 = r["checkpoint_bytes_p50"]
    print(f"  checkpoints: {r['checkpoints_completed']} completed of {r['checkpoints_due']} due, "
          f"{r['checkpoints_failed']} failed; bytes p50 "
          f"{(p50 or 0) / 1e6:.1f} MB = {(p50 or 0) / r['logical_state_bytes']:.2%} of the "
          f"state's {r['logical_state_bytes'] / 1e6:.0f} MB (max "
          f"{(r['checkpoint_bytes_max'] or 0) / 1e6:.1f} MB); duration p50 "
          f"{r['checkpoint_ms_p50'] or 0:.0f} ms, max {r['checkpoint_ms_max'] or 0:.0f} ms")
    if not r["write_only"]:
        print("  exactly once: " + ("yes, every key once with count 2" if not r["problems"]
                                    else "; ".join(r["problems"])))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=3_000_000)
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--interval-ms", type=int, default=2000, help="checkpoint interval")
    p.add_argument("--write-only", action="store_true", help="no read: the pure-write rate")
    p.add_argument("--no-kill", dest="kill", action="store_false")
    p.add_argument("--kill-at", type=float, default=0.1,
                   help="share of the records processed before worker 1 is SIGKILLed")
    p.add_argument("--progress-s", type=float, default=15.0)
    p.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    args = p.parse_args(argv)
    r = run(args)
    report(r)
    if args.json:
        emit_json(r)
    return 1 if r["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
