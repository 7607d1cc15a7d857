"""Metrics aggregation: task → component → worker → topology.

Counters are summed; latency histograms are merged bucket by bucket and percentiles
computed from the merged buckets (never by averaging percentiles). Rates come from
the difference between the last two heartbeats of each task.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jstormpy.metrics import LATENCY_BUCKETS_MS, percentile_from_buckets


@dataclass
class TaskSample:
    """The latest metrics of one task and the rates derived from the previous ones."""

    task_id: int
    emitted: int = 0
    executed: int = 0
    queue_depth: int = 0
    queue_capacity: int = 0
    latency_sum_ms: float = 0.0
    latency_samples: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS_MS))
    errors: int = 0
    late_records: int = 0
    finished: bool = False
    throttled: bool = False
    at: float = 0.0
    emit_rate: float = 0.0
    execute_rate: float = 0.0
    cpu_seconds: float = 0.0
    cpu_busy: float = 0.0
    """CPU seconds per second of the task's thread since the previous heartbeat (0..1:
    how busy the task keeps a core; Flink's busy time, Storm's capacity)."""
    state_records: int = 0
    """Records the task holds buffered in state now (a dataflow join's left and right
    entries; bounded by the watermark)."""
    generation: int = 0
    """The generation whose task reported it: a rollback or a restart builds every task
    again, and its counters start over (the heartbeats of older generations are dropped)."""
    store: dict[str, float] = field(default_factory=dict)
    """The task's RocksDB figures (``jstormpy.state_store.RocksDBStore.figures``; empty:
    no RocksDB state)."""


def aggregate(samples: Iterable[TaskSample]) -> dict[str, Any]:
    """Sum counters and merge histograms of several tasks."""
    emitted = executed = depth = capacity = errors = late = state = 0
    lat_sum = 0.0
    lat_n = 0
    buckets = [0] * len(LATENCY_BUCKETS_MS)
    emit_rate = execute_rate = cpu = busy = 0.0
    fill = 0.0
    for s in samples:
        emitted += s.emitted
        executed += s.executed
        depth += s.queue_depth
        capacity += s.queue_capacity
        errors += s.errors
        late += s.late_records
        state += s.state_records
        lat_sum += s.latency_sum_ms
        lat_n += s.latency_samples
        buckets = [a + b for a, b in zip(buckets, s.buckets, strict=False)]
        emit_rate += s.emit_rate
        execute_rate += s.execute_rate
        cpu += s.cpu_seconds
        busy += s.cpu_busy
        if s.queue_capacity:
            fill = max(fill, s.queue_depth / s.queue_capacity)
    return {
        "emitted": emitted, "executed": executed, "queue_depth": depth,
        "queue_capacity": capacity, "max_queue_fill": round(fill, 3), "errors": errors,
        "late_records": late, "state_records": state, "emit_rate": round(emit_rate, 1),
        "execute_rate": round(execute_rate, 1),
        "cpu_seconds": round(cpu, 3), "cpu_busy": round(busy, 3),
        "latency_ms_mean": round(lat_sum / lat_n, 4) if lat_n else None,
        "latency_ms_p50": percentile_from_buckets(buckets, 0.5),
        "latency_ms_p99": percentile_from_buckets(buckets, 0.99),
        "latency_buckets": buckets,
    }


class MetricsStore:
    """Latest per-task samples plus aggregation by level."""

    def __init__(self, task_component: Mapping[int, str], plan: Mapping[int, int]) -> None:
        self.task_component = dict(task_component)
        self.plan = dict(plan)
        self.tasks: dict[int, TaskSample] = {}

    def update(self, tm: Any, generation: int = 0) -> None:
        """Fold one TaskMetrics message in (``generation``: the heartbeat's). Rates come
        from two samples of one generation only: a task built again starts its counters
        over, and may pass its old counts before its first heartbeat."""
        now = time.monotonic()
        old = self.tasks.get(tm.task_id)
        s = TaskSample(tm.task_id, tm.emitted, tm.executed, tm.queue_depth, tm.queue_capacity,
                       tm.latency_ms_sum, tm.latency_samples,
                       list(tm.latency_buckets) or [0] * len(LATENCY_BUCKETS_MS),
                       tm.errors, tm.late_records, tm.finished, tm.throttled, now,
                       cpu_seconds=tm.cpu_seconds, state_records=tm.state_records,
                       generation=generation, store=dict(getattr(tm, "store", None) or {}))
        if old is not None and old.generation == generation and now > old.at \
                and s.emitted >= old.emitted and s.executed >= old.executed:
            dt = now - old.at
            s.emit_rate = (s.emitted - old.emitted) / dt
            s.execute_rate = (s.executed - old.executed) / dt
            if s.cpu_seconds >= old.cpu_seconds:  # (a thread's CPU only grows: a guard)
                s.cpu_busy = min(1.0, (s.cpu_seconds - old.cpu_seconds) / dt)
        self.tasks[tm.task_id] = s

    def snapshot(self, component: str = "") -> dict[str, Any]:
        """Metrics at every level (optionally only one component's tasks)."""
        tasks = [s for s in self.tasks.values()
                 if not component or self.task_component.get(s.task_id) == component]
        by_component: dict[str, list[TaskSample]] = {}
        by_worker: dict[int, list[TaskSample]] = {}
        for s in tasks:
            by_component.setdefault(self.task_component.get(s.task_id, "?"), []).append(s)
            by_worker.setdefault(self.plan.get(s.task_id, -1), []).append(s)
        return {
            "tasks": {str(s.task_id): {"component": self.task_component.get(s.task_id),
                                       "worker": self.plan.get(s.task_id),
                                       "generation": s.generation,
                                       "finished": s.finished, "throttled": s.throttled,
                                       **aggregate([s]), "store": dict(s.store)}
                      for s in sorted(tasks, key=lambda x: x.task_id)},
            "components": {c: aggregate(ss) for c, ss in sorted(by_component.items())},
            "workers": {str(w): aggregate(ss) for w, ss in sorted(by_worker.items())},
            "topology": aggregate(tasks),
        }


def metrics_reply(core: Any, component: str = "") -> dict[str, Any]:
    """What ``/api/metrics`` and the gRPC ``Metrics`` call return (one builder for both).

    Args:
        core: The :class:`~jstormpy.master.core.MasterCore`.
        component: Only this component's tasks ("" = every component).

    Returns:
        The metrics snapshot plus each worker process (pid, RSS, CPU, alive) and the
        gray-release timings (``upgrade``), JSON-serialisable.
    """
    with core.lock:
        snap: dict[str, Any] = core.metrics.snapshot(component)
        snap["workers_process"] = {
            str(s.worker_id): {"rss_bytes": s.rss_bytes, "cpu_percent": s.cpu_percent,
                               "alive": s.alive, "pid": s.pid}
            for s in core.sessions.values()}
        up = core.upgrade.status()
        snap["upgrade"] = {k: up[k] for k in ("phase", "last_pause_ms", "last_switch_ms")}
    return snap
