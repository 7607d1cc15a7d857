"""Profile the worker hot path of the at-most-once word count (not part of ``python -m bench``).

Two probes, neither touching the engine:

* ``--tool py-spy`` (default if installed): ``py-spy record --format raw`` on every worker
  process for ``--seconds`` while the word count runs at full speed; prints self time and
  inclusive time per function, per worker and summed.
* ``--tool cprofile``: the bench bolts/spout enable ``cProfile`` in their own task thread on
  their first call (the profiler then also sees the engine's executor loop, routing, queue
  handoffs and Tuple construction in that thread) and dump the stats at the end.

    python bench/profile_wordcount.py [--tool py-spy|cprofile] [--sentences 600000]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cloudpickle  # noqa: E402
from _common import (  # noqa: E402
    BenchCount,
    BenchReport,
    BenchSentences,
    BenchSplit,
    bench_home,
    build_wordcount,
    run_until_drained,
)

from jstormpy import Config, LocalCluster, TopologyBuilder  # noqa: E402


class _Profiled:
    """Mixin: start cProfile in the task thread on the first call, dump it at the end."""

    def _prof_start(self):
        if getattr(self, "_prof", None) is None:
            self._prof = cProfile.Profile()
            self._prof.enable()

    def _prof_dump(self, tag: str):
        prof = getattr(self, "_prof", None)
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(Path(self.result_dir) / f"{tag}-{os.getpid()}-{id(self)}.prof"))
            self._prof = None


class PSentences(_Profiled, BenchSentences):
    def next_tuple(self):
        self._prof_start()
        super().next_tuple()
        if self.finished:
            self._prof_dump("spout")


class PSplit(_Profiled, BenchSplit):
    def __init__(self, result_dir: str) -> None:
        super().__init__()
        self.result_dir = result_dir

    def execute(self, tup):
        self._prof_start()
        super().execute(tup)

    def on_inputs_finished(self):
        self._prof_dump("split")


class PCount(_Profiled, BenchCount):
    def execute(self, tup):
        self._prof_start()
        BenchCount.execute(self, tup)

    def on_inputs_finished(self):
        self._prof_dump("count")
        super().on_inputs_finished()


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def summarize_raw(paths: list[Path], top: int) -> None:
    """Self and inclusive sample counts per function from py-spy raw (collapsed) files."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if not stack:
                continue
            count = int(n)
            frames = stack.split(";")
            if not any("_run_bolt" in f or "_run_spout" in f for f in frames):
                continue  # only task threads (not gRPC, heartbeat, transport threads)
            total += count

            def key(f: str) -> str:
                # "func (path/file.py:line)" → "func (file.py)"
                name, _, loc = f.partition(" (")
                return f"{name} ({loc.split('/')[-1].split(':')[0]})"

            own[key(frames[-1])] += count
            for f in set(map(key, frames)):
                incl[f] += count
    print(f"\ntask-thread samples: {total}")
    print(f"{'self %':>7} {'incl %':>7}  function")
    for f, n in own.most_common(top):
        print(f"{n / total * 100:7.1f} {incl[f] / total * 100:7.1f}  {f}")
    print("\ninclusive (top):")
    for f, n in incl.most_common(top):
        print(f"{n / total * 100:7.1f}  {f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tool", choices=("py-spy", "cprofile"),
                   default="py-spy" if shutil.which("py-spy") or
                   Path(sys.executable).with_name("py-spy").exists() else "cprofile")
    p.add_argument("--sentences", type=int, default=600_000)
    p.add_argument("--seconds", type=float, default=6.0, help="py-spy sampling time")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--guarantee", default="at_most_once")
    args = p.parse_args()
    with bench_home() as home:
        rdir = str(home / "results")
        os.makedirs(rdir)
        if args.tool == "cprofile":
            b = TopologyBuilder("bench-profile")
            b.set_spout("sentences", PSentences(args.sentences, rdir), parallelism=2)
            b.set_bolt("split", PSplit(rdir), parallelism=2).shuffle_grouping("sentences")
            b.set_bolt("count", PCount(rdir), parallelism=2).fields_grouping("split", ["word"])
            b.set_bolt("report", BenchReport(rdir)).global_grouping("count")
            topo = b.build()
        else:
            topo = build_wordcount("bench-profile", rdir, args.sentences)
        conf = Config(workers=2, guarantee=args.guarantee, log_level="WARNING")
        with LocalCluster() as cluster:
            handle = cluster.submit(topo, conf)
            outs = []
            if args.tool == "py-spy":
                spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
                while handle.status()["state"] != "running":
                    time.sleep(0.05)
                time.sleep(0.5)
                procs = []
                for wid, proc in handle._launcher.workers.items():
                    out = home / f"worker-{wid}.txt"
                    outs.append(out)
                    procs.append(subprocess.Popen(
                        [spy, "record", "--pid", str(proc.pid), "--duration",
                         str(int(args.seconds)), "--rate", "250", "--format", "raw",
                         "--output", str(out), "--nonblocking"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
                for sp in procs:
                    try:
                        _, err = sp.communicate(timeout=args.seconds + 60)
                    except subprocess.TimeoutExpired:
                        sp.kill()
                        err = b"timeout"
                    if sp.returncode:
                        print("py-spy failed:", err.decode(errors="replace")[-500:])
            run_until_drained(handle, 300)
        if args.tool == "py-spy":
            summarize_raw([o for o in outs if o.exists()], args.top)
        else:
            for tag in ("spout", "split", "count"):
                files = sorted(Path(rdir).glob(f"{tag}-*.prof"))
                if not files:
                    continue
                print(f"\n===== {tag} task threads ({len(files)}) =====")
                st = pstats.Stats(*map(str, files))
                st.sort_stats("tottime").print_stats(args.top)


_ = (BenchCount, BenchSplit, BenchSentences, build_wordcount)

if __name__ == "__main__":
    main()
