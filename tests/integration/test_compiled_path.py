"""The compiled record path and its pure-Python fallback (``jstormpy/compiled.py``) give
the same results: one word count, run both ways in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jstormpy import compiled

ROOT = Path(__file__).resolve().parents[2]

# split -> (fields, combined before the shuffle) -> ingestion-time window -> FileSink: the
# records cross the fused emit (routing) and the sender's fold (combine) once each
SCRIPT = r'''
import json, os, sys
from jstormpy import Bolt, Config, Fields, FileSink, LocalCluster, Spout, TopologyBuilder
from jstormpy import compiled, read_committed
from tests.integration.window_components import FinalWordCount

WORDS = "the quick brown fox jumps over the lazy dog and the cat".split()
LINES = [(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(i % 9 + 1)),)
         for i in range(3000)]


class Lines(Spout):
    outputs = ("sentence",)

    def __init__(self):
        self.offset = 0

    def open(self, conf, context):
        self.lines = LINES[context.task_index::context.parallelism]

    def next_tuple(self):
        end = min(self.offset + 100, len(self.lines))
        for row in self.lines[self.offset:end]:
            self.emit(row)
        self.offset = end
        if end >= len(self.lines):
            self.finish()

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class Split(Bolt):
    outputs = ("word",)

    def __init__(self, probe):
        self.probe = probe

    def prepare(self, conf, context):
        # what this worker runs: the record path's modules as it imported them
        mods = [sys.modules[m].__file__ for m in compiled.COMPILED]
        with open(f"{self.probe}-workers-{os.getpid()}.json", "w") as fh:
            json.dump(mods, fh)

    def execute(self, tup):
        for w in tup.values[0].split():
            self.emit((w,))


out = sys.argv[1]
b = TopologyBuilder("compiled-path")
b.set_spout("lines", Lines(), parallelism=2)
b.set_bolt("split", Split(out), parallelism=2).shuffle_grouping("lines")
b.set_bolt("count", FinalWordCount, parallelism=2).fields_grouping("split", Fields("word"))
b.set_bolt("sink", FileSink(out, format="jsonl"), parallelism=1).shuffle_grouping("count")
with LocalCluster() as cluster:
    cluster.submit(b.build(), Config(workers=2, guarantee="exactly_once",
                                     checkpoint_interval_ms=200)).wait(timeout=120)
rows = sorted((r["key"], r["result"]) for r in read_committed(out))
import glob
workers = [json.load(open(f)) for f in glob.glob(f"{out}-workers-*.json")]
print(json.dumps({"path": compiled.describe(), "rows": rows, "workers": workers,
                  "expected": sorted(__import__("collections").Counter(
                      w for (line,) in LINES for w in line.split()).items())}))
'''


def _run(tmp_path: Path, name: str, pure: bool) -> dict:
    script = tmp_path / "wc.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "JSTORM_HOME": str(tmp_path / f"home-{name}"),
           "PYTHONPATH": str(ROOT)}  # the script imports the tests' window components
    env.pop(compiled.PURE_ENV, None)
    if pure:
        env[compiled.PURE_ENV] = "1"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / f"out-{name}")],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["stderr"] = proc.stderr
    return result


def test_the_pure_python_fallback_counts_what_the_compiled_path_counts(tmp_path: Path) -> None:
    if not all(compiled.status().values()) and compiled.forced_pure():
        pytest.skip("JSTORM_PURE_PYTHON=1: only the fallback runs here")
    both = {name: _run(tmp_path, name, name == "pure") for name in ("native", "pure")}
    assert both["pure"]["path"] == "record path pure Python (JSTORM_PURE_PYTHON=1)"
    # the workers (forked by the zygote) run what the launcher runs
    pure_files = [f for files in both["pure"]["workers"] for f in files]
    assert pure_files and all(f.endswith(".py") for f in pure_files), pure_files
    if all(compiled.status().values()):  # an install that compiled them: both ways ran
        assert both["native"]["path"].startswith("record path compiled (Cython)")
        native_files = [f for files in both["native"]["workers"] for f in files]
        assert native_files and not any(f.endswith(".py") for f in native_files), \
            native_files
    expected = [list(pair) for pair in both["pure"]["expected"]]
    assert sum(c for _, c in expected) > 10_000
    assert both["pure"]["rows"] == expected
    assert both["native"]["rows"] == expected
    # asked for pure Python: no notice; compiled: none either
    assert "pure Python" not in both["pure"]["stderr"]
    assert "pure Python" not in both["native"]["stderr"] or not all(compiled.status().values())
