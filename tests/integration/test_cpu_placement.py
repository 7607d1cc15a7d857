"""Where a local cluster's workers run (``Config.worker_cpu_affinity``,
``jstormpy/deploy/cpu_placement.py``): each worker of a topology alone on its home on a CPU
of its own, and the OS placing them where that could crowd a core."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from examples import wordcount as wc
from jstormpy import LocalCluster, read_committed

from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(180)

CPUS = sorted(os.sched_getaffinity(0))
SENTENCES = 3000


class HeldSentences(wc.Sentences):
    """The word count's sentences, held back until the test has looked at the workers (a
    run of 3,000 sentences could otherwise drain, and its workers exit, before the test
    sees them registered)."""

    def __init__(self, gate: Path) -> None:
        super().__init__(SENTENCES)
        self.gate = str(gate)
        self.released = False

    def next_tuple(self):
        self.released = self.released or os.path.exists(self.gate)  # no stat once open
        if self.released:
            super().next_tuple()


def _wordcount(name, out, gate):
    return wc.build(str(out), name=name, sentences=HeldSentences(gate))


def _registered(handle):
    return wait_until(lambda: [w for w in handle.workers() if w.alive and w.pid]
                      if len(handle.workers()) == 2 and all(w.alive for w in handle.workers())
                      else None, what="both workers registered")


def _words(out):
    got = Counter()
    for row in read_committed(out):
        got[row["word"]] = max(got[row["word"]], row["count"])
    return got


@pytest.mark.skipif(len(CPUS) < 2, reason="one CPU: there is nothing to place")
def test_a_lone_topology_runs_each_worker_on_a_cpu_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("JSTORM_HOME", str(tmp_path / "home"))
    with LocalCluster() as cluster:
        gate = tmp_path / "gate"
        first = cluster.submit(_wordcount("wordcount-a", tmp_path / "a", gate), fast_config())
        placed = {w.id: os.sched_getaffinity(w.pid) for w in _registered(first)}
        assert placed == {0: {CPUS[0]}, 1: {CPUS[1]}}
        # a second topology under the same home while the first runs: the OS places it
        # (both would otherwise put their worker 0 on the first CPU)
        second = cluster.submit(_wordcount("wordcount-b", tmp_path / "b", gate), fast_config())
        assert all(os.sched_getaffinity(w.pid) == set(CPUS) for w in _registered(second))
        gate.touch()
        for handle in (first, second):
            assert handle.wait(timeout=120)["state"] == "drained"
    expected = Counter(w for line in wc.corpus(SENTENCES) for w in line.split())
    assert _words(tmp_path / "a") == expected == _words(tmp_path / "b")


@pytest.mark.parametrize("changes", [{"worker_cpu_affinity": "off"},
                                     {"state_store": "rocksdb"}])
def test_the_os_places_workers_that_are_off_or_keep_rocksdb_state(tmp_path, monkeypatch,
                                                                   changes):
    monkeypatch.setenv("JSTORM_HOME", str(tmp_path / "home"))
    with LocalCluster() as cluster:
        gate = tmp_path / "gate"
        handle = cluster.submit(_wordcount("wordcount", tmp_path / "out", gate),
                                fast_config(state_store_dir=str(tmp_path / "db"), **changes)
                                if "state_store" in changes else fast_config(**changes))
        assert all(os.sched_getaffinity(w.pid) == set(CPUS) for w in _registered(handle))
        gate.touch()
        assert handle.wait(timeout=120)["state"] == "drained"
