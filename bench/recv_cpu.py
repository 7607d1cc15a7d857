"""The workers' CPU per word of the per-tuple word count, A/B between two source trees.

Runs the peer harness's jstormpy entry (``--script``, ``systems/jstormpy_wc.py``) with
``--mode reduce`` (or ``--mode``), alternating between source trees (``--tree A=PATH``,
each put first on ``PYTHONPATH`` so its ``jstormpy`` is the one imported), ``--runs``
times each, and prints per run the summed user+system CPU seconds of the worker
processes (``bench/recv_site/``, read from ``/proc`` and ``os.times`` at each worker's
exit), ns per word, the receiving threads' CPU and context switches, and a summary
(median and spread per tree). The counts are checked against a ``Counter`` of the corpus.
Judge by CPU, not wall time: the machine may be shared.

    nice -n 5 python bench/recv_cpu.py --script PEERS/systems/jstormpy_wc.py \
        --corpus /tmp/peerbench/corpus-200000 --tree base=/tmp/base --tree new=. --runs 5
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recv_site")


def corpus_counts(corpus: str) -> collections.Counter:
    c: collections.Counter = collections.Counter()
    for path in sorted(glob.glob(os.path.join(corpus, "part-*.txt"))):
        with open(path) as f:
            for line in f:
                c.update(line.split())
    return c


def one_run(script: str, corpus: str, mode: str, tree: str, expect: collections.Counter,
            extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="recv-cpu-") as work:
        probe = os.path.join(work, "probe")
        os.makedirs(probe)
        path = [os.path.abspath(tree), SITE, *filter(None, [os.environ.get("PYTHONPATH")])]
        env = dict(os.environ, JSTORM_RECV_PROBE=probe, PYTHONPATH=os.pathsep.join(path))
        out = os.path.join(work, "counts.json")
        proc = subprocess.run(
            [sys.executable, script, "--mode", mode, "--corpus", corpus, "--out", out,
             "--workdir", os.path.join(work, "w"), *extra],
            env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(out) as f:
            got = json.load(f)
        if got != dict(expect):
            raise SystemExit("counts differ from the corpus")
        dumps = []
        for p in glob.glob(os.path.join(probe, "cpu-*.json")):
            with open(p) as f:
                dumps.append(json.load(f))
        secs = [line for line in proc.stdout.splitlines() if line.startswith("PROCESSING")]
    recv = [t for d in dumps for t in d["threads"] if t["name"].startswith("jstorm-recv")]
    return {"workers": len(dumps), "cpu_s": sum(d["cpu_s"] for d in dumps),
            "recv_cpu_s": sum(t["cpu_s"] for t in recv),
            "recv_voluntary": sum(t["voluntary"] for t in recv),
            "processing_s": float(secs[-1].split("=")[1]) if secs else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--mode", default="reduce")
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH, repeated")
    ap.add_argument("--runs", type=int, default=5)
    a, extra = ap.parse_known_args()
    trees = [t.split("=", 1) for t in a.tree]
    expect = corpus_counts(a.corpus)
    words = sum(expect.values())
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for i in range(a.runs):
        order = trees if i % 2 == 0 else trees[::-1]
        for name, path in order:
            r = one_run(a.script, a.corpus, a.mode, path, expect, extra)
            results[name].append(r)
            print(f"run {i + 1} {name}: workers={r['workers']} cpu={r['cpu_s']:.2f}s "
                  f"({r['cpu_s'] / words * 1e9:.0f} ns/word) recv={r['recv_cpu_s']:.2f}s "
                  f"recv_switches={r['recv_voluntary']} processing={r['processing_s']:.2f}s",
                  flush=True)
    for name, rs in results.items():
        cpu = sorted(r["cpu_s"] / words * 1e9 for r in rs)
        recv = sorted(r["recv_cpu_s"] for r in rs)
        print(f"{name}: ns/word median {statistics.median(cpu):.0f} "
              f"(min {cpu[0]:.0f}, max {cpu[-1]:.0f}); recv thread CPU median "
              f"{statistics.median(recv):.2f}s")


if __name__ == "__main__":
    main()
