"""Count a worker's thread hand-offs over one run of the peer word count (issue 36).

Runs the peer harness's jstormpy entry (``systems/jstormpy_wc.py`` of the peer benchmark,
``--script``) once per ``--mode`` with the probe of ``bench/handoff_site/`` loaded into
every worker (``sitecustomize``; the engine is not changed) and prints, per mode, summed
over the workers: batches sent (local queue, remote frame, chained call) and received,
inbox reads (ready, woken with an item, woken with nothing), credit returns, frames and
``sendmsg`` calls, ``Condition.notify``/``notify_all`` calls per call site with and
without a waiting thread, ``Condition.wait`` calls per site (woken or timed out), and per
thread its CPU seconds and voluntary/involuntary context switches (``/proc``). The counting
costs CPU itself: judge speed by runs without the probe.

    python bench/handoff_probe.py --script PEERS/systems/jstormpy_wc.py \
        --corpus /tmp/peerbench/corpus-200000 [--mode reduce --mode window]
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "handoff_site")
KIND = {0: "data", 1: "barrier", 2: "watermark", 3: "end of stream", 4: "partials"}


def run_probed(script: str, corpus: str, mode: str, work: str) -> tuple[list[dict], str]:
    """One run with the probe; returns the workers' probe dumps and the script's output."""
    probe_dir = os.path.join(work, "probe")
    os.makedirs(probe_dir)
    env = dict(os.environ, JSTORM_HANDOFF_PROBE=probe_dir,
               PYTHONPATH=os.pathsep.join([SITE, *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run(
        [sys.executable, script, "--mode", mode, "--corpus", corpus,
         "--out", os.path.join(work, "counts.json"), "--workdir", os.path.join(work, "w")],
        env=env, capture_output=True, text=True, check=True)
    dumps = []
    for path in sorted(glob.glob(os.path.join(probe_dir, "probe-*.json"))):
        with open(path) as f:
            dumps.append(json.load(f))
    return dumps, proc.stdout


def thread_group(name: str) -> str:
    """A thread's role, with the task and worker ids taken out."""
    name = re.sub(r"\d+", "N", name)
    return re.sub(r"<-.*", "<-peer", name)


def report(mode: str, dumps: list[dict], stdout: str) -> None:
    counts: collections.Counter = collections.Counter()
    for d in dumps:
        for *key, n in d["counts"]:
            counts[tuple(key)] += n
    secs = re.findall(r"PROCESSING_SECONDS=([\d.]+)", stdout)
    print(f"\n## mode {mode}: {len(dumps)} workers, processing {secs[-1] if secs else '?'} s")
    print("\n| what | where | detail | count |\n|---|---|---|---:|")
    order = ["batch sent", "batch received", "inbox get", "credit return", "socket send"]
    for what in order:
        for key, n in sorted((k, v) for k, v in counts.items() if k[0] == what):
            detail = KIND.get(key[2], key[2]) if "batch" in what else key[2]
            if what == "socket send":
                continue
            print(f"| {what} | {key[1]} | {detail} | {n:,} |")
    sends = [(k[2], n) for k, n in counts.items() if k[0] == "socket send"]
    if sends:
        calls = sum(n for _, n in sends)
        frames = sum(f * n for f, n in sends)
        print(f"| sendmsg calls | outbound | {frames:,} frames | {calls:,} |")
    for t in ("frames_sent", "frames_received", "bytes_sent"):
        total = sum(s.get(t, 0) for d in dumps for s in d["transport"])
        print(f"| {t} | transport | | {total:,} |")
    print("\n| call | site | a thread waiting / outcome | count |\n|---|---|---|---:|")
    for key, n in sorted(((k, v) for k, v in counts.items()
                          if k[0] in ("notify", "notify_all", "wait")), key=lambda kv: -kv[1]):
        print(f"| {key[0]} | {key[1]} | {key[2]} | {n:,} |")
    groups: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0, 0])
    for d in dumps:
        for t in d["threads"]:
            g = groups[thread_group(t["name"])]
            g[0] += 1
            g[1] += t["cpu_s"]
            g[2] += t["voluntary"]
            g[3] += t["involuntary"]
    print("\n| thread | threads | CPU s | voluntary switches | involuntary |")
    print("|---|---:|---:|---:|---:|")
    for name, (k, cpu, vol, inv) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {k} | {cpu:.2f} | {vol:,} | {inv:,} |")
    total = [sum(g[i] for g in groups.values()) for i in range(1, 4)]
    print(f"| **all** | | **{total[0]:.2f}** | **{total[1]:,}** | **{total[2]:,}** |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", required=True, help="the harness's systems/jstormpy_wc.py")
    ap.add_argument("--corpus", required=True, help="directory of part-*.txt")
    ap.add_argument("--mode", action="append", choices=["reduce", "window"])
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args(argv)
    for mode in a.mode or ["reduce", "window"]:
        work = tempfile.mkdtemp(prefix=f"handoff-{mode}-")
        try:
            dumps, out = run_probed(os.path.abspath(a.script), os.path.abspath(a.corpus),
                                    mode, work)
            report(mode, dumps, out)
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
            else:
                print(f"kept {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
