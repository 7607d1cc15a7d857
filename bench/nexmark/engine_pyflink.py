"""The Nexmark queries on PyFlink's DataStream API with Python functions.

Run with PyFlink's interpreter (``$NEXMARK_PYFLINK_PYTHON``) from the repository's root:

    python -m bench.nexmark.engine_pyflink --query q5 --events events.jsonl --out DIR

As the peer harness runs PyFlink: a local mini-cluster, parallelism 2, exactly-once
checkpoints every 1 s, ``python.execution-mode=thread`` (``--execution-mode process``
for Beam worker processes), a ``FileSink`` committing its part files on checkpoints.
The file is one split, read by one source subtask; ``rebalance()`` spreads its lines
over the 2 parsing subtasks, each assigning timestamps and bounded-out-of-orderness
watermarks (the generator's delay). Every row is computed with the shared functions of
``bench.nexmark.queries``. Processing time = the job's net runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sysconfig
import tempfile
from typing import Any

from pyflink.common import Duration, Encoder, Time, Types, WatermarkStrategy
from pyflink.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from pyflink.datastream.window import (
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)

from bench.nexmark import queries as Q
from bench.nexmark.flink_env import flink_environment
from bench.nexmark.pyflink_functions import (
    CountAgg,
    EventTime,
    Fold,
    ItemTime,
    NewUsers,
    Q7Stage2,
    Sessions,
    Step,
    WithWindow,
)


def build(env: Any, query: str, events: str, out: str, delay_ms: int) -> None:  # noqa: C901, PLR0915
    """Add one query's pipeline, from the events file to a FileSink in ``out``."""
    pickled = Types.PICKLED_BYTE_ARRAY()
    types = Q.QUERIES[query].inputs

    def bounded(assigner: Any) -> Any:
        return (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(delay_ms))
                .with_timestamp_assigner(assigner))

    source = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), events)
              .process_static_file_set().build())
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
    ev = lines.rebalance().flat_map(lambda line: Q.parse_event(line, types),
                                    output_type=pickled)
    rows: Any
    if query == "q0":
        rows = ev.map(Q.q0_row, output_type=pickled)
    elif query == "q1":
        rows = ev.map(Q.q1_row, output_type=pickled)
    elif query == "q2":
        rows = ev.filter(Q.q2_keep).map(Q.q2_row, output_type=pickled)
    elif query == "q3":
        rows = (ev.filter(lambda e: Q.q3_person(e) if e["type"] == "person"
                          else Q.q3_auction(e))
                  .key_by(lambda e: e["id"] if e["type"] == "person" else e["seller"],
                          key_type=Types.LONG())
                  .process(Step(Q.q3_step), output_type=pickled))
    elif query == "q4":
        rows = (ev.key_by(lambda e: e["id"] if e["type"] == "auction" else e["auction"],
                          key_type=Types.LONG())
                  .process(Step(Q.q4_auction_step), output_type=pickled)
                  .key_by(lambda c: c[0], key_type=Types.LONG())
                  .process(Step(Q.q4_category_step), output_type=pickled))
    elif query == "q5":
        counts = (ev.assign_timestamps_and_watermarks(bounded(EventTime()))
                    .key_by(lambda b: b["auction"], key_type=Types.LONG())
                    .window(SlidingEventTimeWindows.of(Time.milliseconds(Q.WINDOW_MS),
                                                       Time.milliseconds(Q.SLIDE_MS)))
                    .aggregate(Fold(CountAgg()), window_function=WithWindow(),
                               output_type=pickled))
        rows = (counts.key_by(lambda c: c[2], key_type=Types.LONG())
                      .window(TumblingEventTimeWindows.of(Time.milliseconds(Q.SLIDE_MS)))
                      .aggregate(Fold(Q.Collect()), window_function=WithWindow(),
                                 output_type=pickled)
                      .flat_map(lambda w: Q.q5_hot([(c[0], c[1]) for c in w[1]]),
                                output_type=pickled))
    elif query == "q7":
        tops = (ev.flat_map(Q.q7_expand, output_type=pickled)
                  .assign_timestamps_and_watermarks(bounded(ItemTime()))
                  .key_by(lambda it: it[1]["auction"] % Q.Q7_PARTITIONS,
                          key_type=Types.LONG())
                  .window(TumblingEventTimeWindows.of(Time.milliseconds(Q.WINDOW_MS)))
                  .aggregate(Fold(Q.Q7Max()), window_function=WithWindow(),
                             output_type=pickled))
        rows = (tops.key_by(lambda t: t[2], key_type=Types.LONG())
                    .window(TumblingEventTimeWindows.of(Time.milliseconds(Q.WINDOW_MS)))
                    .aggregate(Fold(Q7Stage2()), output_type=pickled)
                    .flat_map(Q.q7_rows, output_type=pickled))
    elif query == "q8":
        rows = (ev.assign_timestamps_and_watermarks(bounded(EventTime()))
                  .key_by(lambda e: e["id"] if e["type"] == "person" else e["seller"],
                          key_type=Types.LONG())
                  .window(TumblingEventTimeWindows.of(Time.milliseconds(Q.WINDOW_MS)))
                  .process(NewUsers(), output_type=pickled))
    elif query == "q11":  # see Sessions: PyFlink's session-window operator cannot checkpoint
        rows = (ev.assign_timestamps_and_watermarks(bounded(EventTime()))
                  .key_by(lambda b: b["bidder"], key_type=Types.LONG())
                  .process(Sessions(Q.WINDOW_MS), output_type=pickled))
    elif query == "q12":
        rows = (ev.key_by(lambda b: b["bidder"], key_type=Types.LONG())
                  .window(TumblingProcessingTimeWindows.of(Time.milliseconds(Q.WINDOW_MS)))
                  .aggregate(Fold(CountAgg()), window_function=WithWindow(),
                             output_type=pickled)
                  .map(lambda w: Q.q11_row(w[0], w[1], w[2], w[3]), output_type=pickled))
    else:
        raise ValueError(f"unknown query {query!r}")
    (rows.map(json.dumps, output_type=Types.STRING())
         .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--query", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--execution-mode", choices=["thread", "process"], default="thread")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="nexmark-pyflink-")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # The embedded (thread-mode) interpreter is the base CPython: give it the venv's
    # packages and this repository (bench.nexmark.queries).
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [sysconfig.get_paths()["purelib"], root, os.environ.get("PYTHONPATH", "")])
    os.environ["_python_worker_execution_mode"] = "process"
    env = flink_environment(work, a.parallelism, **{"python.execution-mode": a.execution_mode})
    try:
        build(env, a.query, os.path.abspath(a.events), os.path.abspath(a.out), a.delay_ms)
        result = env.execute(f"nexmark-{a.query}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("GUARANTEE=exactly-once (checkpoints every 1 s, FileSink commits on checkpoints)")
    print(f"PROCESSING_SECONDS={result.get_net_runtime() / 1000.0:.6f}")


if __name__ == "__main__":
    main()
