"""The word count of examples/wordcount.py over 2 workers: exact counts, metrics, workers."""

from __future__ import annotations

from collections import Counter

import pytest

from examples import wordcount as wc
from jstormpy import LocalCluster, read_committed

from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(120)

SENTENCES = 3000


def test_wordcount_equals_a_counter_and_metrics_add_up(tmp_path):
    out = tmp_path / "out"
    topology = wc.build(str(out), n_sentences=SENTENCES)
    text = wc.corpus(SENTENCES)
    expected = Counter(w for line in text for w in line.split())
    words = sum(expected.values())

    with LocalCluster() as cluster:
        handle = cluster.submit(topology, fast_config())
        # workers: 2, each the process the launcher started, tasks spread over both. Not
        # required alive: 3,000 sentences can drain, and the workers exit, in tens of ms,
        # before the first look (a registered worker keeps its entry once it left)
        def registered():
            ws = handle.workers()
            return ws if len(ws) == 2 and all(w.pid for w in ws) else None

        workers = wait_until(registered, what="both workers registered")
        assert sorted(w.id for w in workers) == [0, 1]
        for w in workers:
            assert w.pid == handle._launcher.workers[w.id].pid
            assert w.tasks and w.code_version
        assert sorted(t for w in workers for t in w.tasks) == list(range(1, 8))
        tasks = topology.task_ids()
        for name in ("sentences", "split", "count"):  # each parallelism-2 component spans both
            owners = {w.id for w in workers for t in tasks[name] if t in w.tasks}
            assert owners == {0, 1}, name

        status = handle.wait(timeout=90)
        assert status["state"] == "drained" and status["restarts"] == 0

        # metrics are reported by heartbeats: wait until the final counts are in
        def final_metrics():
            m = handle.metrics()
            c = m["components"]
            done = (c.get("count", {}).get("executed") == words
                    and c.get("out", {}).get("executed") == len(expected))
            return m if done else None

        m = wait_until(final_metrics, timeout=10, what="final metrics")
        comps = m["components"]
        assert comps["sentences"]["emitted"] == SENTENCES
        assert comps["split"]["executed"] == SENTENCES
        assert comps["split"]["emitted"] == words
        assert comps["count"]["executed"] == words
        assert comps["count"]["emitted"] == len(expected)
        assert comps["out"]["executed"] == len(expected)
        assert all(c["errors"] == 0 for c in comps.values())
        # per task → per worker → topology: the levels add up
        per_task = m["tasks"]
        assert sorted(int(t) for t in per_task) == list(range(1, 8))
        for level in ("emitted", "executed"):
            by_worker = {w: sum(t[level] for t in per_task.values() if str(t["worker"]) == w)
                         for w in m["workers"]}
            assert {w: a[level] for w, a in m["workers"].items()} == by_worker
            assert sum(a[level] for a in m["workers"].values()) == m["topology"][level]
            assert sum(a[level] for a in comps.values()) == m["topology"][level]
        assert set(m["workers"]) == {"0", "1"}
        assert m["topology"]["executed"] == SENTENCES + words + len(expected)
        split_only = handle.metrics("split")
        assert list(split_only["components"]) == ["split"]
        assert split_only["topology"]["executed"] == SENTENCES

    got = {r["word"]: r["count"] for r in read_committed(out)}
    assert got == dict(expected)
    assert len(read_committed(out)) == len(expected)  # one final count per word
