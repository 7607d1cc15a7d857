"""Incremental vs full checkpoints of managed keyed state (issue 15).

A task holds ``--keys`` keys of managed keyed state; every interval ``--changed`` of them
(1 % by default) are rewritten (a few deleted and added too). Each interval is
checkpointed twice from the same state, through the engine's own checkpoint path
(``jstormpy.testing.incremental.TaskCheckpointer``: task-thread capture, serialisation,
upload to the state backend, metadata): once as a full snapshot (the default), once with
``Config(incremental_checkpoints=True)``. Reported: bytes and duration of each
(incremental as a % of full — the target is <= 10 %), the task-thread pause, the cost of
a compaction (a new base), and restore time (full snapshot vs base + deltas).

What "duration" is: the task-thread capture (the pause), then everything the task's
snapshot thread does (type scan, key-group hashing, pickling, upload of segment and task
snapshot with the file backend's fsyncs), then the checkpoint metadata write the TM does,
run back to back on one thread: the barrier-to-committed time of one idle task, i.e.
what a user waits for. "CPU time" is the process's CPU over the same span: the figure to
compare on a shared machine. ``bench/snapshot_pause.py --incremental`` measures a delta
with the task busy meanwhile (pause, longest task-loop gap, barrier-to-ack).

    python bench/incremental_bench.py [--keys 1000000] [--changed 0.01] [--intervals 5]
                                      [--backend file:///tmp/x] [--json]

The issue's figure is ``--keys 10000000`` (needs ~4 GB of RAM); ``--keys 20000`` runs in
seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json, median  # noqa: E402

from jstormpy import Config  # noqa: E402
from jstormpy.state_backends import open_backend  # noqa: E402
from jstormpy.testing.incremental import TaskCheckpointer  # noqa: E402


def _mutate(counts: list[dict[Any, Any]], rng: random.Random, keys: int, changed: float,
            interval: int) -> None:
    """Rewrite ``changed`` of the keys (95 % updates, 5 % deletes + as many new keys)."""
    n = max(1, int(keys * changed))
    picks = rng.sample(range(keys), n)
    deletes = picks[: n // 20]
    for d in counts:
        for i in picks[n // 20:]:
            d[f"key{i}"] = interval * 1_000_000 + i
        for i in deletes:
            d.pop(f"key{i}", None)
        for i in deletes:
            d[f"new{interval}-{i}"] = i


def run(keys: int, changed: float, intervals: int, backend_uri: str) -> dict[str, Any]:
    """Run the comparison; returns the figures."""
    full_b = open_backend(backend_uri.rstrip("/") + "/full")
    inc_b = open_backend(backend_uri.rstrip("/") + "/incremental")
    full = TaskCheckpointer(full_b, Config())
    inc = TaskCheckpointer(inc_b, Config(incremental_checkpoints=True,
                                         incremental_compaction_every=intervals + 1))
    initial = {f"key{i}": i for i in range(keys)}
    full.comp.counts.update(initial)
    inc.comp.counts.update(initial)
    del initial
    base = inc.checkpoint(1)
    full.checkpoint(1)
    rng = random.Random(7)
    rows = []
    for cid in range(2, intervals + 2):
        _mutate([full.comp.counts, inc.comp.counts], rng, keys, changed, cid)
        f = full.checkpoint(cid)
        d = inc.checkpoint(cid)
        assert d.kind == "delta", d
        rows.append((f, d))
    last = intervals + 1
    inc.compact_next()
    compaction = inc.checkpoint(last + 1, commit=False)
    full_again = full.checkpoint(last + 1, commit=False)
    t0, c0 = time.perf_counter(), time.process_time()
    restored_full = full.restore(last)["states"]["counts"]
    full_restore_s, full_restore_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    del restored_full  # the second restore should not pay for the first one's memory
    t0, c0 = time.perf_counter(), time.process_time()
    restored_inc = inc.restore(last)["states"]["counts"]
    inc_restore_s, inc_restore_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    restored_full = full.restore(last)["states"]["counts"]
    if restored_inc != restored_full or restored_full != dict(full.comp.counts):
        raise SystemExit("restored state differs from the live state")
    full_bytes = median([f.bytes_written for f, _ in rows])
    inc_bytes = median([d.bytes_written for _, d in rows])
    full_s = median([f.total_s for f, _ in rows])
    inc_s = median([d.total_s for _, d in rows])
    return {
        "keys": keys, "changed": changed, "intervals": intervals, "backend": backend_uri,
        "full_bytes": full_bytes, "incremental_bytes": inc_bytes,
        "incremental_bytes_pct": 100.0 * inc_bytes / full_bytes,
        "full_s": full_s, "incremental_s": inc_s,
        "incremental_duration_pct": 100.0 * inc_s / full_s,
        "full_cpu_s": median([f.cpu_s for f, _ in rows]),
        "incremental_cpu_s": median([d.cpu_s for _, d in rows]),
        "full_pause_ms": 1000 * median([f.capture_s for f, _ in rows]),
        "incremental_pause_ms": 1000 * median([d.capture_s for _, d in rows]),
        "first_base_s": base.total_s,
        "base_bytes": compaction.bytes_written, "base_s": compaction.total_s,
        "base_cpu_s": compaction.cpu_s, "full_again_s": full_again.total_s,
        "restore_full_s": full_restore_s,
        "restore_incremental_s": inc_restore_s, "chain_length": intervals + 1,
        "restore_full_cpu_s": full_restore_cpu_s, "restore_incremental_cpu_s": inc_restore_cpu_s,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docs)."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--changed", type=float, default=0.01, help="fraction rewritten per interval")
    p.add_argument("--intervals", type=int, default=5, help="deltas after the base")
    p.add_argument("--backend", default="", help="state backend URI (default: a temp dir)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    tmp = None
    uri = a.backend
    if not uri:
        tmp = tempfile.mkdtemp(prefix="jstorm-incbench-")
        uri = f"file://{tmp}"
    try:
        r = run(a.keys, a.changed, a.intervals, uri)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        emit_json(r)
        return 0
    print(f"{r['keys']:,} keys, {100 * r['changed']:g} % changed per interval, {uri}")
    print(f"  full checkpoint        {r['full_bytes'] / 1e6:9.2f} MB  {r['full_s'] * 1000:8.1f} ms"
          f"  (task pause {r['full_pause_ms']:.1f} ms)")
    print(f"  incremental checkpoint {r['incremental_bytes'] / 1e6:9.2f} MB  "
          f"{r['incremental_s'] * 1000:8.1f} ms  (task pause {r['incremental_pause_ms']:.1f} ms)"
          f"  = {r['incremental_bytes_pct']:.1f} % of the bytes, "
          f"{r['incremental_duration_pct']:.1f} % of the time (target <= 10 %)")
    print(f"  CPU time: full {r['full_cpu_s'] * 1000:.1f} ms, incremental "
          f"{r['incremental_cpu_s'] * 1000:.1f} ms")
    print(f"  compaction (new base)  {r['base_bytes'] / 1e6:9.2f} MB  {r['base_s'] * 1000:8.1f} ms"
          f"  (CPU {r['base_cpu_s'] * 1000:.1f} ms; a full checkpoint at the same point "
          f"{r['full_again_s'] * 1000:.1f} ms)")
    print(f"  restore: full {r['restore_full_s'] * 1000:.1f} ms (CPU "
          f"{r['restore_full_cpu_s'] * 1000:.1f} ms), base + {r['chain_length'] - 1} deltas "
          f"{r['restore_incremental_s'] * 1000:.1f} ms (CPU "
          f"{r['restore_incremental_cpu_s'] * 1000:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
