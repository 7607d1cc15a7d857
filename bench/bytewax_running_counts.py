"""Running counts on Bytewax beside jstormpy's running-count entry, in one run (issue 36).

The peer harness compares ``jstormpy_eo_reduce`` (a ``(word, count)`` row written for each
of the 2M words) with Bytewax entries that write only the final counts. This bench runs
the like-for-like job on Bytewax (``bench/bytewax_running_flow.py``: a ``stateful_map``
emitting every running count, each written as a jsonl line), as the harness runs Bytewax:
two processes of one worker each, SQLite recovery, snapshots every second
(``-s 1 -b 0``), processing time from the flow built to the process exiting. With
``--jstormpy-script`` it alternates each Bytewax run with a run of the harness's jstormpy
entry (``systems/jstormpy_wc.py --mode reduce``, its own ``PROCESSING_SECONDS``; its final
counts checked against the corpus).

Bytewax runs with the interpreter the Nexmark bench finds (``$NEXMARK_BYTEWAX_PYTHON``, or
the peer harness's Bytewax environment), unless ``--bytewax-python`` names one.

Every Bytewax run is checked: per word, the running counts written are exactly 1..n, once
each, where n is the word's count in the corpus.

    python -m bench.bytewax_running_counts --corpus DIR [--bytewax-python VENV/bin/python] \
        [--op map|batch] [--sink dir|plain] [--runs 3] \
        [--jstormpy-script PEERS/systems/jstormpy_wc.py]
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench.nexmark.engine_bytewax import free_ports, wait_listening
from bench.nexmark.engines import ENGINES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROW = re.compile(r'\{"word": "([^"]*)", "count": (\d+)\}')


def corpus_counts(corpus: str) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(glob.glob(os.path.join(corpus, "part-*.txt"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(line.split())
    return counts


def check_rows(outdir: str, expected: collections.Counter[str]) -> int:
    """Every word's running counts are exactly 1..n once each; returns the rows read."""
    seen: dict[str, list[int]] = collections.defaultdict(list)
    rows = 0
    for path in glob.glob(os.path.join(outdir, "rows-*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = _ROW.fullmatch(line.rstrip("\n"))
                if m is None:
                    raise SystemExit(f"{path}: not a row: {line!r}")
                seen[m.group(1)].append(int(m.group(2)))
                rows += 1
    if set(seen) != set(expected):
        raise SystemExit(f"words written {len(seen)}, in the corpus {len(expected)}")
    for word, n in expected.items():
        if sorted(seen[word]) != list(range(1, n + 1)):
            raise SystemExit(f"{word!r}: running counts are not 1..{n} once each")
    return rows


def run_bytewax(python: str, corpus: str, sink: str, op: str, work: str) -> float:
    """One run; returns the processing seconds."""
    outdir = os.path.join(work, "out")
    rdir = os.path.join(work, "recovery")
    for d in (outdir, rdir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    env = dict(os.environ, RUNNING_CORPUS=os.path.abspath(corpus), RUNNING_OUTDIR=outdir,
               RUNNING_SINK=sink, RUNNING_OP=op, PYTHONPATH=ROOT)
    subprocess.run([python, "-m", "bytewax.recovery", rdir, "2"], check=True, env=env)
    ports = free_ports(2)
    addrs = ";".join(f"127.0.0.1:{p}" for p in ports)
    procs = []
    for i in range(2):
        cmd = [python, "-m", "bytewax.run", "bench.bytewax_running_flow:flow", "-i", str(i),
               "-a", addrs, "-w", "1", "-r", rdir, "-s", "1", "-b", "0"]
        procs.append(subprocess.Popen(cmd, env=dict(env, RUNNING_PROC=str(i)), cwd=ROOT))
        if i == 0:
            wait_listening(ports[0], procs[0])
    rcs = [p.wait() for p in procs]
    if any(rcs):
        raise SystemExit(f"bytewax process(es) failed: rc={rcs}")
    timings = []
    for i in range(2):
        with open(os.path.join(outdir, f"timing-p{i}.json")) as f:
            timings.append(json.load(f))
    return max(t["t_exit"] for t in timings) - max(t["t_ready"] for t in timings)


def run_jstormpy(script: str, corpus: str, work: str,
                 expected: collections.Counter[str]) -> float:
    """One run of the harness's running-count entry, its final counts checked; returns
    its processing seconds."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    counts_path = os.path.join(work, "counts.json")
    out = subprocess.run([sys.executable, script, "--corpus", corpus, "--out", counts_path,
                          "--workdir", work, "--mode", "reduce"],
                         check=True, capture_output=True, text=True)
    with open(counts_path) as f:
        if json.load(f) != dict(expected):
            raise SystemExit("jstormpy_eo_reduce: its final counts differ from the corpus's")
    return float(out.stdout.strip().splitlines()[-1].split("=", 1)[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--bytewax-python", default=ENGINES["bytewax"].python(),
                    help="the Python of a virtual environment with bytewax installed")
    ap.add_argument("--sink", choices=("dir", "plain"), default="dir")
    ap.add_argument("--op", choices=("map", "batch"), default="map",
                    help="stateful_map (one call per word) or stateful_batch (per key and batch)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jstormpy-script", help="the peer harness's systems/jstormpy_wc.py")
    a = ap.parse_args()
    if a.bytewax_python is None:
        ap.error("no Bytewax environment found: set NEXMARK_BYTEWAX_PYTHON or --bytewax-python")
    expected = corpus_counts(a.corpus)
    words = sum(expected.values())
    work = tempfile.mkdtemp(prefix="bytewax-running-")
    bw: list[float] = []
    js: list[float] = []
    try:
        for run in range(a.runs):
            s = run_bytewax(a.bytewax_python, a.corpus, a.sink, a.op, os.path.join(work, "bw"))
            rows = check_rows(os.path.join(work, "bw", "out"), expected)
            bw.append(s)
            line = (f"run {run + 1}: bytewax ({a.op}, {a.sink}) {s:.3f} s, "
                    f"{words / s / 1e6:.2f}M words/s ({rows} rows checked)")
            if a.jstormpy_script:
                j = run_jstormpy(a.jstormpy_script, a.corpus, os.path.join(work, "js"),
                                 expected)
                js.append(j)
                line += f"; jstormpy_eo_reduce {j:.3f} s, {words / j / 1e6:.2f}M words/s"
            print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bmed = statistics.median(bw)
    print(f"median: bytewax running counts ({a.op}, {a.sink}) {words / bmed / 1e6:.2f}M words/s")
    if js:
        jmed = statistics.median(js)
        print(f"median: jstormpy_eo_reduce {words / jmed / 1e6:.2f}M words/s, "
              f"{bmed / jmed:.2f}x Bytewax's running counts")


if __name__ == "__main__":
    main()
