"""Profile the task data path in ONE process under cProfile (not part of ``python -m bench``).

Runs the peer harness's word count (lines -> split -> fields-grouped count) through the
engine's real task code — :class:`~jstormpy.runtime.routing.OutputCollector` routes and
:meth:`TaskExecutor._execute_batch` — with in-memory channels instead of worker processes,
so cProfile sees every engine call per record without sockets or scheduling noise. Used for
the before/after notes of the data-plane work; figures are relative (a shared machine).

    python bench/profile_datapath.py [--api tuple|batch|window|dataflow] [--lines 100000]
                                     [--top 25] [--sink] [--wire]

``--api dataflow`` runs the same word count written with ``jstormpy.dataflow`` (what
``bench/dataflow_bench.py`` submits: ``flat_map(split)`` -> ``key_by`` ->
``stateful_map(count)``) through its compiled bolts, so its CPU per word compares with
``--api tuple`` (the hand-written bolts) in one process.

``--sink`` adds the step after the count: a no-op two-phase-commit sink (the same class
for every API) chained behind each count task, reached through the dataflow's sink
adapter for ``--api dataflow``. ``--wire`` encodes and decodes every batch of the
fields-grouped hop with the data plane's codec (``runtime/codec.py``), as a hop to
another worker does: the hand-written bolts send ``(word,)``, the dataflow
``(key, item)``.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import time
from typing import Any

from jstormpy import Bolt
from jstormpy.api.component import bind_task
from jstormpy.barrier.twophase import Sink
from jstormpy.dataflow import Dataflow
from jstormpy.runtime.codec import decode_item, encode_item
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import MessageKind, OutputCollector, Route
from jstormpy.runtime.task_host import DetachedHost
from jstormpy.testing import TestingSource
from jstormpy.window import TumblingWindows, WindowedBolt

WORDS = [f"w{i}" for i in range(10_000)]


def make_lines(n: int) -> list[str]:
    """``n`` deterministic ten-word sentences."""
    return [" ".join(WORDS[(i * 7919 + j * 104729) % 10_000] for j in range(10)) for i in range(n)]


class Split(Bolt):
    """The peer script's per-tuple split (unchanged user code)."""

    outputs = ("word",)

    def execute(self, tup: Any) -> None:
        for w in tup.values[0].split():
            self.emit((w,))


class Count(Bolt):
    """The peer script's per-tuple running count (unchanged user code)."""

    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts = self.state("counts")

    def execute(self, tup: Any) -> None:
        w = tup.values[0]
        c = self.counts.get(w, 0) + 1
        self.counts[w] = c
        self.emit((w, c))


class BatchSplit(Bolt):
    """Batch API split with per-batch pre-aggregation."""

    outputs = ("word", "n")

    def execute_batch(self, batch: Any) -> None:
        c = collections.Counter()
        for s in batch["sentence"]:
            c.update(s.split())
        self.emit_batch({"word": list(c.keys()), "n": list(c.values())})


class BatchCount(Bolt):
    """Batch API running count."""

    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts = self.state("counts")

    def execute_batch(self, batch: Any) -> None:
        counts = self.counts
        words = batch["word"]
        out = []
        for w, n in zip(words, batch["n"], strict=True):
            c = counts.get(w, 0) + n
            counts[w] = c
            out.append(c)
        self.emit_batch({"word": words, "count": out})


class FinalCount(WindowedBolt):
    """The peer script's ``--mode window`` counter (unchanged user code): one ingestion-time
    window that fires when the input ends."""

    window = TumblingWindows(2 ** 62)
    time = "ingestion"
    key = "word"

    def create(self) -> int:
        return 0

    def add(self, acc: int, tup: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


class NullSink(Sink):
    """A two-phase-commit sink that only counts what it is given."""

    def __init__(self) -> None:
        self.seen = 0

    def begin(self, checkpoint_id: int) -> None:
        pass

    def write(self, tup: Any) -> None:
        self.seen += 1

    def pre_commit(self, checkpoint_id: int) -> None:
        pass

    def commit(self, checkpoint_id: int) -> None:
        pass

    def abort(self, checkpoint_id: int) -> None:
        pass

    def recover(self, completed_id: int | None) -> None:
        pass


def df_count(n: int | None, word: str) -> tuple[int, tuple[str, int]]:
    """The dataflow bench's per-key count (``stateful_map``)."""
    n = (n or 0) + 1
    return n, (word, n)


def dataflow_bolts() -> tuple[Any, Any, Any, Any, Any]:
    """The dataflow word count's compiled split and count bolts (and a spare count for
    the second task), as ``bench/dataflow_bench.py`` builds them, reading spout "lines",
    and its two sink tasks (the adapter around :class:`NullSink`)."""
    def build() -> Any:
        flow = Dataflow("profile-df")
        (flow.source("lines", TestingSource([]))
             .flat_map(lambda r: r["sentence"].split(), name="split")
             .key_by(lambda w: w)
             .stateful_map(df_count, name="count", parallelism=2)
             .sink("end", NullSink(), parallelism=2))
        return flow.build().components

    comps, more = build(), build()
    return (comps["split"].obj, comps["count"].obj, more["count"].obj, comps["end"].obj,
            more["end"].obj)


class _Context:
    input_tasks = (2,)


def _task(task_id: int, name: str, comp: Any, streams: dict[str, tuple[str, ...]],
          route: Route | None, sources: dict[tuple[int, str], tuple[str, dict[str, int]]],
          send: Any) -> TaskExecutor:
    routes = {s: [route] if route else [] for s in streams}
    coll = OutputCollector(task_id, name, routes, route.targets if route else [], send,
                           streams=streams)
    bind_task(comp, coll, None)
    comp.prepare({}, _Context())
    return TaskExecutor(task_id, name, "bolt", comp, coll, DetachedHost(), source_index=sources)


def run(api: str, lines: list[str], batch_size: int = 512, sink: bool = False,
        wire: bool = False) -> dict[str, int]:
    """Push ``lines`` through split -> count (2 count tasks), and with ``sink`` on to a
    sink task behind each count; returns the final counts."""
    inbox: dict[int, collections.deque[Any]] = {t: collections.deque()
                                                for t in (2, 3, 4, 6, 7)}

    def send(dst: int, item: Any) -> None:
        inbox[dst].append(item)

    def send_wire(dst: int, item: Any) -> None:  # the bytes a remote hop carries
        inbox[dst].append(decode_item(memoryview(encode_item(dst, item)))[1])

    split_c, count_c = (BatchSplit(), BatchCount()) if api == "batch" else (Split(), Count())
    if api == "window":
        split_c, count_c = Split(), FinalCount()
    sinks: list[Any] = [NullSink(), NullSink()]
    if api == "dataflow":
        split_c, count_c, count_c2, *sinks = dataflow_bolts()
    else:
        count_c2 = type(count_c)()
    split_fields = split_c.outputs
    r_split = Route("fields", "default", "count", [3, 4], 2, send_wire if wire else send,
                    batch_size, (0,))
    to_sink = send if sink else (lambda d, i: None)
    r_counts = Route("global", "default", "sink", [6], 3, to_sink, batch_size)
    r_counts2 = Route("global", "default", "sink", [7], 4, to_sink, batch_size)
    out_streams: dict[str, tuple[str, ...]] = {"default": tuple(count_c.outputs)}
    if api == "window":  # the window bolts' final counts go to task 5's inbox
        inbox[5] = collections.deque()
        out_streams = FinalCount.resolve_outputs(split_fields)
        r_counts = Route("global", "default", "sink", [5], 3, send, batch_size)
        r_counts2 = Route("global", "default", "sink", [5], 4, send, batch_size)
    split = _task(2, "split", split_c, {"default": split_fields}, r_split,
                  {(1, "default"): ("lines", {"sentence": 0})}, send)
    idx = {f: i for i, f in enumerate(split_fields)}
    counts = [_task(3, "count", count_c, out_streams, r_counts,
                    {(2, "default"): ("split", idx)}, send),
              _task(4, "count", count_c2, out_streams, r_counts2,
                    {(2, "default"): ("split", idx)}, send)]
    count_idx = {f: i for i, f in enumerate(count_c.outputs)}
    sink_tasks = [_task(t, "end", s, {}, None, {(c, "default"): ("count", count_idx)}, send)
                  for t, c, s in ((6, 3, sinks[0]), (7, 4, sinks[1]))]
    for i in range(0, len(lines), batch_size):
        split._execute_batch(1, "default", [(s,) for s in lines[i:i + batch_size]])
        split.collector.flush()
        for t, ex in zip((3, 4), counts, strict=True):
            q = inbox[t]
            while q:
                src, kind, stream, payload = q.popleft()
                assert kind == MessageKind.DATA
                ex._execute_batch(src, stream, payload)
            ex.collector.flush()
        for t, ex in zip((6, 7), sink_tasks, strict=True):  # chained: right behind
            q = inbox[t]
            while q:
                src, kind, stream, payload = q.popleft()
                ex._execute_batch(src, stream, payload)
    if api == "window":
        for ex in counts:
            ex._on_end_of_stream(2)  # the input ends: the one window fires
        return {row[0]: row[3] for src, kind, stream, payload in inbox[5]
                if kind == MessageKind.DATA for row in payload}
    if sink:
        seen = sum(s.seen for s in sinks)
        assert seen == sum(len(s.split()) for s in lines), f"the sinks saw {seen} records"
    merged: dict[str, int] = {}
    for c in (count_c, count_c2):
        merged.update(c.counts if api != "dataflow" else c.state("stateful_map"))
    return merged


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--api", choices=("tuple", "batch", "window", "dataflow"), default="tuple")
    p.add_argument("--lines", type=int, default=100_000)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--no-profile", action="store_true", help="time only (relative figure)")
    p.add_argument("--sink", action="store_true", help="add a chained no-op sink task behind "
                   "each count (the dataflow's sink adapter for --api dataflow)")
    p.add_argument("--wire", action="store_true", help="encode and decode the fields-grouped "
                   "hop's batches as a hop to another worker does")
    args = p.parse_args()
    lines = make_lines(args.lines)
    expected = collections.Counter(w for s in lines for w in s.split())
    prof = cProfile.Profile()
    t0 = time.process_time()
    if not args.no_profile:
        prof.enable()
    got = run(args.api, lines, sink=args.sink, wire=args.wire)
    if not args.no_profile:
        prof.disable()
    cpu = time.process_time() - t0
    assert got == expected, "wrong counts"
    words = sum(expected.values())
    extra = "".join(f" +{f}" for f in ("sink", "wire") if getattr(args, f))
    print(f"api={args.api}{extra} words={words} cpu={cpu:.3f}s "
          f"({words / cpu / 1e3:.0f}k words/cpu-s)"
          f"{' under cProfile' if not args.no_profile else ''}")
    if not args.no_profile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
