"""Operations against a running topology (real TM and worker processes): Prometheus
scrape, JSON API, `jstorm ui|metrics|loglevel|config`, per-task log files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from opstopo import get_json, get_text, keyed, ui_base, wait_for
from prometheus_client.parser import text_string_to_metric_families

from jstormpy import Config, LocalCluster


def jstorm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "jstormpy.cli.main", *args], capture_output=True,
                          text=True, timeout=60, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def running(tmp_path, monkeypatch):
    monkeypatch.setenv("JSTORM_HISTORY_INTERVAL_S", "0.5")
    with LocalCluster() as cluster:
        handle = cluster.submit(keyed(tmp_path / "out"),
                                Config(workers=2, checkpoint_interval_ms=400))
        base = ui_base(handle)
        wait_for(lambda: get_json(f"{base}/api/status")["last_completed_checkpoint"], 60,
                 "a completed checkpoint")
        yield handle, base


def test_prometheus_scrape_and_json_api(running):
    handle, base = running

    def families():
        fams = {f.name: f for f in text_string_to_metric_families(get_text(f"{base}/metrics"))}
        reported = {s.labels["task"] for s in fams["jstorm_task_executed"].samples}
        ok = all(s.value > 0 for s in fams["jstorm_component_executed"].samples
                 if s.labels["component"] != "events")
        return fams if ok and len(reported) == 5 else None

    fams = wait_for(families, 30, "every task to report and every bolt to execute")
    expected = {
        "jstorm_task_emitted": "counter", "jstorm_task_executed": "counter",
        "jstorm_component_executed": "counter", "jstorm_worker_executed": "counter",
        "jstorm_task_queue_fill": "gauge", "jstorm_component_max_queue_fill": "gauge",
        "jstorm_component_execute_latency_ms": "histogram",
        "jstorm_task_execute_latency_ms": "histogram",
        "jstorm_checkpoint_duration_ms": "histogram",
        "jstorm_last_checkpoint_size_bytes": "gauge", "jstorm_generation": "gauge",
        "jstorm_restarts": "counter", "jstorm_worker_rss_bytes": "gauge",
        "jstorm_worker_up": "gauge", "jstorm_topology_state": "gauge"}
    for name, kind in expected.items():
        assert fams[name].type == kind, name
    tasks = {s.labels["task"] for s in fams["jstorm_task_executed"].samples}
    assert tasks == {str(t) for t in range(1, 6)}
    rss = [s.value for s in fams["jstorm_worker_rss_bytes"].samples]
    assert len(rss) == 2 and all(v > 10_000_000 for v in rss)
    state = {s.labels["state"]: s.value for s in fams["jstorm_topology_state"].samples}
    assert state["running"] == 1.0
    buckets = [s for s in fams["jstorm_component_execute_latency_ms"].samples
               if s.name.endswith("_bucket") and s.labels["component"] == "tally"]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value > 0
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)  # cumulative
    # checkpoint durations: a real cumulative histogram with _count and _sum that only grow
    def durations():
        fam = {f.name: f for f in text_string_to_metric_families(get_text(f"{base}/metrics"))}
        by = {}
        for smp in fam["jstorm_checkpoint_duration_ms"].samples:
            by.setdefault(smp.name, []).append(smp)
        return by

    first = durations()
    assert set(first) == {"jstorm_checkpoint_duration_ms_bucket",
                          "jstorm_checkpoint_duration_ms_count",
                          "jstorm_checkpoint_duration_ms_sum"}, set(first)
    count = first["jstorm_checkpoint_duration_ms_count"][0].value
    assert count >= 1 and first["jstorm_checkpoint_duration_ms_sum"][0].value > 0
    assert first["jstorm_checkpoint_duration_ms_bucket"][-1].value == count  # +Inf == count
    done = handle.last_completed_checkpoint() or 0
    wait_for(lambda: (handle.last_completed_checkpoint() or 0) > done, 30, "one more checkpoint")
    later = durations()
    assert later["jstorm_checkpoint_duration_ms_count"][0].value > count
    assert all(b.value >= a.value for a, b in zip(first["jstorm_checkpoint_duration_ms_bucket"],
                                                  later["jstorm_checkpoint_duration_ms_bucket"],
                                                  strict=True))
    # JSON API and history
    m = get_json(f"{base}/api/metrics")
    assert set(m["components"]) == {"events", "tally", "sink"}
    st = get_json(f"{base}/api/status")
    assert [c["name"] for c in st["components"]] == ["events", "tally", "sink"]
    assert st["checkpoints"] and st["config"]["checkpoint_interval_ms"] == 400
    def history_with_metrics():
        h = get_json(f"{base}/api/history")
        return h if "tally" in h["points"][-1]["components"] else None

    hist = wait_for(history_with_metrics, 20, "history points with metrics")
    assert hist["interval_s"] == 0.5 and len(hist["points"]) >= 2
    assert hist["points"][-1]["state"] == "running"
    assert "<svg" in get_text(f"{base}/") and "function" in get_text(f"{base}/app.js")


def test_fresh_start_is_not_a_recovery(running):
    handle, base = running
    st = get_json(f"{base}/api/status")
    assert st["state"] == "running" and st["recoveries"] == [], st["recoveries"]
    messages = [e["message"] for e in st["events"]]
    assert not any("recovering" in m for m in messages), messages
    assert "recovery" not in jstorm("status", handle.name).stdout


def test_cli_ui_metrics_loglevel_config(running):
    handle, base = running
    name = handle.name
    assert jstorm("ui", name).stdout.splitlines()[0] == f"{base}/"
    out = jstorm("metrics", name, "--tasks").stdout
    assert "component" in out and "tally" in out and "worker 0" in out and "(topology)" in out
    header = out.splitlines()[0]
    assert header.split()[:3] == ["component", "emitted", "executed"]
    # /api/metrics and the gRPC Metrics call (`jstorm metrics --json`) are one builder
    grpc_m = json.loads(jstorm("metrics", name, "--json").stdout)
    http_m = get_json(f"{base}/api/metrics")
    assert set(grpc_m) == set(http_m) and {"upgrade", "workers_process"} <= set(grpc_m)
    for m in (grpc_m, http_m):
        assert all(w["pid"] for w in m["workers_process"].values()), m["workers_process"]

    # log level: the tally tasks log DEBUG lines only after `jstorm loglevel ... DEBUG`
    task_logs = [handle.run_dir / "logs" / "tasks" / f"tally-{t}.log" for t in (3, 4)]
    wait_for(lambda: all(p.exists() for p in task_logs), 30, "per-task log files")
    records = [json.loads(line) for line in task_logs[0].read_text().splitlines()]
    assert records and {"time", "level", "task", "component", "generation", "message"} <= \
        set(records[0])
    assert records[0]["component"] == "tally" and records[0]["task"] == 3
    assert not any(r["level"] == "DEBUG" for p in task_logs for r in map(
        json.loads, p.read_text().splitlines()))
    out = jstorm("loglevel", name, "tally", "debug").stdout
    assert "DEBUG on 2 worker(s)" in out

    def debug_lines():
        return [r for p in task_logs for r in map(json.loads, p.read_text().splitlines())
                if r["level"] == "DEBUG" and "reached" in r["message"]]

    wait_for(debug_lines, 30, "DEBUG lines in the tally task logs")
    # the live change shows in the UI's "Live settings" and as an event
    st = get_json(f"{base}/api/status")
    assert st["config"]["log_level[tally]"] == "DEBUG", st["config"]
    wait_for(lambda: any(e["message"] == "log level of tally set to DEBUG"
                         for e in get_json(f"{base}/api/status")["events"]), 10,
             "a log-level event")
    # the same levels as Config.log_level: CRITICAL is refused by both
    bad = jstorm("loglevel", name, "tally", "CRITICAL", check=False)
    assert bad.returncode == 2 and "invalid choice: 'CRITICAL'" in bad.stderr
    jstorm("loglevel", name, "tally", "INFO")

    # config: TM-side setting shows in the status at once and checkpoints keep completing
    out = jstorm("config", name, "checkpoint_interval_ms", "250").stdout
    assert "checkpoint_interval_ms = 250" in out and "Topology Master" in out
    assert get_json(f"{base}/api/status")["config"]["checkpoint_interval_ms"] == 250
    before = handle.last_completed_checkpoint() or 0
    wait_for(lambda: (handle.last_completed_checkpoint() or 0) >= before + 3, 30,
             "checkpoints at the new interval")
    # worker-side setting reaches every worker
    out = jstorm("config", name, "batch_linger_ms", "1").stdout
    assert "every worker" in out
    worker_logs = [handle.run_dir / "logs" / f"worker-{w}.log" for w in (0, 1)]
    wait_for(lambda: all("config batch_linger_ms set to 1.0" in p.read_text()
                         for p in worker_logs), 30, "workers applying batch_linger_ms")
    # unsafe or invalid values are refused with a reason
    bad = jstorm("config", name, "backpressure_low_watermark", "0.99", check=False)
    assert bad.returncode == 2 and "below backpressure_high_watermark" in bad.stderr
    bad = jstorm("config", name, "workers", "5", check=False)
    assert bad.returncode != 0 and "invalid choice" in bad.stderr
    bad = jstorm("loglevel", name, "nosuch", "DEBUG", check=False)
    assert bad.returncode == 2 and "no component 'nosuch'" in bad.stderr
