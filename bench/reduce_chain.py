"""CPU and instructions per word of the running-count chain (issue 36), stage by stage.

The peer harness's ``jstormpy_eo_reduce`` runs ``count`` (managed state, one
``emit((word, count))`` per word) with the transactional ``FileSink`` chained behind it in
the same worker (``local_or_shuffle``: the sink runs in the count's thread, no codec).
This script drives the engine's real code for that chain in one process, over the words
of a peer-harness corpus (``--corpus DIR``, Zipf keys) in channel batches of 512, and
times each stage alone:

    loop         ``TaskExecutor._execute_batch`` of a bolt whose ``execute`` does nothing
    count        the user's ``Count.execute`` (``get`` + set on managed state), ``emit`` a no-op
    emit         ``emit((word, count))`` through the count -> sink one-target route (batches
                 dropped)
    sink encode  ``encode_rows`` of the (word, count) batches (``connectors/jsonl.py``)
    sink write   ``FileSink.execute_batch`` of those batches into an open transaction
                 (encode, buffer, the in-progress file's writes), its ``pre_commit``
                 (flush, fsync, rename) and ``commit`` every 1M words
    chain        all of it: the count task with the real ``FileSink`` task chained behind
                 (``run_chained``), a transaction open, ``pre_commit`` and ``commit``
                 every 1M words

``--stage NAME --times N`` runs one stage only, for an instruction counter:
``valgrind --tool=callgrind`` of ``--times 2`` minus ``--times 1`` is one warm run; divide
by the words printed.

    python -m bench.reduce_chain --corpus DIR [--words 200000] [--repeat 5]
        [--stage NAME [--times N]]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.profile_datapath import Count, _task
from jstormpy import Bolt, FileSink
from jstormpy.api.component import bind_task
from jstormpy.connectors.jsonl import encode_rows
from jstormpy.runtime.collector import apply_collector_policy
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector, Route
from jstormpy.runtime.task_host import DetachedHost

BATCH = 512
COMMIT_EVERY = 1_000_000  # words between a transaction's pre_commit (about 1 s of a run)


class Nothing(Bolt):
    outputs = ("word", "count")

    def execute(self, tup: Any) -> None:
        pass


class _SinkContext:
    task_id = 6
    generation = 0
    input_tasks = (3,)


def corpus_words(folder: str, wanted: int) -> list[str]:
    words: list[str] = []
    for path in sorted(glob.glob(os.path.join(folder, "part-*.txt"))):
        with open(path) as f:
            for line in f:
                words.extend(line.split())
                if len(words) >= wanted:
                    return words[:wanted]
    return words


def _null_emit(values: Any, stream: str = "default") -> None:
    pass


def stages(words: list[str], out_dir: str,
           commit_every: int = COMMIT_EVERY) -> dict[str, Callable[[], int]]:
    """Each stage as a callable that runs it once and returns the words it covered; the
    sink stages leave their committed part files in ``out_dir``."""
    n = len(words)
    word_batches = [[(w,) for w in words[i:i + BATCH]] for i in range(0, n, BATCH)]
    counts: dict[str, int] = {}
    pairs = []
    for w in words:
        counts[w] = c = counts.get(w, 0) + 1
        pairs.append((w, c))
    pair_batches = [pairs[i:i + BATCH] for i in range(0, n, BATCH)]
    index = {"word": 0, "count": 1}
    src_idx = {(2, "default"): ("split", {"word": 0})}

    def dropped(dst: int, item: Any) -> None:
        pass

    def count_task(comp: Any, send: Any) -> TaskExecutor:
        r = Route("local_or_shuffle", "default", "sink", [6], 3, send, BATCH,
                  local_targets=[6])
        return _task(3, "count", comp, {"default": ("word", "count")}, r, src_idx, send)

    def new_sink() -> tuple[FileSink, TaskExecutor]:
        shutil.rmtree(out_dir, ignore_errors=True)
        sink = FileSink(out_dir, format="jsonl")
        coll = OutputCollector(6, "sink", {}, [], dropped, streams={})
        bind_task(sink, coll, None)
        sink.prepare({"guarantee": "exactly_once"}, _SinkContext())  # type: ignore[arg-type]
        sink.recover(None)
        ex = TaskExecutor(6, "sink", "bolt", sink, coll, DetachedHost(),
                          source_index={(3, "default"): ("count", index)})
        return sink, ex

    def loop() -> int:
        ex = count_task(Nothing(), dropped)
        for b in word_batches:
            ex._execute_batch(2, "default", b)
        return n

    def count() -> int:
        comp = Count()
        ex = count_task(comp, dropped)
        comp.__dict__["emit"] = _null_emit
        for b in word_batches:
            ex._execute_batch(2, "default", b)
        return n

    def emit() -> int:
        coll = OutputCollector(3, "count", {"default": [Route(
            "local_or_shuffle", "default", "sink", [6], 3, dropped, BATCH,
            local_targets=[6])]}, [6], dropped, streams={"default": ("word", "count")})
        e = coll.emit
        for p in pairs:
            e(p)
        return n

    def sink_encode() -> int:
        for b in pair_batches:
            encode_rows(b, index)
        return n

    def transactions(sink: FileSink, step: Callable[[], None], total: int,
                     flush: Callable[[], None] = lambda: None) -> None:
        txn = 1
        sink.begin(txn)
        done = 0
        for _ in range(total):
            step()
            done += BATCH
            if done >= commit_every:  # a barrier: the count's output flushed first
                flush()
                sink.pre_commit(txn)
                sink.commit(txn)  # (the checkpoint completed)
                done, txn = 0, txn + 1
                sink.begin(txn)
        flush()
        sink.pre_commit(txn)
        sink.commit(txn)

    def sink_write() -> int:
        sink, ex = new_sink()
        it = iter(pair_batches)
        transactions(sink, lambda: ex._execute_batch(3, "default", next(it)),
                     len(pair_batches))
        sink.cleanup()
        return n

    def chain() -> int:
        sink, sink_ex = new_sink()
        sink_ex.chained = True
        sink_ex.chain_ready.set()
        ex = count_task(Count(), lambda dst, item: sink_ex.run_chained(item))
        it = iter(word_batches)
        transactions(sink, lambda: ex._execute_batch(2, "default", next(it)),
                     len(word_batches), ex.collector.flush)
        sink.cleanup()
        return n

    return {"loop": loop, "count": count, "emit": emit, "sink encode": sink_encode,
            "sink write": sink_write, "chain": chain}


def measure(fn: Callable[[], int], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time_ns()
        n = fn()
        best = min(best, (time.thread_time_ns() - t0) / n)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", required=True, help="a peer-harness corpus directory")
    p.add_argument("--words", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--stage", default=None)
    p.add_argument("--times", type=int, default=1)
    args = p.parse_args()
    out_dir = tempfile.mkdtemp(prefix="jstorm-reduce-chain-")
    try:
        table = stages(corpus_words(args.corpus, args.words), out_dir)
        apply_collector_policy("tuned")  # a worker's collector (Config.worker_gc default)
        if args.stage is not None:
            n = sum(table[args.stage]() for _ in range(args.times))
            print(f"stage={args.stage!r} words={n}")
            return
        raw = {name: measure(fn, args.repeat) for name, fn in table.items()}
        print(f"{'stage':<14}{'CPU ns/word':>12}")
        for name, ns in raw.items():
            shown = ns - raw["loop"] if name == "count" else ns
            print(f"{name:<14}{shown:>12.0f}")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
