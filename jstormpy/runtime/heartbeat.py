"""The worker's heartbeat: liveness plus every task's metrics, as one ``WorkerMessage``.

Tasks report their input-queue fill (topology-level backpressure), counters, latency
buckets, and for spouts whether end of stream went out (the TM triggers the final
checkpoint when every spout reports it; see docs/checkpointing.md, *Drain*).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.runtime.executor import TaskExecutor


def heartbeat_message(worker_id: int, generation: int, executors: Iterable[TaskExecutor],
                      proc: Any) -> Any:
    """A Heartbeat for ``executors`` (``proc``: the worker's ``psutil.Process``)."""
    tasks = []
    now = time.monotonic()
    for ex in list(executors):
        m = ex.metrics
        q = ex.inq
        tasks.append(pb.TaskMetrics(
            task_id=ex.task_id, emitted=ex.collector.emitted, executed=m.executed,
            queue_depth=q.qsize() if q is not None else 0,
            queue_capacity=q.maxsize if q is not None else 0,
            latency_ms_sum=m.latency_sum_ms, latency_samples=m.latency_samples,
            latency_buckets=m.buckets, errors=m.errors,
            # "finished" only once end of stream went out: the final checkpoint must
            # follow it (issue 13 hole 3)
            finished=ex.kind == "spout" and ex.eos_sent,
            late_records=int(getattr(ex.component, "late_records", 0) or 0),
            throttled=ex.throttled_until > now))
    try:
        rss = proc.memory_info().rss
        cpu = proc.cpu_percent(None)
    except Exception:
        rss, cpu = 0, 0.0
    return pb.WorkerMessage(heartbeat=pb.Heartbeat(
        worker_id=worker_id, generation=generation, tasks=tasks, rss_bytes=rss,
        cpu_percent=cpu))
