"""Prometheus exposition of a Topology Master (served at ``/metrics`` by ``master/http.py``).

A custom collector reads :class:`~jstormpy.master.core.MasterCore` at scrape time: no
metric objects are updated on the hot path. Counters exist per task, component and
worker; latency histograms are built from the *merged* buckets of each component's tasks
(bucket-wise sums; Prometheus computes quantiles from them with ``histogram_quantile``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from jstormpy.master.topology_state import TopologyState
from jstormpy.metrics import LATENCY_BUCKETS_MS, PAUSE_MS

PREFIX = "jstorm"


LEVEL_SERIES: tuple[tuple[str, type[CounterMetricFamily] | type[GaugeMetricFamily], str], ...] = (
    ("emitted", CounterMetricFamily, "Tuples emitted per {level}"),
    ("executed", CounterMetricFamily, "Tuples executed per {level}"),
    ("errors", CounterMetricFamily, "Exceptions per {level}"),
    ("execute_rate", GaugeMetricFamily, "Tuples executed per second per {level}"),
    ("emit_rate", GaugeMetricFamily, "Tuples emitted per second per {level}"),
    ("cpu_seconds", CounterMetricFamily, "CPU time of the task threads per {level} (s)"),
    ("cpu_busy", GaugeMetricFamily, "Cores kept busy by the task threads per {level}"),
    ("max_queue_fill", GaugeMetricFamily, "Highest input queue fill of a task per {level}"),
    ("state_records", GaugeMetricFamily,
     "Records buffered in state (a dataflow join's sides) per {level}"),
)
"""Per component and per worker: (aggregate key = series suffix, family, help)."""


def histogram_buckets(buckets: list[int]) -> list[tuple[str, float]]:
    """Per-bucket counts → Prometheus cumulative ``(le, count)`` pairs (ending in +Inf)."""
    out: list[tuple[str, float]] = []
    acc = 0
    for bound, count in zip(LATENCY_BUCKETS_MS, buckets, strict=False):
        acc += count
        out.append(("+Inf" if math.isinf(bound) else repr(float(bound)), float(acc)))
    if not out or out[-1][0] != "+Inf":
        out.append(("+Inf", float(acc)))
    return out


def store_families(topology: str, tasks: dict[int, Any]) -> list[Any]:
    """``jstorm_task_rocksdb_<figure>`` per task with a RocksDB state store: its figures
    (``RocksDBStore.figures``; a figure named ``*_total`` is a counter, the others
    gauges; docs/operations.md, "RocksDB state")."""
    tl = ["topology", "component", "task", "worker"]
    out: dict[str, Any] = {}
    for tid, t in sorted(tasks.items()):
        labels = [topology, str(t["component"]), str(tid), str(t["worker"])]
        for figure, value in sorted((t.get("store") or {}).items()):
            fam = out.get(figure)
            if fam is None:
                help_ = f"RocksDB figure {figure} of the task's state store"
                fam = out[figure] = (
                    CounterMetricFamily(f"{PREFIX}_task_rocksdb_{figure[:-6]}", help_,
                                        labels=tl) if figure.endswith("_total")
                    else GaugeMetricFamily(f"{PREFIX}_task_rocksdb_{figure}", help_,
                                           labels=tl))
            fam.add_metric(labels, float(value))
    return list(out.values())

class MasterCollector(Collector):
    """Yields the metric families of one topology."""

    def __init__(self, core: Any) -> None:
        self.core = core

    def collect(self) -> Iterator[Metric]:  # noqa: PLR0914 - one family after another
        core = self.core
        with core.lock:
            snap = core.metrics.snapshot()
            tasks = {int(t): dict(v) for t, v in snap["tasks"].items()}
            lat_sums = {s.task_id: s.latency_sum_ms for s in core.metrics.tasks.values()}
            sessions = [(s.worker_id, s.alive, s.pid, s.rss_bytes, s.cpu_percent, s.started_at)
                        for s in core.sessions.values()]
            name, generation, restarts, state = core.name, core.generation, core.restarts, \
                core.state
            history = list(core.checkpoints.history)
            last = dict(core.checkpoints.last_completed or {})
            recoveries = len(core.recoveries)
            durations = core.checkpoints.durations.cumulative()
            durations_sum = core.checkpoints.durations.sum
            errors = len(core.errors)
            interval = core.config.checkpoint_interval_ms
        topo = [name]

        # -- per task ---------------------------------------------------------------------
        tl = ["topology", "component", "task", "worker"]
        fams: dict[str, Any] = {
            "emitted": CounterMetricFamily(f"{PREFIX}_task_emitted", "Tuples emitted", labels=tl),
            "executed": CounterMetricFamily(f"{PREFIX}_task_executed", "Tuples executed",
                                            labels=tl),
            "errors": CounterMetricFamily(f"{PREFIX}_task_errors", "User-code exceptions",
                                          labels=tl),
            "late_records": CounterMetricFamily(f"{PREFIX}_task_late_records",
                                                "Records later than allowed lateness", labels=tl),
            "cpu_seconds": CounterMetricFamily(f"{PREFIX}_task_cpu_seconds",
                                               "CPU time of the task's thread (s)", labels=tl),
        }
        busy = GaugeMetricFamily(f"{PREFIX}_task_cpu_busy",
                                 "CPU seconds per second of the task's thread (0..1)", labels=tl)
        fill = GaugeMetricFamily(f"{PREFIX}_task_queue_fill",
                                 "Input queue fill (depth / capacity, 0..1)", labels=tl)
        depth = GaugeMetricFamily(f"{PREFIX}_task_queue_depth", "Batches in the input queue",
                                  labels=tl)
        buffered = GaugeMetricFamily(f"{PREFIX}_task_state_records",
                                     "Records the task buffers in state (a dataflow join's "
                                     "left and right entries)", labels=tl)
        throttled = GaugeMetricFamily(f"{PREFIX}_task_throttled",
                                      "1 while a spout task is throttled by backpressure",
                                      labels=tl)
        lat_task = HistogramMetricFamily(f"{PREFIX}_task_execute_latency_ms",
                                         "Per-tuple execute latency (ms)", labels=tl)
        for tid, t in sorted(tasks.items()):
            labels = [name, str(t["component"]), str(tid), str(t["worker"])]
            for key, fam in fams.items():
                fam.add_metric(labels, float(t[key]))
            cap = t["queue_capacity"]
            fill.add_metric(labels, t["queue_depth"] / cap if cap else 0.0)
            depth.add_metric(labels, float(t["queue_depth"]))
            throttled.add_metric(labels, 1.0 if t["throttled"] else 0.0)
            buffered.add_metric(labels, float(t["state_records"]))
            busy.add_metric(labels, float(t["cpu_busy"]))
            lat_task.add_metric(labels, histogram_buckets(t["latency_buckets"]),
                                lat_sums.get(tid, 0.0))
        yield from fams.values()
        yield from (fill, depth, throttled, buffered, busy, lat_task)
        yield from store_families(name, tasks)

        # -- per component and per worker (sums; histograms merged bucket-wise) -----------
        for level, key in (("component", "components"), ("worker", "workers")):
            labels_l = ["topology", level]
            fams_l = {k: family(f"{PREFIX}_{level}_{k}", help_.format(level=level),
                                labels=labels_l) for k, family, help_ in LEVEL_SERIES}
            lat = HistogramMetricFamily(f"{PREFIX}_{level}_execute_latency_ms",
                                        f"Per-tuple execute latency (ms) merged per {level}",
                                        labels=labels_l)
            for lv, agg in snap[key].items():
                ls = [name, str(lv)]
                for k, fam in fams_l.items():
                    fam.add_metric(ls, float(agg[k]))
                members = [tid for tid, t in tasks.items() if str(t[level]) == str(lv)]
                lat.add_metric(ls, histogram_buckets(agg["latency_buckets"]),
                               sum(lat_sums.get(tid, 0.0) for tid in members))
            yield from fams_l.values()
            yield lat

        # -- workers (processes) -----------------------------------------------------------
        wl = ["topology", "worker"]
        up = GaugeMetricFamily(f"{PREFIX}_worker_up", "1 if the worker is connected", labels=wl)
        rss = GaugeMetricFamily(f"{PREFIX}_worker_rss_bytes", "Worker resident memory",
                                labels=wl)
        cpu = GaugeMetricFamily(f"{PREFIX}_worker_cpu_percent", "Worker CPU use", labels=wl)
        uptime = GaugeMetricFamily(f"{PREFIX}_worker_uptime_seconds",
                                   "Seconds since the worker process registered", labels=wl)
        pid = GaugeMetricFamily(f"{PREFIX}_worker_pid", "Worker process id", labels=wl)
        now = time.time()
        for wid, alive, wpid, wrss, wcpu, started in sorted(sessions):
            ls = [name, str(wid)]
            up.add_metric(ls, 1.0 if alive else 0.0)
            rss.add_metric(ls, float(wrss))
            cpu.add_metric(ls, float(wcpu))
            uptime.add_metric(ls, max(now - started, 0.0))
            pid.add_metric(ls, float(wpid))
        yield from (up, rss, cpu, uptime, pid)

        # -- topology ----------------------------------------------------------------------
        g = GaugeMetricFamily(f"{PREFIX}_generation", "Current generation (bumps on recovery)",
                              labels=["topology"])
        g.add_metric(topo, float(generation))
        yield g
        r = CounterMetricFamily(f"{PREFIX}_restarts", "Recoveries counted against max_restarts",
                                labels=["topology"])
        r.add_metric(topo, float(restarts))
        yield r
        rec = GaugeMetricFamily(f"{PREFIX}_recoveries_recent", "Recoveries in the kept log",
                                labels=["topology"])
        rec.add_metric(topo, float(recoveries))
        yield rec
        err = GaugeMetricFamily(f"{PREFIX}_errors_recent", "Errors in the kept log",
                                labels=["topology"])
        err.add_metric(topo, float(errors))
        yield err
        st = GaugeMetricFamily(f"{PREFIX}_topology_state", "1 for the current state",
                               labels=["topology", "state"])
        for s in TopologyState:
            st.add_metric([name, s], 1.0 if s == state else 0.0)
        yield st
        ci = GaugeMetricFamily(f"{PREFIX}_checkpoint_interval_ms",
                               "Configured checkpoint interval", labels=["topology"])
        ci.add_metric(topo, float(interval))
        yield ci

        # -- checkpoints -------------------------------------------------------------------
        for key, help_ in (("id", "Id of the last completed checkpoint"),
                           ("duration_ms", "Duration of the last completed checkpoint (ms)"),
                           ("size_bytes", "Snapshot bytes of the last completed checkpoint"),
                           ("alignment_ms", "Longest barrier alignment of the last completed "
                                            "checkpoint (ms)"),
                           (PAUSE_MS, "Longest task-thread pause of the last completed "
                                      "checkpoint (ms)")):
            fam = GaugeMetricFamily(f"{PREFIX}_last_checkpoint_{key}", help_, labels=["topology"])
            if last:
                fam.add_metric(topo, float(last.get(key) or 0))
            yield fam
        by_status: dict[str, int] = {}
        for entry in history:
            by_status[entry["status"]] = by_status.get(entry["status"], 0) + 1
        hs = GaugeMetricFamily(f"{PREFIX}_checkpoints_recent",
                               "Checkpoints in the kept history by status",
                               labels=["topology", "status"])
        for status_ in ("completed", "failed", "timed_out"):
            hs.add_metric([name, status_], float(by_status.get(status_, 0)))
        yield hs
        # a real cumulative histogram (_bucket/_count/_sum): it counts every completed
        # checkpoint since the TM started, so rate() never sees a reset
        dh = HistogramMetricFamily(f"{PREFIX}_checkpoint_duration_ms",
                                   "Durations of the completed checkpoints since the Topology "
                                   "Master started", labels=["topology"])
        dh.add_metric(topo, [("+Inf" if math.isinf(b) else repr(b), float(n))
                             for b, n in durations], durations_sum)
        yield dh


def registry_for(core: Any) -> CollectorRegistry:
    """A registry (not the process-global one) exposing ``core``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MasterCollector(core))
    return registry
