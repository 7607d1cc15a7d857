"""The project's entry in the peer benchmark (``jstormpy_project_eo``, ../shared/bench-peers).

Same shape as every peer: file spout -> split -> fields-grouped running count -> final
counts, exactly-once with 1 s checkpoints on 2 workers, written with the batch API:

* ``Lines.next_batch`` reads a block of lines (its position, file and byte offset, is the
  replayable snapshot) and emits them as one column;
* ``Split.execute_batch`` splits a whole batch and pre-aggregates it with a ``Counter``
  (what Bytewax's ``flat_map_batch`` + Counter entry does), emitting ``(word, n)``;
* ``Count.execute_batch`` adds into managed state (keyed by word via fields grouping)
  and emits the final counts when its inputs end, into the transactional ``FileSink``.

Harness contract: ``--corpus DIR --out FILE --workdir DIR [--guarantee G]
[--checkpoint-interval SECONDS]`` (plus ``--state-store memory|rocksdb``, default
``$JSTORMPY_STATE_STORE`` or memory; ``bench/peer_wordcount_stores.py`` runs both); the
final counts go to ``FILE`` as one JSON object and the last stdout line is
``PROCESSING_SECONDS=<float>``: from the first spout call (the topology built and
running, spouts about to start) to drained (all input processed, last
checkpoint committed, final counts committed in the sink). Starting the Topology Master
and the worker processes is excluded (``INFO submit_to_drained_seconds`` includes it).

    python bench/peer_wordcount.py --corpus /tmp/peerbench/corpus-200000 --out /tmp/c.json \
        --workdir /tmp/wc-work
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from collections import Counter
from typing import Any

from jstormpy import Batch, Bolt, Config, FileSink, LocalCluster, Spout, TopologyBuilder
from jstormpy import read_committed as read_sink

LINES_PER_BATCH = 2000


class Lines(Spout):
    """Reads its share of the files (file ``i`` goes to task ``i % parallelism``)."""

    outputs = ("sentence",)

    def __init__(self, files: list[str], stamp_dir: str) -> None:
        self.all_files = files
        self.stamp_dir = stamp_dir
        self.pos = (0, 0)  # (index into this task's files, byte offset)
        self._fh: Any = None
        self._stamped = False

    def open(self, conf: dict[str, Any], context: Any) -> None:
        n, i = context.parallelism, context.task_index
        self.files = [f for k, f in enumerate(self.all_files) if k % n == i]
        self.task_id = context.task_id
        self._fh = None

    def snapshot(self) -> tuple[int, int]:
        return self.pos

    def restore(self, snap: Any) -> None:
        self.pos = tuple(snap)  # type: ignore[assignment]
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def next_batch(self) -> None:
        if not self._stamped:  # the processing window starts at the first spout call
            self._stamped = True
            with open(os.path.join(self.stamp_dir, f"start-{self.task_id}"), "w") as f:
                f.write(repr(time.time()))
        fi, off = self.pos
        if fi >= len(self.files):
            self.finish()
            return
        if self._fh is None:
            self._fh = open(self.files[fi], "rb")  # noqa: SIM115 (kept open across calls)
            self._fh.seek(off)
        raw = self._fh.readlines(LINES_PER_BATCH * 60)
        if not raw:
            self._fh.close()
            self._fh = None
            self.pos = (fi + 1, 0)
            return
        self.emit_batch({"sentence": [line.decode() for line in raw]})
        self.pos = (fi, self._fh.tell())


class Split(Bolt):
    """Splits a batch of sentences and pre-aggregates it: one ``(word, n)`` per word."""

    outputs = ("word", "n")

    def execute_batch(self, batch: Batch) -> None:
        counts = Counter(" ".join(batch["sentence"]).split())
        self.emit_batch([list(counts), list(counts.values())])


class Count(Bolt):
    """Running count per word in managed state; final counts when the inputs end."""

    outputs = ("word", "count")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts = self.state("counts")

    def execute_batch(self, batch: Batch) -> None:
        counts = self.counts
        get = counts.get
        for w, n in zip(batch["word"], batch["n"], strict=True):
            counts[w] = get(w, 0) + n

    def on_inputs_finished(self) -> None:
        if self.counts:
            self.emit_batch([list(self.counts), list(self.counts.values())])


def build(files: list[str], out_dir: str, par: int, stamp_dir: str) -> Any:
    """The topology: lines -> split -> count (fields grouping on word) -> FileSink."""
    b = TopologyBuilder("peer-wordcount")
    b.set_spout("lines", Lines(files, stamp_dir), parallelism=par)
    b.set_bolt("split", Split, parallelism=par).local_or_shuffle_grouping("lines")
    b.set_bolt("count", Count, parallelism=par).fields_grouping("split", ["word"])
    b.set_bolt("sink", FileSink(out_dir, format="jsonl"),
               parallelism=par).local_or_shuffle_grouping("count")
    return b.build()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="directory holding part-*.txt")
    ap.add_argument("--out", required=True, help="JSON file for the final counts")
    ap.add_argument("--workdir", default=None, help="scratch directory (checkpoints, sink)")
    ap.add_argument("--guarantee", default="exactly_once",
                    choices=("exactly_once", "at_least_once", "at_most_once"))
    ap.add_argument("--checkpoint-interval", type=float, default=1.0, help="seconds")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=4096,
                    help="Config.batch_size: most tuples per channel batch")
    ap.add_argument("--no-tls", action="store_true",
                    help="Config(tls=False): measure what TLS costs (docs/security.md)")
    ap.add_argument("--state-store", choices=("memory", "rocksdb"),
                    default=os.environ.get("JSTORMPY_STATE_STORE") or "memory",
                    help="Config.state_store of the count (default: $JSTORMPY_STATE_STORE, "
                         "else memory); bench/peer_wordcount_stores.py runs both")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(os.path.abspath(a.corpus), "part-*.txt")))
    if not files:
        print(f"no part-*.txt files in {a.corpus}", file=sys.stderr)
        return 2
    work = os.path.abspath(a.workdir or "/tmp/jstormpy-peer-wc")
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    stamps = os.path.join(work, "stamps")
    os.makedirs(stamps, exist_ok=True)
    topo = build(files, out_dir, a.workers, stamps)
    conf = Config(workers=a.workers, guarantee=a.guarantee,
                  checkpoint_interval_ms=int(a.checkpoint_interval * 1000),
                  batch_size=a.batch_size, log_level="WARNING", tls=not a.no_tls,
                  state_backend="file://" + os.path.join(work, "ckpt"),
                  state_store=a.state_store,
                  state_store_dir=os.path.join(work, "state") if a.state_store != "memory" else "")
    with LocalCluster() as cluster:
        t0 = time.perf_counter()
        handle = cluster.submit(topo, conf)
        status = handle.wait(timeout=1800, poll_s=0.01)
        t_end, dt_all = time.time(), time.perf_counter() - t0
        # window: first spout call (workers up, topology running) .. drained; bring-up of
        # the TM and worker processes is excluded, as the harness does for the JVM peers
        starts = [float(open(os.path.join(stamps, n)).read()) for n in os.listdir(stamps)]
        dt = t_end - min(starts) if starts else dt_all
        print(f"INFO submit_to_drained_seconds={dt_all:.3f}", flush=True)
        print(f"INFO state={status['state']}", flush=True)
        print(f"INFO restarts={status.get('restarts')}", flush=True)
        try:
            print(f"INFO last_checkpoint={handle.last_completed_checkpoint()}", flush=True)
        except Exception as exc:  # a figure only
            print(f"INFO last_checkpoint_error={type(exc).__name__}", flush=True)
    counts = {r["word"]: r["count"] for r in read_sink(out_dir)}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(counts, f, separators=(",", ":"), sort_keys=True)
    import jstormpy

    store = "" if a.state_store == "memory" else f", state_store={a.state_store}"
    print(f"VERSION=jstormpy {jstormpy.__version__} (batch API{store})", flush=True)
    print(f"PROCESSING_SECONDS={dt:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
