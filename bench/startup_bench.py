"""Start-up / shut-down breakdown of ``LocalCluster``: where the fixed cost of a run goes.

Runs a tiny exactly-once topology (one spout that emits a few tuples and finishes, one
bolt, one FileSink) ``--runs`` times and prints, per run, the wall-clock offsets (ms
since ``submit()`` was called) of the milestones the Topology Master and the workers log:
TM serving, each worker registered, running, drained, and ``wait()``/``__exit__``
returning; ``cluster_ready`` is how long ``LocalCluster()`` itself took (it starts the
zygote the processes are forked from, before ``submit()``); and the CPU time (ms) the TM
and worker processes used (``children_cpu``: the figure to compare on a shared machine).
``first_record`` / ``last_record`` are when the bolt executed its first and last tuple
(stamped by the bolt itself), and ``last_record_to_exit`` how long after the last record
the ``with LocalCluster()`` block was left. Log timestamps have millisecond resolution.

``--cli`` times what a user of ``jstorm run FILE`` meets instead: from starting the
command to the first record executed (``cli_first_record``: the interpreter, the imports,
the cluster, the submit), and from the last record to the command's exit
(``cli_last_record_to_exit``: the final checkpoint, the drain, the shutdown).

    .venv/bin/python -m bench.startup_bench --runs 3 [--cli]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import statistics
import subprocess
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
    """Emits twice its input; stamps its first and last tuple into ``stamps`` (if set)."""

    outputs = ("n",)

    def __init__(self, stamps: str = "") -> None:
        self.stamps = stamps
        self.first = True

    def execute(self, tup: Any) -> None:
        if self.stamps:
            now = time.time()
            if self.first:
                self.first = False
                _stamp_file(self.stamps, "first", now)
            _stamp_file(self.stamps, "last", now)
        self.emit((tup.values[0] * 2,))


def _stamp_file(folder: str, kind: str, when: float) -> None:
    """Append ``when`` to ``folder/kind`` (a record stamp of one task)."""
    with open(os.path.join(folder, kind), "a") as fh:
        fh.write(f"{when!r}\n")


def record_stamps(folder: str) -> tuple[float, float] | None:
    """(first record, last record) over every task, wall-clock seconds."""
    try:
        with open(os.path.join(folder, "first")) as f1, open(os.path.join(folder, "last")) as f2:
            return min(map(float, f1)), max(map(float, f2))
    except (OSError, ValueError):
        return None


CLI_TOPOLOGY = """
from jstormpy import Config, FileSink, TopologyBuilder
from bench.startup_bench import Double, FewLines
b = TopologyBuilder("startup-cli")
b.set_spout("src", FewLines(10), parallelism=1)
b.set_bolt("dbl", Double({stamps!r}), parallelism={workers}).shuffle_grouping("src")
b.set_bolt("sink", FileSink({out!r}, format="jsonl"), parallelism=1).global_grouping("dbl")
topology = b.build()
config = Config(workers={workers}, checkpoint_interval_ms=1000,
                state_backend="file://" + {ckpt!r})
"""


def cli_run(workers: int) -> dict[str, float]:
    """``jstorm run FILE`` of the same topology as a user runs it: first record after the
    command starts, command exit after the last record (ms)."""
    work = Path(tempfile.mkdtemp(prefix="startup-cli-"))
    stamps = work / "stamps"
    stamps.mkdir()
    topo = work / "topo.py"
    topo.write_text(CLI_TOPOLOGY.format(stamps=str(stamps), workers=workers,
                                        out=str(work / "out"), ckpt=str(work / "ckpt")))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]))
    t0 = time.time()
    subprocess.run([sys.executable, "-m", "jstormpy.cli.main", "run", str(topo)], env=env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t_exit = time.time()
    got = record_stamps(str(stamps))
    if got is None:
        raise SystemExit("jstorm run processed no record")
    first, last = got
    return {"cli_first_record": (first - t0) * 1000, "cli_last_record_to_exit":
            (t_exit - last) * 1000, "cli_total": (t_exit - t0) * 1000}


def _stamp(line: str) -> float | None:
    try:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()
    except ValueError:
        return None


def one_run(home: Path, workers: int) -> dict[str, float]:
    """One submit/wait/exit cycle; milestone offsets in ms from submit()."""
    out = Path(tempfile.mkdtemp(prefix="startup-out-"))
    stamps = Path(tempfile.mkdtemp(prefix="startup-stamps-"))
    b = TopologyBuilder("startup-bench")
    b.set_spout("src", FewLines(10), parallelism=1)
    b.set_bolt("dbl", Double(str(stamps)), parallelism=workers).shuffle_grouping("src")
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
    t_exit = time.time()
    res["exit_returned"] = (t_exit - t0) * 1000
    got = record_stamps(str(stamps))
    if got is not None:
        res["first_record"] = (got[0] - t0) * 1000
        res["last_record"] = (got[1] - t0) * 1000
        res["last_record_to_exit"] = (t_exit - got[1]) * 1000
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
    ap.add_argument("--cli", action="store_true", help="time `jstorm run FILE` instead")
    a = ap.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="startup-home-"))
    os.environ.setdefault("JSTORM_HOME", str(home))
    if a.cli:
        runs = [cli_run(a.workers) for _ in range(a.runs)]
        keys = ["cli_first_record", "cli_last_record_to_exit", "cli_total"]
    else:
        runs = [one_run(home, a.workers) for _ in range(a.runs)]
        keys = ["cluster_ready", "tm_serving", "first_register", "running", "first_record",
                "submit_returned", "last_record", "drained", "wait_returned", "exit_returned",
                "last_record_to_exit", "children_cpu"]
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
