"""Aggregation correctness: sums and merged histograms equal a direct computation, at every
level (task → component → worker → topology), in the JSON API and in Prometheus output."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jstormpy.api.config import Config
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.master.history import MetricsHistory
from jstormpy.master.metrics import MetricsStore
from jstormpy.master.prom import histogram_buckets, registry_for
from jstormpy.metrics import LATENCY_BUCKETS_MS
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.runtime.executor import TaskMetricsCounters
from jstormpy.state_backends import open_backend

TASK_COMPONENT = {1: "spout", 2: "spout", 3: "split", 4: "split", 5: "split", 6: "count"}
PLAN = {t: (t - 1) % 2 for t in TASK_COMPONENT}


def exact_percentile(latencies: list[float], q: float) -> float | None:
    """The bucket upper bound holding the q-quantile of the raw observations (ground truth)."""
    if not latencies:
        return None
    ordered = sorted(latencies)
    rank = q * len(ordered)
    idx = max(int(-(-rank // 1)) - 1, 0)  # ceil(rank) - 1
    value = ordered[idx]
    return next(b for b in LATENCY_BUCKETS_MS if value <= b)


def observe(latencies: list[float]) -> TaskMetricsCounters:
    counters = TaskMetricsCounters()
    for ms in latencies:
        counters.observe_ms(ms)
    return counters


def task_message(task_id: int, latencies: list[float], emitted: int, executed: int,
                 depth: int = 0, errors: int = 0) -> SimpleNamespace:
    c = observe(latencies)
    return SimpleNamespace(task_id=task_id, emitted=emitted, executed=executed,
                           queue_depth=depth, queue_capacity=64,
                           latency_ms_sum=c.latency_sum_ms, latency_samples=c.latency_samples,
                           latency_buckets=c.buckets, errors=errors, late_records=0,
                           finished=False, throttled=False, cpu_seconds=0.0,
                           state_records=depth * 7)  # a join's buffered records: a gauge


latency = st.floats(min_value=0.001, max_value=2000.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(TASK_COMPONENT)),
                       st.tuples(st.lists(latency, max_size=40), st.integers(0, 10**9),
                                 st.integers(0, 10**9), st.integers(0, 64), st.integers(0, 5)),
                       min_size=1))
def test_every_level_equals_direct_computation(data):
    store = MetricsStore(TASK_COMPONENT, PLAN)
    for tid, (lat, em, ex, depth, err) in data.items():
        store.update(task_message(tid, lat, em, ex, depth, err))
    snap = store.snapshot()
    groups = {"components": lambda t: TASK_COMPONENT[t], "workers": lambda t: str(PLAN[t]),
              "topology": lambda t: None}
    for level, key_of in groups.items():
        members: dict[object, list[int]] = {}
        for tid in data:
            members.setdefault(key_of(tid), []).append(tid)
        for key, tids in members.items():
            agg = snap[level] if level == "topology" else snap[level][key]
            raw = [x for t in tids for x in data[t][0]]
            assert agg["emitted"] == sum(data[t][1] for t in tids)
            assert agg["executed"] == sum(data[t][2] for t in tids)
            assert agg["queue_depth"] == sum(data[t][3] for t in tids)
            assert agg["errors"] == sum(data[t][4] for t in tids)
            assert agg["state_records"] == sum(data[t][3] * 7 for t in tids)
            assert agg["max_queue_fill"] == round(max(data[t][3] / 64 for t in tids), 3)
            # merged histogram == histogram of all raw observations
            assert agg["latency_buckets"] == observe(raw).buckets
            assert sum(agg["latency_buckets"]) == len(raw)
            for q, name in ((0.5, "latency_ms_p50"), (0.99, "latency_ms_p99")):
                assert agg[name] == exact_percentile(raw, q), (q, raw)
            if raw:
                assert agg["latency_ms_mean"] == pytest.approx(sum(raw) / len(raw), abs=1e-3)


def test_averaging_percentiles_would_be_wrong():
    """Why merging buckets matters: a fast busy task and a slow idle task."""
    fast = [0.01] * 990
    slow = [400.0] * 10
    store = MetricsStore({1: "b", 2: "b"}, {1: 0, 2: 1})
    store.update(task_message(1, fast, 0, len(fast)))
    store.update(task_message(2, slow, 0, len(slow)))
    agg = store.snapshot()["components"]["b"]
    assert agg["latency_ms_p99"] == exact_percentile(fast + slow, 0.99) == 0.01
    per_task_p99 = [store.snapshot()["tasks"][t]["latency_ms_p99"] for t in ("1", "2")]
    assert sum(per_task_p99) / 2 == pytest.approx(250.005)  # what averaging would claim


def test_a_task_built_again_gets_no_rate_across_its_generations(monkeypatch):
    """A rollback builds every task again and its counters start over; the new task may
    pass its old counts before its first heartbeat reaches the TM. Its rate then comes
    from samples of its own generation only, and each task's generation is in the
    snapshot, so a reader of the counters (a benchmark's, a dashboard's) can tell the
    counters started over."""
    clock = iter([10.0, 11.0, 12.0, 13.0])
    monkeypatch.setattr("jstormpy.master.metrics.time.monotonic", lambda: next(clock))
    store = MetricsStore({1: "b"}, {1: 0})
    store.update(task_message(1, [], 500, 1_000), 1)
    store.update(task_message(1, [], 900, 1_800), 1)
    task = store.snapshot()["tasks"]["1"]
    assert (task["execute_rate"], task["emit_rate"], task["generation"]) == (800.0, 400.0, 1)
    store.update(task_message(1, [], 1_000, 2_000), 2)  # generation 2 passed the old count
    task = store.snapshot()["tasks"]["1"]
    assert (task["execute_rate"], task["emit_rate"], task["generation"]) == (0.0, 0.0, 2)
    store.update(task_message(1, [], 1_100, 2_300), 2)
    assert store.snapshot()["tasks"]["1"]["execute_rate"] == 300.0


def test_histogram_buckets_are_cumulative():
    buckets = [3, 0, 2] + [0] * (len(LATENCY_BUCKETS_MS) - 4) + [1]
    pairs = histogram_buckets(buckets)
    assert pairs[0] == ("0.01", 3.0)
    assert pairs[2] == ("0.1", 5.0)
    assert pairs[-1] == ("+Inf", 6.0)
    assert [b for b, _ in pairs][:-1] == [repr(float(b)) for b in LATENCY_BUCKETS_MS[:-1]]


# ----------------------------------------------------------------- against a real MasterCore
def make_core(tmp_path) -> MasterCore:
    descriptor = {"name": "agg", "components": [
        {"name": "spout", "kind": "spout", "tasks": [1, 2], "inputs": []},
        {"name": "split", "kind": "bolt", "tasks": [3, 4, 5], "inputs": [{"source": "spout"}]},
        {"name": "count", "kind": "bolt", "tasks": [6], "inputs": [{"source": "split"}]}]}
    backend = open_backend(f"file://{tmp_path / 'ckpt'}")
    core = MasterCore("agg", Config(workers=2), descriptor, backend)
    for wid in (0, 1):
        core.sessions[wid] = WorkerSession(wid, 1000 + wid, "127.0.0.1", 0, "v7")
    return core


def feed(core: MasterCore, rng: random.Random) -> dict[int, list[float]]:
    raw: dict[int, list[float]] = {}
    for wid in (0, 1):
        tasks = []
        for tid in [t for t, w in core.plan.items() if w == wid]:
            lat = [rng.choice([0.005, 0.03, 0.2, 3.0, 70.0]) for _ in range(rng.randint(0, 50))]
            raw[tid] = lat
            c = observe(lat)
            tasks.append(pb.TaskMetrics(task_id=tid, emitted=tid * 100, executed=len(lat),
                                        queue_depth=tid, queue_capacity=64,
                                        latency_ms_sum=c.latency_sum_ms,
                                        latency_samples=c.latency_samples,
                                        latency_buckets=c.buckets, errors=tid % 2,
                                        cpu_seconds=tid * 1.5))
        core.on_heartbeat(core.sessions[wid], pb.Heartbeat(
            worker_id=wid, generation=core.generation, tasks=tasks, rss_bytes=50_000_000 + wid,
            cpu_percent=12.5))
    return raw


def scrape(core: MasterCore) -> dict[str, object]:
    text = generate_latest(registry_for(core)).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_prometheus_output_matches_direct_computation(tmp_path):
    core = make_core(tmp_path)
    raw = feed(core, random.Random(4))
    fams = scrape(core)
    for name in ("jstorm_task_emitted", "jstorm_task_executed", "jstorm_component_executed",
                 "jstorm_worker_executed", "jstorm_task_queue_fill", "jstorm_worker_rss_bytes",
                 "jstorm_generation", "jstorm_restarts", "jstorm_component_execute_latency_ms",
                 "jstorm_task_execute_latency_ms", "jstorm_checkpoint_duration_ms",
                 "jstorm_last_checkpoint_duration_ms", "jstorm_worker_up"):
        assert name in fams, name
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in fams.values() for s in f.samples}

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted({"topology": "agg", **labels}.items())))]

    comp_of = core.task_component
    for comp in ("spout", "split", "count"):
        tids = [t for t in raw if comp_of[t] == comp]
        assert value("jstorm_component_executed_total", component=comp) == sum(
            len(raw[t]) for t in tids)
        assert value("jstorm_component_emitted_total", component=comp) == sum(
            t * 100 for t in tids)
        merged = observe([x for t in tids for x in raw[t]])
        cum = 0
        for bound, count in zip(LATENCY_BUCKETS_MS, merged.buckets, strict=True):
            cum += count
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            assert value("jstorm_component_execute_latency_ms_bucket", component=comp,
                         le=le) == cum
        assert value("jstorm_component_execute_latency_ms_count", component=comp) == cum
        assert value("jstorm_component_execute_latency_ms_sum", component=comp) == \
            pytest.approx(merged.latency_sum_ms)
    for tid in raw:
        labels = {"component": comp_of[tid], "task": str(tid), "worker": str(core.plan[tid])}
        assert value("jstorm_task_executed_total", **labels) == len(raw[tid])
        assert value("jstorm_task_queue_fill", **labels) == pytest.approx(tid / 64)
        assert value("jstorm_task_cpu_seconds_total", **labels) == tid * 1.5
    for comp in ("spout", "split", "count"):
        assert value("jstorm_component_cpu_seconds_total", component=comp) == \
            pytest.approx(sum(t * 1.5 for t in raw if comp_of[t] == comp))
    assert value("jstorm_worker_rss_bytes", worker="1") == 50_000_001
    assert value("jstorm_worker_up", worker="0") == 1.0
    topo_exec = sum(len(v) for v in raw.values())
    assert sum(value("jstorm_worker_executed_total", worker=str(w)) for w in (0, 1)) == topo_exec


def test_history_samples_and_worker_events(tmp_path):
    core = make_core(tmp_path)
    now = [1000.0]
    hist = MetricsHistory(core, interval_s=10, window_s=60, clock=lambda: now[0])
    assert hist.points.maxlen == 6
    feed(core, random.Random(1))
    hist.watch()
    for _ in range(8):
        now[0] += 10
        hist.sample()
    data = hist.to_dict()
    assert len(data["points"]) == 6  # bounded: the window only
    assert data["points"][-1]["components"]["split"]["executed"] == \
        core.metrics.snapshot()["components"]["split"]["executed"]
    assert hist.to_dict(since=now[0] - 5)["points"] == data["points"][-1:]
    # a worker dies, then comes back with a new pid
    core.sessions[1].alive = False
    assert [e["kind"] for e in hist.watch()] == ["worker_failed"]
    core.sessions[1] = WorkerSession(1, 4242, "127.0.0.1", 0, "v7")
    events = hist.watch()
    assert [(e["kind"], e["pid"]) for e in events] == [("worker_recovered", 4242)]
    # a kill and a respawn between two looks is still seen
    core.sessions[0] = WorkerSession(0, 5555, "127.0.0.1", 0, "v7")
    assert [e["kind"] for e in hist.watch()] == ["worker_failed", "worker_recovered"]


def test_live_config_validation(tmp_path):
    from jstormpy.api.errors import JStormError
    from jstormpy.master import ops

    core = make_core(tmp_path)
    assert ops.set_config(core, "checkpoint_interval_ms", "250") == (250, "master")
    assert core.config.checkpoint_interval_ms == 250
    assert ops.set_config(core, "backpressure_high_watermark", "0.9") == (0.9, "master")
    assert ops.set_config(core, "batch_linger_ms", "1") == (1.0, "workers")
    sent = [core.sessions[0].outq.get_nowait() for _ in range(core.sessions[0].outq.qsize())]
    assert any(m.WhichOneof("body") == "set_config" and m.set_config.key == "batch_linger_ms"
               for m in sent)
    with pytest.raises(JStormError, match="cannot be changed while the topology runs"):
        ops.set_config(core, "workers", "3")
    with pytest.raises(JStormError, match="backpressure_low_watermark"):
        ops.set_config(core, "backpressure_low_watermark", "0.95")
    with pytest.raises(JStormError, match="must be an int"):
        ops.set_config(core, "checkpoint_interval_ms", "fast")
    assert core.config.checkpoint_interval_ms == 250  # unchanged by refused values
    with pytest.raises(JStormError, match="no component"):
        ops.set_log_level(core, "nope", "DEBUG")
    with pytest.raises(JStormError, match="not one of"):
        ops.set_log_level(core, "split", "LOUD")
    assert ops.set_log_level(core, "split", "debug") == 2


def test_http_server_in_process(tmp_path):
    import socket
    import urllib.error
    import urllib.request

    from jstormpy.master.http import start_ops_server

    core = make_core(tmp_path)
    feed(core, random.Random(2))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        server = start_ops_server(core, "127.0.0.1", taken, tmp_path)  # falls back
        try:
            port = int((tmp_path / "ui.port").read_text())
            assert port == server.server_address[1] != taken
            base = f"http://127.0.0.1:{port}"

            def get(path):
                with urllib.request.urlopen(base + path, timeout=5) as resp:
                    return resp.status, resp.headers["Content-Type"], resp.read()

            status, ctype, body = get("/api/status")
            assert ctype == "application/json" and b'"name": "agg"' in body
            _, ctype, body = get("/metrics")
            assert ctype.startswith("text/plain") and b"jstorm_task_executed_total" in body
            _, ctype, body = get("/")
            assert ctype.startswith("text/html") and b'src="app.js"' in body
            _, _, body = get("/api/metrics?component=split")
            assert b'"split"' in body and b'"count"' not in body.split(b'"workers"')[0]
            _, _, body = get("/api/history")
            assert b'"interval_s": 10.0' in body
            try:
                get("/nope")
            except urllib.error.HTTPError as exc:
                assert exc.code == 404
            else:
                raise AssertionError("404 expected")
        finally:
            server.stop()


def test_cpu_busy_is_cpu_seconds_per_second_between_heartbeats(monkeypatch):
    """A task's ``cpu_busy`` is the CPU time its thread used per second of wall time
    since its previous heartbeat; a component's is the sum (cores kept busy)."""
    clock = iter([100.0, 102.0, 102.0, 104.0])
    real_monotonic, me = time.monotonic, threading.get_ident()

    def monotonic() -> float:
        # the patch reaches the time module itself, so every thread in the process: only
        # this test's thread reads the scripted clock
        return next(clock) if threading.get_ident() == me else real_monotonic()
    monkeypatch.setattr("jstormpy.master.metrics.time.monotonic", monotonic)
    store = MetricsStore({1: "count", 2: "count"}, {1: 0, 2: 1})
    for tid, cpu in ((1, 10.0), (2, 3.0)):
        store.update(pb.TaskMetrics(task_id=tid, cpu_seconds=cpu))
    store.update(pb.TaskMetrics(task_id=1, cpu_seconds=11.5))  # 1.5 s of CPU in 2 s
    store.update(pb.TaskMetrics(task_id=2, cpu_seconds=3.5))   # 0.5 s in 2 s
    snap = store.snapshot()
    assert snap["tasks"]["1"]["cpu_busy"] == 0.75
    assert snap["tasks"]["2"]["cpu_busy"] == 0.25
    assert snap["components"]["count"]["cpu_busy"] == 1.0
    assert snap["components"]["count"]["cpu_seconds"] == 15.0
    assert snap["workers"]["0"]["cpu_seconds"] == 11.5


def test_jstorm_metrics_shows_the_buffered_state_records():
    from jstormpy.cli_ops import format_metrics

    store = MetricsStore({1: "join", 2: "join"}, {1: 0, 2: 1})
    store.update(task_message(1, [1.0], 5, 5, depth=3))   # 21 buffered records
    store.update(task_message(2, [1.0], 5, 5, depth=1))   # 7
    text = format_metrics(store.snapshot())
    head, row = text.splitlines()[0].split(), text.splitlines()[2].split()
    assert head[-1] == "buffered" and row[0] == "join" and row[-1] == "28"


def test_a_tasks_rocksdb_figures_reach_the_api_and_prometheus(tmp_path):
    """A task with RocksDB state sends its database's figures with its metrics: the JSON
    API shows them per task, Prometheus as ``jstorm_task_rocksdb_<figure>`` (a gauge, or
    a counter for a ``*_total`` figure); a task without them gets no such series."""
    core = make_core(tmp_path)
    core.on_heartbeat(core.sessions[1], pb.Heartbeat(
        worker_id=1, generation=core.generation, tasks=[
            pb.TaskMetrics(task_id=6, executed=10,
                           store={"l0_files": 7.0, "pending_compaction_bytes": 3e6,
                                  "gets_total": 1234.0, "bloom_useful_total": 5678.0}),
            pb.TaskMetrics(task_id=4, executed=3)]))
    tasks = core.metrics.snapshot()["tasks"]
    assert tasks["6"]["store"]["l0_files"] == 7.0 and tasks["6"]["store"]["gets_total"] == 1234
    assert tasks["4"]["store"] == {}
    fams = scrape(core)
    assert fams["jstorm_task_rocksdb_l0_files"].type == "gauge"
    assert fams["jstorm_task_rocksdb_gets"].type == "counter"
    samples = {(s.name, s.labels["task"]): s.value
               for f in fams.values() for s in f.samples if "rocksdb" in s.name}
    assert samples == {("jstorm_task_rocksdb_l0_files", "6"): 7.0,
                       ("jstorm_task_rocksdb_pending_compaction_bytes", "6"): 3e6,
                       ("jstorm_task_rocksdb_gets_total", "6"): 1234.0,
                       ("jstorm_task_rocksdb_bloom_useful_total", "6"): 5678.0}
