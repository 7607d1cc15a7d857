"""Start-up / shut-down breakdown of ``LocalCluster``: where the fixed cost of a run goes.

Runs a tiny exactly-once topology (one spout that emits a few tuples and finishes, one
bolt, one FileSink) ``--runs`` times and prints, per run, the wall-clock offsets (ms
since ``submit()`` was called) of the milestones the Topology Master and the workers log:
TM serving, each worker registered, running, drained, and ``wait()``/``__exit__``
returning; ``cluster_ready`` is how long ``LocalCluster()`` itself took (it starts the
zygote the processes are forked from, before ``submit()``); and the CPU time (ms) the TM
and worker processes used (``children_cpu``: the figure to compare on a shared machine).
Log timestamps have millisecond resolution.

    .venv/bin/python -m bench.startup_bench --runs 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jstormpy import Bolt, Config, FileSink, LocalCluster, Spout, TopologyBuilder

MILESTONES = {
    "tm_serving": r"Topology Master of .* serving",
    "first_register": r"worker \d+ registered",
    "running": r"-> running",
    "drained": r"-> drained",
}


class FewLines(Spout):
    """Emits ``n`` tuples then finishes; replayable."""

    outputs = ("n",)

    def __init__(self, n: int = 10) -> None:
        self.n = n
        self.pos = 0

    def snapshot(self) -> int:
        return self.pos

    def restore(self, snap: int) -> None:
        self.pos = snap

    def next_tuple(self) -> None:
        if self.pos >= self.n:
            self.finish()
            return
        self.emit((self.pos,))
        self.pos += 1


class Double(Bolt):
    """Emits twice its input."""

    outputs = ("n",)

    def execute(self, tup: Any) -> None:
        self.emit((tup.values[0] * 2,))


def _stamp(line: str) -> float | None:
    try:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()
    except ValueError:
        return None


def one_run(home: Path, workers: int) -> dict[str, float]:
    """One submit/wait/exit cycle; milestone offsets in ms from submit()."""
    out = Path(tempfile.mkdtemp(prefix="startup-out-"))
    b = TopologyBuilder("startup-bench")
    b.set_spout("src", FewLines(10), parallelism=1)
    b.set_bolt("dbl", Double, parallelism=workers).shuffle_grouping("src")
    b.set_bolt("sink", FileSink(str(out), format="jsonl"), parallelism=1).global_grouping("dbl")
    conf = Config(workers=workers, checkpoint_interval_ms=1000,
                  state_backend=f"file://{out / '_ckpt'}")
    res: dict[str, float] = {}
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_create = time.time()
    with LocalCluster(home=home) as cluster:
        t0 = time.time()
        res["cluster_ready"] = (t0 - t_create) * 1000  # LocalCluster(): its zygote imports
        h = cluster.submit(b.build(), conf)
        res["submit_returned"] = (time.time() - t0) * 1000
        h.wait(timeout=120)
        res["wait_returned"] = (time.time() - t0) * 1000
    res["exit_returned"] = (time.time() - t0) * 1000
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res["children_cpu"] = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) * 1000
    log = (home / "runs" / "startup-bench" / "logs" / "master.log").read_text()
    for key, pat in MILESTONES.items():
        for line in log.splitlines():
            if re.search(pat, line):
                stamp = _stamp(line)
                if stamp is not None:
                    res[key] = (stamp - t0) * 1000
                break
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print a BENCH_JSON line")
    a = ap.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="startup-home-"))
    os.environ.setdefault("JSTORM_HOME", str(home))
    runs = [one_run(home, a.workers) for _ in range(a.runs)]
    keys = ["cluster_ready", "tm_serving", "first_register", "running", "submit_returned",
            "drained", "wait_returned", "exit_returned", "children_cpu"]
    for k in keys:
        vals = [r[k] for r in runs if k in r]
        if vals:
            print(f"{k:16s} median {statistics.median(vals):7.0f} ms   runs "
                  + " ".join(f"{v:.0f}" for v in vals))
    if a.json:
        print("BENCH_JSON " + json.dumps({"bench": "startup", "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
