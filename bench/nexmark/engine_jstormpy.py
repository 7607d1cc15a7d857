"""The Nexmark queries on jstormpy's dataflow API (``jstormpy.dataflow``).

Run by ``python -m bench.nexmark run --engine jstormpy``; also runnable alone:

    python -m bench.nexmark.engine_jstormpy --query q5 --events events.jsonl --out DIR

Every query reads the events file with :class:`EventLines` (parallelism 2: task ``i``
emits the lines ``i, i + 2, ...``, so each task's records are out of order by at most
the generator's delay), parses only the event types it needs and commits its rows
exactly once to a ``FileSink`` in ``DIR``. Prints ``PROCESSING_SECONDS=<s>`` (submit to
the end of the run) as its last line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

from bench.nexmark import queries as Q
from jstormpy import Config, FileSink, LocalCluster, Spout
from jstormpy.dataflow import Dataflow, Stream
from jstormpy.window import Count, SessionWindows, SlidingWindows, TumblingWindows

LINES_PER_CALL = 256


class EventLines(Spout):
    """The events file's lines, task ``i`` of ``n`` taking every ``n``-th from line ``i``.

    Its snapshot is ``(byte offset, line number)``: a restore resumes after the last line
    emitted. With ``stamp_dir``, each task's first ``open`` writes the wall-clock time the
    workers were up (``.ready-<task>``): the start of the measured processing time.
    """

    outputs = ("line",)

    def __init__(self, path: str, stamp_dir: str | None = None) -> None:
        self.path = path
        self.stamp_dir = stamp_dir
        self.pos = (0, 0)
        self._fh: Any = None

    def open(self, conf: Any, context: Any) -> None:
        self.task_index, self.parallelism = context.task_index, context.parallelism
        self._fh = None
        if self.stamp_dir is not None:
            stamp = os.path.join(self.stamp_dir, f".ready-{context.task_index}")
            if not os.path.exists(stamp):
                with open(stamp, "w", encoding="ascii") as fh:
                    fh.write(repr(time.time()))

    def snapshot(self) -> tuple[int, int]:
        return self.pos

    def restore(self, snap: Any) -> None:
        self.pos = (int(snap[0]), int(snap[1]))
        self.close()

    def next_batch(self) -> None:
        """Emit this task's share of the next ``LINES_PER_CALL * n`` lines as one batch."""
        if self._fh is None:
            self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
            self._fh.seek(self.pos[0])
        fh, mine, n = self._fh, self.task_index, self.parallelism
        line_no = self.pos[1]
        lines = []
        done = False
        for _ in range(LINES_PER_CALL * n):
            raw = fh.readline()
            if not raw:
                done = True
                break
            if line_no % n == mine:
                lines.append(raw.decode())
            line_no += 1
        self.pos = (fh.tell(), line_no)
        if lines:
            self.emit_batch({"line": lines})
        if done:
            self.finish()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._fh = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fh"] = None
        return state


def _events(flow: Dataflow, path: str, types: tuple[str, ...], par: int,
            stamp_dir: str | None) -> Stream:
    return (flow.source("events", EventLines(path, stamp_dir), parallelism=par)
                .flat_map(lambda r: Q.parse_event(r["line"], types), name="parse"))


def _ts(e: dict[str, Any]) -> int:
    return e["dateTime"]  # type: ignore[no-any-return]


def build(query: str, events: str, out: str, delay_ms: int, par: int = 2,
          stamp_dir: str | None = None, sink: Any = None) -> Dataflow:
    """The dataflow of one query, committing its rows to ``sink`` (default
    ``FileSink(out)``)."""
    flow = Dataflow(f"nexmark-{query}")
    q = Q.QUERIES[query]
    ev = _events(flow, events, q.inputs, par, stamp_dir)
    rows: Stream
    if query == "q0":
        rows = ev.map(Q.q0_row, name="q0")
    elif query == "q1":
        rows = ev.map(Q.q1_row, name="q1")
    elif query == "q2":
        rows = ev.filter(Q.q2_keep, name="q2").map(Q.q2_row, name="q2-row")
    elif query == "q3":
        rows = (ev.filter(lambda e: Q.q3_person(e) if e["type"] == "person"
                          else Q.q3_auction(e), name="q3-filter")
                  .key_by(lambda e: e["id"] if e["type"] == "person" else e["seller"])
                  .stateful_map(lambda s, e: _listed(Q.q3_step(s, e)), name="q3-join")
                  .flat_map(lambda rs: rs, name="q3-rows"))
    elif query == "q4":
        rows = (ev.key_by(lambda e: e["id"] if e["type"] == "auction" else e["auction"])
                  .stateful_map(lambda s, e: _listed(Q.q4_auction_step(s, e)),
                                name="q4-closing")
                  .flat_map(lambda cs: cs, name="q4-changes")
                  .key_by(lambda c: c[0])
                  .stateful_map(Q.q4_category_step, name="q4-average"))
    elif query == "q5":
        counts = (ev.key_by("auction")
                    .window(SlidingWindows(size_ms=Q.WINDOW_MS, slide_ms=Q.SLIDE_MS),
                            timestamp=_ts, out_of_orderness_ms=delay_ms)
                    .aggregate(Count(), name="q5-count"))
        rows = (counts.key_by(lambda r: r.start)
                      .window(TumblingWindows(size_ms=Q.SLIDE_MS),
                              timestamp=lambda r: r.end - 1)
                      .aggregate(_CollectCounts(), name="q5-max")
                      .flat_map(lambda r: Q.q5_hot(r.value), name="q5-rows"))
    elif query == "q7":
        tops = (ev.flat_map(Q.q7_expand, name="q7-expand")
                  .key_by(lambda it: it[1]["auction"] % Q.Q7_PARTITIONS)
                  .window(TumblingWindows(size_ms=Q.WINDOW_MS), timestamp=lambda it: it[0],
                          out_of_orderness_ms=delay_ms)
                  .aggregate(Q.Q7Max(), name="q7-max"))
        rows = (tops.key_by(lambda r: r.start)
                    .window(TumblingWindows(size_ms=Q.WINDOW_MS), timestamp=lambda r: r.start)
                    .aggregate(_MergeQ7(), name="q7-merge")
                    .flat_map(lambda r: Q.q7_rows(r.value), name="q7-rows"))
    elif query == "q8":
        people = ev.filter(lambda e: e["type"] == "person", name="q8-people")
        auctions = ev.filter(lambda e: e["type"] == "auction", name="q8-auctions")
        rows = (people.key_by("id", name="q8-person-id")
                      .join(auctions.key_by("seller", name="q8-seller"),
                            window=TumblingWindows(size_ms=Q.WINDOW_MS),
                            timestamp=(_ts, _ts), out_of_orderness_ms=delay_ms)
                      .key_by(lambda j: j.key)
                      .stateful_map(lambda s, j: Q.q8_step(s, (j.left, j.right)),
                                    name="q8-new"))
    elif query == "q11":
        rows = (ev.key_by("bidder")
                  .window(SessionWindows(gap_ms=Q.WINDOW_MS), timestamp=_ts,
                          out_of_orderness_ms=delay_ms)
                  .aggregate(Count(), name="q11-count")
                  .map(lambda r: Q.q11_row(r.key, r.value, r.start, r.end), name="q11-row"))
    elif query == "q12":
        rows = (ev.key_by("bidder")
                  .window(TumblingWindows(size_ms=Q.WINDOW_MS), time="processing")
                  .aggregate(Count(), name="q12-count")
                  .map(lambda r: Q.q11_row(r.key, r.value, r.start, r.end), name="q12-row"))
    else:
        raise ValueError(f"unknown query {query!r}; one of {', '.join(Q.QUERIES)}")
    rows.sink("out", sink if sink is not None else FileSink(out), parallelism=par)
    return flow


def _listed(step: tuple[Any, list[Any]]) -> tuple[Any, list[Any] | None]:
    state, out = step
    return state, (out or None)


class _CollectCounts(Q.Collect):
    def add(self, acc: list[Any], item: Any) -> list[Any]:
        return [*acc, (item.key, item.value)]


class _MergeQ7(Q.Q7Merge):
    def add(self, acc: Any, item: Any) -> Any:
        return self.merge(acc, item.value)


def run(query: str, events: str, out: str, delay_ms: int, par: int = 2,
        checkpoint_ms: int = 1000) -> float:
    """Run one query to the end of the events file; returns its processing seconds.

    Measured as Bytewax's are in this bench: from the moment the last spout task is open
    (worker processes started, jstormpy imported, the topology deployed) to the end of
    the run (input drained, the final checkpoint committed).
    """
    work = tempfile.mkdtemp(prefix="nexmark-jstormpy-")
    topology = build(query, events, out, delay_ms, par, stamp_dir=work).build()
    try:
        conf = Config(workers=par, guarantee="exactly_once",
                      checkpoint_interval_ms=checkpoint_ms, log_level="WARNING",
                      state_backend="file://" + os.path.join(work, "ckpt"))
        with LocalCluster() as cluster:
            cluster.submit(topology, conf).wait(timeout=3600)
            end = time.time()
        ready = []
        for task in range(par):
            with open(os.path.join(work, f".ready-{task}"), encoding="ascii") as fh:
                ready.append(float(fh.read()))
        return end - max(ready)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--query", required=True, choices=list(Q.QUERIES))
    p.add_argument("--events", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--parallelism", type=int, default=2)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    seconds = run(a.query, a.events, a.out, a.delay_ms, a.parallelism)
    print("GUARANTEE=exactly-once (checkpoints every 1 s, two-phase-commit FileSink)")
    print(f"PROCESSING_SECONDS={seconds:.6f}")


if __name__ == "__main__":
    main()
