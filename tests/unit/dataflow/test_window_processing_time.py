"""KeyedStream.window(..., time="processing"): windows over the operator's clock, which
Nexmark's q12 needs. Without event timestamps every item is still counted once, in a
window of whole ``size_ms`` on the wall clock."""

from __future__ import annotations

import time

import pytest

from jstormpy.dataflow import Dataflow
from jstormpy.errors import TopologyError
from jstormpy.testing import TestingSink, TestingSource, run_inline
from jstormpy.window import Count, TumblingWindows


def test_processing_time_window_counts_every_item_in_wall_clock_windows():
    items = [{"user": f"u{i % 3}"} for i in range(90)]
    flow = Dataflow("proc-time")
    (flow.source("in", TestingSource(items, batch_size=7))
         .key_by("user")
         .window(TumblingWindows(size_ms=10_000), time="processing")
         .aggregate(Count())
         .sink("out", TestingSink()))
    before = time.time() * 1000
    out = run_inline(flow)
    after = time.time() * 1000
    per_user: dict[str, int] = {}
    for r in out:
        per_user[r["key"]] = per_user.get(r["key"], 0) + r["value"]
        assert r["end"] - r["start"] == 10_000 and r["start"] % 10_000 == 0
        assert before - 10_000 < r["start"] <= after
    assert per_user == {"u0": 30, "u1": 30, "u2": 30}


def test_processing_time_window_refuses_a_timestamp_function():
    flow = Dataflow("proc-time-bad")
    keyed = flow.source("in", TestingSource([{"user": "u"}])).key_by("user")
    with pytest.raises(TopologyError, match="processing"):
        keyed.window(TumblingWindows(size_ms=1_000), timestamp=lambda r: 0,
                     time="processing")
