"""Bytewax's running word count, for ``bench/bytewax_running_counts.py`` (issue 36).

The same job as the peer harness's ``jstormpy_eo_reduce``, written the fastest way a
Bytewax user can: ``DirSource`` lines -> ``flat_map(str.split)`` -> ``key_on`` the word ->
``stateful_map`` keeping the count and emitting ``(word, count)`` for every word -> each
running count written as a jsonl line (an f-string: the corpus's words need no escaping).

Imported by ``python -m bytewax.run bench.bytewax_running_flow:flow`` with the Bytewax
virtual environment's Python; it reads its settings from the environment:

- ``RUNNING_CORPUS``: the directory of ``part-*.txt``;
- ``RUNNING_OUTDIR``: where the rows and the timings go;
- ``RUNNING_PROC``: this process's index;
- ``RUNNING_OP``: ``map`` counts with ``stateful_map`` (Bytewax's own running-count example,
  one call per word); ``batch`` with ``stateful_batch`` (one call per key and batch: the
  running counts of a key's words in a batch as one ``range``);
- ``RUNNING_SINK``:
  - ``dir``: Bytewax's own resumable file sink (``DirSink``, two files: it truncates each
    file to its snapshotted offset on resume, and fsyncs every batch it writes);
  - ``plain``: a sink of this module that only appends to one file per worker, with no
    fsync and no resume (the fastest, and not exactly-once).

Like the harness's Bytewax entries, it stamps the wall clock when the flow is built and
when the process is about to exit.
"""

import atexit
import json
import os
import time
from pathlib import Path

import bytewax.operators as op
from bytewax.connectors.files import DirSink, DirSource
from bytewax.dataflow import Dataflow
from bytewax.operators import StatefulBatchLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition

CORPUS = Path(os.environ["RUNNING_CORPUS"])
OUTDIR = Path(os.environ["RUNNING_OUTDIR"])
PROC = os.environ.get("RUNNING_PROC", "0")
SINK = os.environ.get("RUNNING_SINK", "dir")
OP = os.environ.get("RUNNING_OP", "map")


class _AppendPartition(StatelessSinkPartition):
    def __init__(self, worker_index):
        self._f = open(OUTDIR / f"rows-p{PROC}-w{worker_index}.jsonl", "w",  # noqa: SIM115
                       encoding="utf-8")

    def write_batch(self, items):
        self._f.write("".join(items))

    def close(self):
        self._f.close()


class AppendSink(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return _AppendPartition(worker_index)


def _count(state, word):
    c = (state or 0) + 1
    return c, c


class _CountLogic(StatefulBatchLogic):
    def __init__(self, resume):
        self.count = resume or 0

    def on_batch(self, values):
        c = self.count
        self.count = c + len(values)
        return range(c + 1, self.count + 1), StatefulBatchLogic.RETAIN

    def snapshot(self):
        return self.count


def _row(kv):
    return f'{{"word": "{kv[0]}", "count": {kv[1]}}}'


flow = Dataflow("running_counts")
lines = op.input("read", flow, DirSource(CORPUS, glob_pat="part-*.txt", batch_size=1000))
words = op.flat_map("split", lines, str.split)
keyed = op.key_on("key", words, lambda w: w)
if OP == "map":
    counts = op.stateful_map("count", keyed, _count)
else:
    counts = op.stateful_batch("count", keyed, _CountLogic)
if SINK == "dir":
    rows = op.map("row", counts, lambda kv: (kv[0], _row(kv)))
    op.output("out", rows, DirSink(OUTDIR, 2, file_namer=lambda i, _n: f"rows-{i}.jsonl"))
else:
    rows = op.map("row", counts, lambda kv: _row(kv) + "\n")
    op.output("out", rows, AppendSink())

_T_READY = time.time()


@atexit.register
def _write_timing():
    with open(OUTDIR / f"timing-p{PROC}.json", "w") as f:
        json.dump({"t_ready": _T_READY, "t_exit": time.time()}, f)
