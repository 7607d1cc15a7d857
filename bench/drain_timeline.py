"""The end of a bounded run, event by event: where the peer word count's fixed part goes.

Runs ``bench/peer_wordcount.py``'s topology (same components, same config) with each
component stamping the moments only it sees, and prints when each event of the end of
input happened, in ms after the first spout call (median over ``--runs``, and every run):

* ``last_spout_started``: the last spout task's first call (the window starts at the first);
* ``first_spout_finished`` / ``spout_finished``: the first / the last spout calls
  ``finish()`` (its input is exhausted);
* ``split_inputs_finished``: the last split task saw end of stream on every input;
* ``count_inputs_finished`` / ``count_emitted``: the last count task's
  ``on_inputs_finished`` began / its final counts were emitted;
* ``periodic_completed``: the periodic checkpoint in flight when the last spout finished
  completed (only in runs where one was: the final checkpoint used to wait for it);
* ``final_trigger``: the Topology Master triggered the final checkpoint (its history's
  ``started_at``: when it learnt every spout finished);
* ``count_barrier``: the last count task met the final barrier (``before_snapshot``);
* ``sink_barrier`` / ``sink_staged``: the last sink task met it (``pre_commit`` began /
  returned);
* ``commit_point``: the checkpoint complete (metadata and completed floor stored);
* ``sink_committed``: the last sink task's ``commit`` of the final checkpoint returned;
* ``drained``: the TM declared the run drained (``master.log``, ms resolution);
* ``wait_returned``: ``handle.wait()`` returned in the client.

    nice -n 5 .venv/bin/python -m bench.drain_timeline --corpus /tmp/peerbench/corpus-200000 \
        --runs 5

``--interval-ms`` (default 1000, the entry's) set shorter makes a periodic checkpoint in
flight at the end of input likely; the summary then splits the runs by whether one was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from bench.peer_wordcount import Count, Lines, Split
from jstormpy import Config, FileSink, LocalCluster, TopologyBuilder

EVENTS = ("last_spout_started", "first_spout_finished", "spout_finished",
          "split_inputs_finished", "count_inputs_finished", "count_emitted",
          "periodic_completed", "final_trigger",
          "count_barrier", "sink_barrier", "sink_staged", "commit_point", "sink_committed",
          "drained", "wait_returned")


def _stamp(folder: str, event: str, when: float | None = None) -> None:
    """Append one ``event time`` line to ``folder/stamps`` (rare events only)."""
    with open(os.path.join(folder, "stamps"), "a") as fh:
        fh.write(f"{event} {time.time() if when is None else when!r}\n")


class StampedLines(Lines):
    """The entry's spout; stamps its ``finish()``."""

    def finish(self) -> None:
        if not self.finished:
            _stamp(self.stamp_dir, "spout_finished")
        super().finish()


class StampedSplit(Split):
    """The entry's split; stamps the end of its inputs."""

    def __init__(self, stamp_dir: str) -> None:
        self.stamp_dir = stamp_dir

    def on_inputs_finished(self) -> None:
        _stamp(self.stamp_dir, "split_inputs_finished")


class StampedCount(Count):
    """The entry's count; stamps the end of its inputs, its final emit and barriers."""

    def __init__(self, stamp_dir: str) -> None:
        self.stamp_dir = stamp_dir

    def on_inputs_finished(self) -> None:
        _stamp(self.stamp_dir, "count_inputs_finished")
        super().on_inputs_finished()
        _stamp(self.stamp_dir, "count_emitted")

    def before_snapshot(self, checkpoint_id: int) -> None:
        _stamp(self.stamp_dir, f"count_barrier@{checkpoint_id}")


class StampedSink(FileSink):
    """The entry's FileSink; stamps its stage and commit of every checkpoint."""

    def __init__(self, directory: str, stamp_dir: str) -> None:
        super().__init__(directory, format="jsonl")
        self.stamp_dir = stamp_dir

    def pre_commit(self, checkpoint_id: int) -> None:
        _stamp(self.stamp_dir, f"sink_barrier@{checkpoint_id}")
        super().pre_commit(checkpoint_id)
        _stamp(self.stamp_dir, f"sink_staged@{checkpoint_id}")

    def commit(self, checkpoint_id: int) -> None:
        super().commit(checkpoint_id)
        _stamp(self.stamp_dir, f"sink_committed@{checkpoint_id}")


def build(files: list[str], out_dir: str, par: int, stamp_dir: str) -> Any:
    """``bench/peer_wordcount.py``'s topology with the stamping components."""
    b = TopologyBuilder("drain-timeline")
    b.set_spout("lines", StampedLines(files, stamp_dir), parallelism=par)
    b.set_bolt("split", StampedSplit(stamp_dir), parallelism=par) \
        .local_or_shuffle_grouping("lines")
    b.set_bolt("count", StampedCount(stamp_dir), parallelism=par) \
        .fields_grouping("split", ["word"])
    b.set_bolt("sink", StampedSink(out_dir, stamp_dir), parallelism=par) \
        .local_or_shuffle_grouping("count")
    return b.build()


def _log_time(line: str) -> float | None:
    try:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()
    except ValueError:
        return None


def one_run(files: list[str], workers: int, home: str,
            interval_ms: int = 1000) -> dict[str, float]:
    """One run; every event in ms after the first spout call."""
    work = tempfile.mkdtemp(prefix="drain-timeline-", dir=home)
    stamps = os.path.join(work, "stamps")
    os.makedirs(stamps)
    topo = build(files, os.path.join(work, "out"), workers, stamps)
    conf = Config(workers=workers, guarantee="exactly_once", checkpoint_interval_ms=interval_ms,
                  batch_size=4096, log_level="INFO",
                  state_backend="file://" + os.path.join(work, "ckpt"))
    with LocalCluster(home=os.path.join(home, "jstorm-home")) as cluster:
        handle = cluster.submit(topo, conf)
        handle.wait(timeout=600, poll_s=0.01)
        t_wait = time.time()
        status = handle.status()
        run_dir = handle.run_dir
    seen: dict[str, list[float]] = {}
    with open(os.path.join(stamps, "stamps")) as fh:
        for line in fh:
            event, stamped = line.split()
            seen.setdefault(event, []).append(float(stamped))
    starts = [float(open(os.path.join(stamps, n)).read()) for n in os.listdir(stamps)
              if n.startswith("start-")]  # each spout task's first call (Lines stamps it)
    t0 = min(starts)
    final = status["final_checkpoint"]
    entry = next(c for c in status["checkpoints"] if c["id"] == final)
    res = {e: (max(v) - t0) * 1000 for e, v in seen.items() if "@" not in e}
    res["last_spout_started"] = (max(starts) - t0) * 1000
    res["first_spout_finished"] = (min(seen["spout_finished"]) - t0) * 1000
    for e, v in seen.items():
        if e.endswith(f"@{final}"):
            res[e.split("@")[0]] = (max(v) - t0) * 1000
    res["final_trigger"] = (entry["started_at"] - t0) * 1000
    res["commit_point"] = res["final_trigger"] + entry["duration_ms"]
    res["final_alignment_ms"] = float(entry["alignment_ms"])
    last_finish = max(seen["spout_finished"])
    in_flight = [c for c in status["checkpoints"]
                 if c["id"] < final and c["started_at"] < last_finish
                 and c["started_at"] + c["duration_ms"] / 1000 > last_finish]
    if in_flight:  # a periodic checkpoint was in flight at the end of input
        c = max(in_flight, key=lambda c: c["id"])
        res["periodic_completed"] = (c["started_at"] + c["duration_ms"] / 1000 - t0) * 1000
    res["checkpoints"] = float(len(status["checkpoints"]))
    if run_dir is not None:
        for line in open(os.path.join(str(run_dir), "logs", "master.log")):
            if "-> drained" in line:
                logged = _log_time(line)
                if logged is not None:
                    res["drained"] = (logged - t0) * 1000
                break
    res["wait_returned"] = (t_wait - t0) * 1000
    shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="directory holding part-*.txt")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interval-ms", type=int, default=1000,
                    help="checkpoint_interval_ms (the entry's: 1000)")
    a = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(os.path.abspath(a.corpus), "part-*.txt")))
    if not files:
        print(f"no part-*.txt files in {a.corpus}", file=sys.stderr)
        return 2
    home = tempfile.mkdtemp(prefix="drain-timeline-home-")
    runs = [one_run(files, a.workers, home, a.interval_ms) for _ in range(a.runs)]
    for e in EVENTS:
        vals = [r[e] for r in runs if e in r]
        if vals:
            print(f"{e:22s} median {statistics.median(vals):7.1f} ms   runs "
                  + " ".join(f"{v:.1f}" for v in vals))
    overlap = [r for r in runs if "periodic_completed" in r]
    for label, group in (("periodic in flight at the end", overlap),
                         ("none in flight", [r for r in runs if r not in overlap])):
        if not group:
            continue
        print(f"{label} ({len(group)} runs), ms after the last spout finished:")
        for e in ("periodic_completed", "final_trigger", "sink_barrier", "sink_staged",
                  "commit_point", "sink_committed", "drained", "wait_returned"):
            vals = [r[e] - r["spout_finished"] for r in group if e in r]
            if vals:
                print(f"  {e:20s} median {statistics.median(vals):7.1f}   "
                      + " ".join(f"{v:.1f}" for v in vals))
        print(f"  {'final_alignment_ms':20s} median "
              f"{statistics.median(r['final_alignment_ms'] for r in group):7.1f}")
    print("checkpoints per run: " + " ".join(str(int(r["checkpoints"])) for r in runs))
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
