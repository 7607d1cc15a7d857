"""heronpy topologies, unmodified (jstormpy.heron, the heronpy API in heronpy/): a heronpy
word count through `jstorm run FILE`, a class-DSL file, a stateful heronpy topology
exactly once per key through a worker SIGKILL, and the refusal of a spout that cannot be
rewound under exactly-once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import TopologyError
from jstormpy.cli.main import load_topology_file
from jstormpy.heron import HeronBolt, HeronSpout

from .helpers import JSTORM, fast_config, kill_now, wait_until
from .heron_topologies.heron_components import Forgetful, KeyCount, KeySpout

pytestmark = pytest.mark.timeout(240)

HERE = Path(__file__).parent / "heron_topologies"


def _counts(out: Path) -> Counter:
    total: Counter = Counter()
    for f in out.glob("task-*.json"):
        try:
            total.update(json.loads(f.read_text()))
        except (json.JSONDecodeError, FileNotFoundError):
            pass
    return total


def test_a_heronpy_word_count_runs_unmodified_with_jstorm_run(tmp_path):
    sys.path.insert(0, str(HERE))
    try:
        from wordcount import corpus
    finally:
        sys.path.remove(str(HERE))
    expected = Counter(corpus(2000))
    out = tmp_path / "counts"
    out.mkdir()
    before = (HERE / "wordcount.py").read_bytes()
    env = {**os.environ, "JSTORM_HOME": str(tmp_path / "home"), "WORDCOUNT_OUT": str(out)}
    run = subprocess.Popen([*JSTORM, "run", str(HERE / "wordcount.py")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # the bolts write their counts on every tick tuple (topology.tick.tuple.freq.secs 1)
        wait_until(lambda: _counts(out) == expected, timeout=120,
                   what="every word counted, as the tick tuples report it")
        stop = subprocess.run([*JSTORM, "stop", "wordcount"], env=env, text=True,
                              capture_output=True, timeout=60, check=False)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    # the name is argv[1], as `heron submit CLUSTER FILE - NAME` passes it; the file's
    # ATLEAST_ONCE reliability mode is the run's guarantee
    assert "running 'wordcount': 2 components, 2 workers, at_least_once" in output, output
    assert (HERE / "wordcount.py").read_bytes() == before  # run with no edit


def test_a_class_dsl_topology_file_runs_and_keeps_its_shape(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    module = load_topology_file(str(HERE / "dsl.py"))
    topo = module.topology
    assert topo.name == "KeyCounts"
    assert module.config.guarantee == "exactly_once"  # EFFECTIVELY_ONCE
    assert module.config.checkpoint_interval_ms == 250
    spout, count = topo.components["keys"], topo.components["count"]
    assert (spout.parallelism, count.parallelism) == (2, 2)
    assert [(g.kind, g.source, g.fields) for g in count.inputs] == [("fields", "keys", ("key",))]
    out = tmp_path / "out"
    b = TopologyBuilder("dsl-out")  # the same components ahead of a jstormpy sink
    for name in ("keys", "count"):
        spec = topo.components[name]
        if spec.kind == "spout":
            b.set_spout(name, spec.obj, parallelism=spec.parallelism)
        else:
            b.set_bolt(name, spec.obj, parallelism=spec.parallelism).fields_grouping(
                "keys", ("key",))
    b.set_bolt("out", FileSink(str(out))).global_grouping("count")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), fast_config())
        wait_until(lambda: out.exists() and len(read_committed(out)) == 300, timeout=90,
                   what="every key counted and committed")
        status = handle.status()
        handle.kill()
    assert status["errors"] == []
    assert sorted(r["seq"] for r in read_committed(out)) == list(range(300))


def keyed_topology(name: str, out: Path, n: int, keys: int, pause_s: float):
    conf = {"keys.n": n, "keys.keys": keys, "keys.pause_s": pause_s}
    b = TopologyBuilder(name)
    b.set_spout("keys", HeronSpout(KeySpout, conf), parallelism=2)
    b.set_bolt("count", HeronBolt(KeyCount), parallelism=2).fields_grouping("keys", ("key",))
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("count")
    return b.build()


def test_a_stateful_heronpy_topology_is_exactly_once_per_key_through_a_worker_sigkill(
        tmp_path):
    n, keys = 4000, 40
    out = tmp_path / "out"
    topo = keyed_topology("heron-kill", out, n, keys, pause_s=0.001)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: out.exists() and len(read_committed(out)) >= n // 5, timeout=90,
                   what="a fifth of the tuples committed")
        assert len(read_committed(out)) < n, "drained before the kill"
        kill_now(handle, "worker", 1)
        wait_until(lambda: handle.status()["restarts"] >= 1, timeout=60, what="the rollback")
        wait_until(lambda: len(read_committed(out)) >= n, timeout=150,
                   what="every tuple committed")
        # one more completed checkpoint: a duplicate still in flight would be committed
        last = handle.checkpoint()
        wait_until(lambda: (handle.last_completed_checkpoint() or 0) > last, timeout=30,
                   what="one more checkpoint")
        status = handle.status()
        handle.kill()
    assert any("worker 1 lost" in r["reason"] for r in status["recoveries"]), \
        status["recoveries"]
    records = read_committed(out)
    assert sorted(r["seq"] for r in records) == list(range(n))  # no loss, no duplicate
    per_key: dict[str, list[int]] = {}
    for r in records:
        per_key.setdefault(r["key"], []).append(r["count"])
    # per key, the committed counts are 1, 2, ..., in order: the restored state and the
    # rewound spouts resumed exactly where the checkpoint left off
    for key, counts in per_key.items():
        assert counts == list(range(1, len(counts) + 1)), (key, counts[:20])
    assert sum(len(c) for c in per_key.values()) == n


def test_a_spout_that_is_not_stateful_is_refused_under_exactly_once():
    b = TopologyBuilder("heron-refused")
    b.set_spout("numbers", HeronSpout(Forgetful))
    b.set_bolt("count", HeronBolt(KeyCount)).shuffle_grouping("numbers")
    with LocalCluster() as cluster, pytest.raises(TopologyError) as err:
        cluster.submit(b.build(), fast_config())
    message = str(err.value)
    assert "spout 'numbers' (heronpy Forgetful) is not stateful" in message
    assert "StatefulComponent" in message and "ATLEAST_ONCE" in message
