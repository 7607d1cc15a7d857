"""The batch API over 2 real worker processes, mixed with per-tuple components."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed

from .batch_components import BatchLines, BatchRunningCount, TupleSplit, corpus
from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(120)

N = 2000


def test_batch_spout_tuple_bolt_batch_bolt_word_count_is_exact(tmp_path):
    """batch spout -> per-tuple split -> batch running count (fields grouping) -> sink:
    the committed running counts of every word are 1..n in order, n as a Counter says."""
    out = tmp_path / "out"
    b = TopologyBuilder("batch-wc")
    b.set_spout("lines", BatchLines(N), parallelism=2)
    b.set_bolt("split", TupleSplit, parallelism=2).shuffle_grouping("lines")
    b.set_bolt("count", BatchRunningCount, parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("out", FileSink(str(out)), parallelism=2).fields_grouping("count", ["word"])
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), fast_config())
        status = handle.wait(timeout=90)
        assert status["state"] == "drained" and status["restarts"] == 0, status
        # emit_batch counts tuples, not batches (metrics arrive with heartbeats)
        wait_until(lambda: handle.metrics()["components"].get("lines", {}).get("emitted") == N,
                   timeout=10, what="the spout's emitted metric to reach N")
    expected = Counter(w for s in corpus(N) for w in s.split())
    seen: dict[str, list[int]] = defaultdict(list)
    for r in read_committed(out):
        seen[r["word"]].append(r["count"])
    assert {w: c[-1] for w, c in seen.items()} == dict(expected)
    assert all(c == list(range(1, expected[w] + 1)) for w, c in seen.items())
