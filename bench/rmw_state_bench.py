"""Large state as users write it (issue 34): read-modify-write on RocksDB with the defaults.

The job a new user writes from docs/state-stores.md: ``Config(state_store="rocksdb")`` and
nothing else about checkpoints (so the store's default, incremental checkpoint), 2
workers, a checkpoint every ``--interval-ms`` (2 s), a ``file://`` backend. A replayable
spout (2 tasks) emits keys; a bolt (2 tasks, fields grouping) does the most common
stateful thing::

    old = kv.get(k)
    kv[k] = (old[0] + 1 if old else 1, value)      # a --value-bytes (320) value

and emits ``(key, count)`` into a ``FileSink`` on every update that found its key (count
2 and up). One worker is SIGKILLed early (after the first completed checkpoint past
``--kill-at`` of the records, or at ``--kill-by`` of them if no checkpoint has completed
by then: a short job on a loaded machine may finish before its first checkpoint does, and a
kill that rewinds to the start is a fault too). At the end the committed output is checked
exactly once: every key's counts 2 .. its final count, each once.

Two key sequences, both seeded and replayable from the spout's snapshot (its position):

- the default writes ``--keys`` keys twice each (a position's key comes from one of two
  permutations), so the share of reads finding their key grows with the records done,
  from about 5 % in the first tenth to 95 % in the last;
- ``--present-share P`` (the fixed mix): a share ``P`` of each task's records, spread
  evenly, re-read a key the task already emitted, drawn uniformly from all of them (the
  whole state, not only recent keys); the others emit the next new key. The state grows
  linearly to ``--keys`` distinct keys over about ``keys / (1 - P)`` records, and every
  tenth reads with the same mix.

Reported: time from submit to drained, records/s per tenth of the records (a row per
poll that crossed a tenth, holding at least a fiftieth of the records, with about how
many keys the state held then, and the share of reads that found their key: the sink's
records against the bolt's), each worker's peak RSS, the checkpoints completed against
those due (one per interval from the first trigger until drained), checkpoint bytes p50
and max against the state's logical size (keys × value bytes), and the TM's checkpoint
durations. Per tenth it also prints RocksDB's own figures of each bolt task's database,
which the worker sends with the task's metrics (:class:`StoreFigures`): level-0 files
(mean and max), files per level, pending compaction bytes, compactions running, write
stalls and the delayed-write rate, and per get the SST files whose bloom filter said no
or maybe, the data-block cache misses and hits, where the key was found and the get's
time; the compactions' CPU and bytes written, the SST and index/filter sizes.

``--write-only`` runs the same job and key sequence without the read (``kv[k] = (1,
value)``, no output): the pure-write rate read-modify-write is measured against.
``--no-output`` runs read-modify-write without the output (no sink, so no exactly-once
check): that job differs from ``--write-only``'s by the read alone.
``--pair`` runs the read-modify-write job, then the pure-write one, and prints their ratio
per tenth, overall, and how flat the read-modify-write rate stayed from 10 % to 100 % of
the keys loaded (issue 34's target: at least 0.5x, within 20 %). ``--abba`` adds a second
pair in the other order (pure write, then read-modify-write) and the ratio of the two
jobs' mean rates: on a machine whose speed drifts (a shared host) one pair's ratio moves
with the drift, four runs in this order cancel a steady one.

    python -m bench.rmw_state_bench --keys 3000000          # the issue's job
    python -m bench.rmw_state_bench --keys 20000000 --no-kill [--write-only]
    python -m bench.rmw_state_bench --keys 20000000 --no-kill --present-share 0.5 --pair
    python -m bench.rmw_state_bench --keys 20000000 --no-kill --present-share 0.5 --pair --abba
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import time
from array import array
from collections.abc import Iterable, Iterator
from fractions import Fraction
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
)
from jstormpy.connectors import committed_files  # noqa: E402

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


SEQUENCE_BLOCK = 4096
"""Positions drawn from one seeded generator in :class:`MixedKeys` (a restore at any
position redraws only its block's earlier positions)."""


class MixedKeys:
    """One spout task's share of the fixed-mix key sequence (``--present-share``).

    The task owns keys ``perm(task), perm(task + tasks), ...`` (``perm``: the first
    permutation of ``range(keys)``), ``mine`` of them. Of its positions a share ``share``
    (as a fraction of denominator at most 1000) re-read a key it emitted before and the
    rest emit its next new key, spread evenly: position ``j`` is new when
    ``ceil((j + 1) q / d) > ceil(j q / d)`` (``q / d = 1 - share``), so the first is new,
    every stretch of records holds the same mix and the last position emits the last new
    key. A re-read's key is drawn uniformly from all the task's keys emitted so far, by a
    generator seeded with ``(seed, task, j // SEQUENCE_BLOCK)``: the key at any position
    is computed from the position alone, so the spout's snapshot is its position.

    Args:
        keys: Distinct keys over all tasks.
        share: Share of the records that re-read a present key, ``0 <= share < 1``.
        seed: Seed of the re-reads' draws.
        task: This spout task's index.
        tasks: The spout's parallelism.

    Raises:
        ValueError: ``share`` is outside ``[0, 1)``.
    """

    def __init__(self, keys: int, share: float, seed: int, task: int, tasks: int) -> None:
        if not 0 <= share < 1:
            raise ValueError(f"present share {share} is outside [0, 1): a share of 1 would "
                             f"never write a new key")
        frac = Fraction(share).limit_denominator(1000)
        self.den = frac.denominator
        self.new_per = frac.denominator - frac.numerator  # new keys per ``den`` positions
        self.keys, self.task, self.tasks = keys, task, tasks
        self.mine = len(range(task, keys, tasks))
        self.length = (self.mine - 1) * self.den // self.new_per + 1 if self.mine else 0
        self.perm = permutation(keys, _A1)
        self.seed = seed

    def written_before(self, j: int) -> int:
        """How many new keys positions ``0 .. j - 1`` emitted."""
        return (j * self.new_per + self.den - 1) // self.den

    def keys_at(self, start: int, end: int) -> list[int]:
        """The keys at positions ``start .. end - 1``."""
        a, b = self.perm
        n, task, tasks, q, d = self.keys, self.task, self.tasks, self.new_per, self.den
        out: list[int] = []
        j = start
        written = self.written_before(j)
        while j < end:
            block = j // SEQUENCE_BLOCK
            rng = random.Random((self.seed << 40) + (task << 32) + block)
            draw = rng.random
            for _ in range(j - block * SEQUENCE_BLOCK):
                draw()
            stop = min(end, (block + 1) * SEQUENCE_BLOCK)
            for i in range(j, stop):
                u = draw()
                after = ((i + 1) * q + d - 1) // d
                if after > written:
                    t, written = written, after
                else:
                    t = int(u * written)
                out.append((a * (t * tasks + task) + b) % n)
            j = stop
        return out


def expected_counts(keys: int, share: float, seed: int, tasks: int) -> array:
    """Each key's final count (its occurrences) over the spout tasks' fixed-mix sequences."""
    counts = array("I", bytes(4 * keys))
    for task in range(tasks):
        gen = MixedKeys(keys, share, seed, task, tasks)
        for start in range(0, gen.length, 100_000):
            for k in gen.keys_at(start, min(gen.length, start + 100_000)):
                counts[k] += 1
    return counts


class MixedKeysSpout(Spout):
    """Emits its task's :class:`MixedKeys` sequence; the position is the snapshot."""

    outputs = ("key",)

    def __init__(self, keys: int, share: float, seed: int) -> None:
        self.keys, self.share, self.seed = keys, share, seed
        self.pos = 0

    def open(self, conf, context):
        self.gen = MixedKeys(self.keys, self.share, self.seed, context.task_index,
                             context.parallelism)

    def next_tuple(self):
        if self.pos >= self.gen.length:
            return self.finish()
        end = min(self.gen.length, self.pos + CHUNK)
        emit = self.emit
        for k in self.gen.keys_at(self.pos, end):
            emit((k,))
        self.pos = end

    def snapshot(self):
        return self.pos

    def restore(self, snap):
        self.pos = snap


class CountTwice(Bolt):
    """Read-modify-write of ``(count, value)`` per key; emits ``(key, count)`` on every
    update that found its key (count 2 and up: a replayed write would emit a count twice
    or one the key sequence never reaches, and the check shows it)."""

    outputs = ("key", "count")

    def __init__(self, value_bytes: int, write_only: bool = False,
                 output: bool = True) -> None:
        self.value_bytes = value_bytes
        self.write_only = write_only
        self.output = output

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
        if count >= 2 and self.output:
            self.emit((k, count))


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def build(keys: int, value_bytes: int, out: Path, write_only: bool = False,
          present_share: float | None = None, seed: int = 1, output: bool = True):
    b = TopologyBuilder("bench-rmw-state")
    spout = (TwiceKeys(keys) if present_share is None
             else MixedKeysSpout(keys, present_share, seed))
    b.set_spout("keys", spout, parallelism=2)
    b.set_bolt("kv", CountTwice(value_bytes, write_only, output), parallelism=2) \
        .fields_grouping("keys", ["key"])
    if output and not write_only:
        b.set_bolt("out", FileSink(str(out), format="jsonl")).shuffle_grouping("kv")
    return b.build()


def check_counts(records: Iterable[tuple[int, int]], expected: array) -> list[str]:
    """Problems with the ``(key, count)`` records against each key's final count (empty:
    exactly once, i.e. counts 2 .. ``expected[key]`` of every key, each once)."""
    low = array("Q", bytes(8 * len(expected)))  # bit c: count c (< 64) seen
    high: set[tuple[int, int]] = set()  # counts from 64 up (the earliest keys, high shares)
    dups = wrong = 0
    for k, c in records:
        if not (0 <= k < len(expected) and 2 <= c <= expected[k]):
            wrong += 1
        elif c < 64:
            bit = 1 << c
            if low[k] & bit:
                dups += 1
            else:
                low[k] |= bit
        elif (k, c) in high:
            dups += 1
        else:
            high.add((k, c))
    missing = sum(((1 << (min(c, 63) + 1)) - 4 & ~m).bit_count()
                  for c, m in zip(expected, low, strict=True) if c >= 2)
    missing += sum(c - 63 for c in expected if c >= 64) - len(high)
    problems = []
    if missing:
        problems.append(f"{missing} of the expected records missing")
    if dups:
        problems.append(f"{dups} duplicate records")
    if wrong:
        problems.append(f"{wrong} records with a count the key sequence never reaches")
    return problems


def committed_counts(out: Path) -> Iterator[tuple[int, int]]:
    """The sink's committed ``(key, count)`` records, read a part file's line at a time
    (what ``read_committed`` returns as one list would take gigabytes at 20M keys)."""
    for path in committed_files(out):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    yield rec["key"], rec["count"]


def verify(out: Path, expected: array) -> list[str]:
    """Problems with the committed output (empty: exactly once)."""
    return check_counts(committed_counts(out), expected)


def total_records(args: argparse.Namespace) -> int:
    """Records the spout emits over its two tasks."""
    if args.present_share is None:
        return 2 * args.keys
    return sum(MixedKeys(args.keys, args.present_share, args.seed, t, 2).length
               for t in range(2))


COUNTERS = ("executed", "emitted", "cpu_seconds")
"""The kv bolt's per-task counters the bench follows."""


class StoreFigures:
    """RocksDB's own figures of each ``kv`` task's database (the task metrics' ``store``:
    ``jstormpy.state_store.RocksDBStore.figures``), summarised per tenth of the records:
    the gauges (level-0 files, pending compaction bytes, compactions running, the delayed
    write rate) as mean and max of the bench's polls, the files per level, SST and table
    reader sizes as they are at the tenth's end, and the counters (gets, filter probes,
    block-cache hits and misses, write stalls, compaction CPU and bytes) as the tenth's
    difference, per get where it is a get's. Counters are kept monotone across a
    restarted worker (its new database starts them over). A tenth without a poll of a task
    (a short job's heartbeats are a second apart) shows the gauges of its last poll."""

    def __init__(self) -> None:
        self.last: dict[str, dict[str, float]] = {}
        self.base: dict[str, dict[str, float]] = {}
        self.mark: dict[str, dict[str, float]] = {}
        self.samples: dict[str, list[dict[str, float]]] = {}
        self.gauges: dict[str, dict[str, float]] = {}

    def update(self, tasks: dict[str, Any]) -> None:
        for tid, v in tasks.items():
            fig = v.get("store") or {}
            if not fig:
                continue
            counters = {k: float(x) for k, x in fig.items() if k.endswith("_total")}
            last = self.last.get(tid)
            if last is not None and counters.get("gets_total", 0.0) < last.get("gets_total", 0.0):
                base = self.base.setdefault(tid, {})
                for k, x in last.items():
                    base[k] = base.get(k, 0.0) + x
            self.last[tid] = counters
            self.gauges[tid] = {k: float(x) for k, x in fig.items() if not k.endswith("_total")}
            self.samples.setdefault(tid, []).append(self.gauges[tid])

    def counters(self, tid: str) -> dict[str, float]:
        base = self.base.get(tid, {})
        return {k: base.get(k, 0.0) + x for k, x in self.last[tid].items()}

    def close_tenth(self) -> dict[str, dict[str, Any]]:
        """Per task: the tenth's figures (see the class); the next tenth starts here."""
        out: dict[str, dict[str, Any]] = {}
        for tid in sorted(self.last, key=int):
            now = self.counters(tid)
            start = self.mark.get(tid, {})
            d = {k: x - start.get(k, 0.0) for k, x in now.items()}
            self.mark[tid] = now
            samples = self.samples.get(tid) or [self.gauges.get(tid, {})]
            self.samples[tid] = []
            end = samples[-1]

            def mean(k: str, rows: list[dict[str, float]] = samples) -> float:
                return sum(r.get(k, 0.0) for r in rows) / len(rows)

            def peak(k: str, rows: list[dict[str, float]] = samples) -> float:
                return max(r.get(k, 0.0) for r in rows)

            gets = max(d.get("gets_total", 0.0), 1.0)
            out[tid] = {
                "gets": d.get("gets_total", 0.0),
                "l0_files_mean": mean("l0_files"), "l0_files_max": peak("l0_files"),
                "files_per_level": {n: int(end.get(f"l{n}_files", 0.0)) for n in range(7)},
                "pending_compaction_mb_mean": mean("pending_compaction_bytes") / 1e6,
                "pending_compaction_mb_max": peak("pending_compaction_bytes") / 1e6,
                "running_compactions_mean": mean("running_compactions"),
                "delayed_write_rate_max": peak("delayed_write_rate"),
                "write_stopped_share": mean("write_stopped"),
                "stall_s": d.get("stall_micros_total", 0.0) / 1e6,
                "sst_mb": end.get("sst_bytes", 0.0) / 1e6,
                "table_readers_mb": end.get("table_readers_bytes", 0.0) / 1e6,
                "block_cache_mb": end.get("block_cache_bytes", 0.0) / 1e6,
                "compaction_cpu_s": d.get("compaction_cpu_micros_total", 0.0) / 1e6,
                "compaction_write_mb": d.get("compaction_write_bytes_total", 0.0) / 1e6,
                "flush_write_mb": d.get("flush_write_bytes_total", 0.0) / 1e6,
                **{f"{k[:-6]}_per_get": d.get(k, 0.0) / gets for k in (
                    "bloom_useful_total", "bloom_positive_total", "bloom_true_positive_total",
                    "block_cache_data_misses_total", "block_cache_data_hits_total",
                    "memtable_hits_total", "l0_hits_total", "l1_hits_total",
                    "l2up_hits_total")},
                "get_us": d.get("get_micros_total", 0.0) / gets,
            }
        return out


def store_line(tid: str, f: dict[str, Any]) -> str:
    """One task's RocksDB figures of a tenth (:class:`StoreFigures`), as the bench prints
    them (three lines: files and compactions, the gets, compaction bytes and sizes)."""
    levels = " ".join(f"L{n}:{c}" for n, c in f["files_per_level"].items() if c)
    return (f"    task {tid} RocksDB: L0 files {f['l0_files_mean']:.1f} mean / "
            f"{f['l0_files_max']:.0f} max; files {levels or '-'}; pending compaction "
            f"{f['pending_compaction_mb_mean']:.0f} MB mean / "
            f"{f['pending_compaction_mb_max']:.0f} max; compactions running "
            f"{f['running_compactions_mean']:.2f}; write stalls {f['stall_s']:.1f} s "
            f"(delayed-write rate max {f['delayed_write_rate_max'] / 1e6:.0f} MB/s, "
            f"stopped {f['write_stopped_share']:.0%})\n"
            f"      {f['gets']:,.0f} gets, per get: "
            f"{f['bloom_useful_per_get']:.2f} SST filters said no, "
            f"{f['bloom_positive_per_get']:.2f} said maybe "
            f"({f['bloom_true_positive_per_get']:.2f} found), "
            f"{f['block_cache_data_misses_per_get']:.2f} data-block misses / "
            f"{f['block_cache_data_hits_per_get']:.2f} hits, found in memtable "
            f"{f['memtable_hits_per_get']:.2f} L0 {f['l0_hits_per_get']:.2f} "
            f"L1 {f['l1_hits_per_get']:.2f} L2+ {f['l2up_hits_per_get']:.2f}, "
            f"{f['get_us']:.1f} µs\n      compaction CPU {f['compaction_cpu_s']:.1f} s, "
            f"{f['compaction_write_mb']:.0f} MB written (flushes {f['flush_write_mb']:.0f} MB); "
            f"SST {f['sst_mb']:.0f} MB, index+filters {f['table_readers_mb']:.0f} MB, "
            f"block cache {f['block_cache_mb']:.0f} MB")


class BoltProgress:
    """The ``kv`` bolt's counters summed over its tasks, kept monotone across a worker's
    restart: a restarted task's counters start over, so what it reported before is kept
    as a base (a record replayed after the restore then counts again, as work done). A
    restart is a task's sample from a new generation (every task is built again at a
    rollback, and may pass its old counts before its first heartbeat reaches the TM), or
    counters that went down.
    ``emitted`` counts the reads that found their key (the bolt emits on those only);
    ``cpu_seconds`` is the task threads' CPU time. :attr:`store` follows the tasks'
    RocksDB figures."""

    def __init__(self) -> None:
        self.last: dict[str, dict[str, float]] = {}
        self.base: dict[str, dict[str, float]] = {}
        self.generation: dict[str, int] = {}
        self.store = StoreFigures()

    def update(self, handle: Any) -> dict[str, float]:
        tasks = handle.metrics("kv").get("tasks", {})
        self.store.update(tasks)
        for tid, v in tasks.items():
            last = self.last.get(tid)
            base = self.base.setdefault(tid, dict.fromkeys(COUNTERS, 0.0))
            if last is not None and (v["generation"] != self.generation[tid]
                                     or v["executed"] < last["executed"]):
                for f in COUNTERS:
                    base[f] += last[f]
            self.last[tid] = {f: float(v[f]) for f in COUNTERS}
            self.generation[tid] = v["generation"]
        return {f: sum(self.base[t][f] + self.last[t][f] for t in self.last) for f in COUNTERS}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with bench_home() as home:
        return _run(args, home)


def _run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    out = home / "out"
    total = total_records(args)
    extra = ({} if args.level0_trigger is None
             else {"rocksdb_level0_compaction_trigger": args.level0_trigger})
    if args.memory_mb is not None:
        extra["rocksdb_memory_mb"] = args.memory_mb
    if args.compaction_style is not None:
        extra["rocksdb_compaction_style"] = args.compaction_style
    conf = Config(workers=2, checkpoint_interval_ms=args.interval_ms,
                  state_store="rocksdb", state_store_dir=str(home / "state"),
                  state_backend=f"file://{home}/ckpt", **extra)
    checkpoints: dict[int, dict[str, Any]] = {}
    tenths: list[dict[str, Any]] = []
    kill: dict[str, Any] | None = None
    with LocalCluster() as cluster:
        t0 = time.monotonic()
        handle = cluster.submit(build(args.keys, args.value_bytes, out, args.write_only,
                                      args.present_share, args.seed, args.output), conf)
        rss = RssSampler(handle)
        rss.start()
        progress = BoltProgress()
        last_tenth, last_print = 0, t0
        prev = {"t": t0, **dict.fromkeys(COUNTERS, 0.0)}

        def close_tenth(now: float, at: dict[str, float], f: float) -> None:
            # one row per poll: tenths crossed between two polls share a row ("from")
            loaded = args.keys * f * (2 - f) if args.present_share is None else args.keys * f
            done = max(at["executed"] - prev["executed"], 1.0)
            tenths.append({
                "records": int(at["executed"]), "from_fraction": last_tenth / 10,
                "fraction": f, "keys_loaded_about": round(loaded),
                "records_per_s": (at["executed"] - prev["executed"]) / max(now - prev["t"], 1e-9),
                "kv_cpu_us_per_record": (at["cpu_seconds"] - prev["cpu_seconds"]) / done * 1e6,
                "present_share": (None if args.write_only or not args.output
                                  else (at["emitted"] - prev["emitted"]) / done),
                "rocksdb": progress.store.close_tenth()})
            prev.update(t=now, **at)

        while True:
            st = handle.status()
            if st["state"] in ("failed", "killed"):
                raise RuntimeError(f"topology {st['state']}: {st.get('failure')}")
            for c in st.get("checkpoints", []):
                checkpoints.setdefault(c["id"], c)
            now = time.monotonic()
            at = progress.update(handle)
            n = int(at["executed"])
            if st["state"] == "drained":
                if last_tenth < 10:  # the rest, when the poll saw the drain first
                    if tenths and at["executed"] == prev["executed"]:
                        tenths[-1]["fraction"] = 1.0  # nothing since the last row: it ends
                    else:
                        close_tenth(now, at, 1.0)
                break
            crossed = last_tenth
            while crossed < 10 and n >= (crossed + 1) * total // 10:
                crossed += 1
            # a row holds at least a fiftieth of the records: the counters move by
            # heartbeats, so a poll can cross a tenth a few hundred records after the row
            # before, and a share or a rate over so few is noise
            if crossed > last_tenth and n - prev["executed"] >= total / 50:
                close_tenth(now, at, crossed / 10)
                last_tenth = crossed
            completed = [c for c in checkpoints.values() if c["status"] == "completed"]
            if (args.kill and kill is None and n >= args.kill_at * total
                    and (completed or n >= args.kill_by * total)):
                pid = next(w["pid"] for w in st["workers"] if w["id"] == 1)
                os.kill(pid, signal.SIGKILL)
                kill = {"at_records": n, "at_s": now - t0, "pid": pid,
                        "after_checkpoint": max((c["id"] for c in completed), default=None)}
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
        "output": args.output,
        "level0_trigger": args.level0_trigger, "compaction_style": args.compaction_style,
        "present_share": args.present_share, "seed": args.seed, "records": total,
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
        "problems": ([] if args.write_only or not args.output
                     else verify(out, expected(args))),
    }
    return result


def expected(args: argparse.Namespace) -> array:
    """Each key's final count under the run's key sequence."""
    if args.present_share is None:
        return array("I", [2]) * args.keys
    return expected_counts(args.keys, args.present_share, args.seed, 2)


def report(r: dict[str, Any]) -> None:
    what = ("pure write" if r["write_only"] else "read-modify-write" if r["output"]
            else "read-modify-write without output")
    seq = (f"{r['keys']:,} keys x 2 writes" if r["present_share"] is None else
           f"{r['keys']:,} keys, {r['records']:,} records with a present share of "
           f"{r['present_share']:g} (seed {r['seed']})")
    print(f"\n{what}, {seq} of {r['value_bytes']} B: "
          f"{r['elapsed_s']:.1f} s submit to drained, {r['records_per_s']:,.0f} records/s")
    for t in r["tenths"]:
        found = ("" if t["present_share"] is None
                 else f", {t['present_share']:.0%} of reads found their key")
        found += f", {t['kv_cpu_us_per_record']:.1f} µs bolt CPU a record"
        span = ("" if round(10 * (t["fraction"] - t["from_fraction"])) == 1
                else f"{t['from_fraction']:.0%} ")  # tenths crossed between two polls
        print(f"  {span}up to {t['fraction']:.0%} of the records "
              f"(~{t['keys_loaded_about']:,} keys): "
              f"{t['records_per_s']:,.0f} records/s{found}")
        for tid, f in (t.get("rocksdb") or {}).items():
            print(store_line(tid, f))
    print("  peak RSS: " + ", ".join(f"worker {w} {b / 1e6:.0f} MB"
                                     for w, b in sorted(r["peak_rss_bytes"].items())))
    p50 = r["checkpoint_bytes_p50"]
    print(f"  checkpoints: {r['checkpoints_completed']} completed of {r['checkpoints_due']} due, "
          f"{r['checkpoints_failed']} failed; bytes p50 "
          f"{(p50 or 0) / 1e6:.1f} MB = {(p50 or 0) / r['logical_state_bytes']:.2%} of the "
          f"state's {r['logical_state_bytes'] / 1e6:.0f} MB (max "
          f"{(r['checkpoint_bytes_max'] or 0) / 1e6:.1f} MB); duration p50 "
          f"{r['checkpoint_ms_p50'] or 0:.0f} ms, max {r['checkpoint_ms_max'] or 0:.0f} ms")
    if not r["write_only"] and not r["output"]:
        print("  exactly once: not checked (no output)")
    elif not r["write_only"]:
        print("  exactly once: " + ("yes, every key's counts once each" if not r["problems"]
                                    else "; ".join(r["problems"])))


def compare(rmw: dict[str, Any], write: dict[str, Any]) -> dict[str, Any]:
    """Issue 34's target on a pair of runs: the overall and per-tenth ratio of
    read-modify-write to pure write, and the read-modify-write rate's lowest tenth against
    its highest from the 2nd tenth on (10 % to 100 % of the keys loaded)."""
    write_at = {(t["from_fraction"], t["fraction"]): t for t in write["tenths"]}
    pairs = [(t, w) for t in rmw["tenths"]
             if (w := write_at.get((t["from_fraction"], t["fraction"])))]
    later = [t for t in rmw["tenths"] if t["from_fraction"] >= 0.1]
    rates = [t["records_per_s"] for t in later]
    cpu = [t["kv_cpu_us_per_record"] for t in later if t["kv_cpu_us_per_record"] > 0]
    return {"ratio": rmw["records_per_s"] / write["records_per_s"],
            "ratio_tenths": [(t["fraction"], t["records_per_s"] / w["records_per_s"])
                             for t, w in pairs if w["records_per_s"]],
            "cpu_ratio_tenths": [(t["fraction"],
                                  w["kv_cpu_us_per_record"] / t["kv_cpu_us_per_record"])
                                 for t, w in pairs if t["kv_cpu_us_per_record"] > 0],
            "rmw_min_over_max_from_2nd_tenth": min(rates) / max(rates) if rates else None,
            "rmw_cpu_min_over_max_from_2nd_tenth": min(cpu) / max(cpu) if cpu else None}


def abba(r1: dict[str, Any], w1: dict[str, Any], w2: dict[str, Any],
         r2: dict[str, Any]) -> dict[str, float]:
    """The ratio of runs taken in the order read-modify-write, pure write, pure write,
    read-modify-write: both jobs' mean rates sit at the same mean time, so a machine
    whose speed drifts steadily over the four runs moves both alike."""
    rmw = (r1["records_per_s"] + r2["records_per_s"]) / 2
    write = (w1["records_per_s"] + w2["records_per_s"]) / 2
    return {"rmw_records_per_s": rmw, "write_records_per_s": write, "ratio": rmw / write}


def report_abba(a: dict[str, float]) -> None:
    print(f"\nread-modify-write, pure write, pure write, read-modify-write: mean rates "
          f"{a['rmw_records_per_s']:,.0f} / {a['write_records_per_s']:,.0f} records/s = "
          f"{a['ratio']:.2f}x (target >= 0.5x)")


def report_pair(c: dict[str, Any]) -> None:
    def tenths(rows: list[tuple[float, float]]) -> str:
        return ", ".join(f"{x:.2f} (to {f:.0%})" for f, x in rows)

    print(f"\nread-modify-write / pure write: {c['ratio']:.2f}x overall (target >= 0.5x); "
          f"per tenth {tenths(c['ratio_tenths'])}")
    print(f"  by the bolt's CPU per record, per tenth: {tenths(c['cpu_ratio_tenths'])}")
    flat, flat_cpu = c["rmw_min_over_max_from_2nd_tenth"], c["rmw_cpu_min_over_max_from_2nd_tenth"]
    if flat is not None and flat_cpu is not None:
        print(f"read-modify-write from 10 % to 100 % of the keys loaded: slowest tenth "
              f"{flat:.2f} of the fastest (target: flat within 20 %, i.e. >= 0.80); by the "
              f"bolt's CPU per record {flat_cpu:.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=3_000_000)
    p.add_argument("--value-bytes", type=int, default=320)
    p.add_argument("--interval-ms", type=int, default=2000, help="checkpoint interval")
    p.add_argument("--write-only", action="store_true", help="no read: the pure-write rate")
    p.add_argument("--no-output", dest="output", action="store_false",
                   help="read-modify-write without the FileSink output (nor its check): "
                        "the same job as --write-only but for the read")
    p.add_argument("--present-share", type=float, default=None, metavar="P",
                   help="the fixed mix: a share P of the records re-read a key already "
                        "emitted, the rest write new keys (default: every key twice)")
    p.add_argument("--seed", type=int, default=1, help="seed of --present-share's re-reads")
    p.add_argument("--pair", action="store_true",
                   help="run read-modify-write, then pure write, and print their ratio")
    p.add_argument("--abba", action="store_true",
                   help="with --pair: read-modify-write, pure write, pure write, "
                        "read-modify-write; the ratio of the two jobs' mean rates (a steady "
                        "drift in the machine's speed falls on both alike)")
    p.add_argument("--no-kill", dest="kill", action="store_false")
    p.add_argument("--kill-at", type=float, default=0.1,
                   help="share of the records processed before worker 1 is SIGKILLed, "
                        "once a checkpoint has completed")
    p.add_argument("--kill-by", type=float, default=0.5,
                   help="share of the records by which worker 1 is SIGKILLed even if no "
                        "checkpoint has completed yet")
    p.add_argument("--level0-trigger", type=int, default=None, metavar="N",
                   help="Config.rocksdb_level0_compaction_trigger (default: the store's)")
    p.add_argument("--compaction-style", choices=("universal", "level"), default=None,
                   help="Config.rocksdb_compaction_style (default: the store's)")
    p.add_argument("--memory-mb", type=int, default=None, metavar="MB",
                   help="Config.rocksdb_memory_mb (default: the store's)")
    p.add_argument("--progress-s", type=float, default=15.0)
    p.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    args = p.parse_args(argv)
    if args.present_share is not None and not 0 <= args.present_share < 1:
        p.error(f"--present-share {args.present_share} is outside [0, 1): a share of 1 "
                f"would never write a new key")
    if args.pair and args.write_only:
        p.error("--pair runs the --write-only job itself; give one of them")
    if args.abba and not args.pair:
        p.error("--abba is an order of --pair's runs: give --pair too")
    r = run(args)
    report(r)
    if args.pair:
        write_args = argparse.Namespace(**{**vars(args), "write_only": True})
        w = run(write_args)
        report(w)
        c = compare(r, w)
        report_pair(c)
        if args.abba:
            w2 = run(write_args)
            report(w2)
            r2 = run(args)
            report(r2)
            c2 = compare(r2, w2)
            report_pair(c2)
            c = {**c, "abba": abba(r, w, w2, r2), "second_pair": c2}
            report_abba(c["abba"])
            if r2["problems"]:
                r = {**r, "problems": r["problems"] + r2["problems"]}
        if args.json:
            emit_json({**r, "write_only_run": w, "compare": c})
    elif args.json:
        emit_json(r)
    return 1 if r["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
