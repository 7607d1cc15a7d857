"""The worker's heartbeat: liveness plus every task's metrics, as one ``WorkerMessage``.

Tasks report their input-queue fill (topology-level backpressure), counters, latency
buckets, the CPU time of their thread, and for spouts whether end of stream went out
(the TM triggers the final checkpoint when every spout reports it; see
docs/checkpointing.md, *Drain*).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.state_store import RocksDBStore

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def task_cpu_seconds(ex: TaskExecutor) -> float:
    """CPU time the task's thread has used (s): user + system time of the thread from
    ``/proc/self/task/TID/stat`` (clock-tick resolution; a thread that is gone is never
    touched, unlike a ``pthread`` CPU clock); the figure it ended with once it has ended."""
    thread = ex.thread
    tid = getattr(thread, "native_id", None)
    if thread is not None and tid is not None and thread.is_alive():
        with contextlib.suppress(OSError, ValueError, IndexError):  # gone, or no /proc
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return ex.cpu_final


def heartbeat_message(worker_id: int, generation: int, executors: Iterable[TaskExecutor],
                      proc: Any, stores: Mapping[int, Any] | None = None) -> Any:
    """A Heartbeat for ``executors`` (``proc``: the worker's ``psutil.Process``;
    ``stores``: task id -> its state store, whose RocksDB figures go with its metrics)."""
    tasks = []
    now = time.monotonic()
    stores = stores or {}
    for ex in list(executors):
        m = ex.metrics
        q = ex.inq
        store = stores.get(ex.task_id)
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
            # a join's buffered sides (dataflow join bolts: ``buffered_records``)
            state_records=int(getattr(ex.component, "buffered_records", 0) or 0),
            throttled=ex.throttled_until > now, cpu_seconds=task_cpu_seconds(ex),
            store=store.figures() if isinstance(store, RocksDBStore) else None))
    try:
        rss = proc.memory_info().rss
        cpu = proc.cpu_percent(None)
    except Exception:
        rss, cpu = 0, 0.0
    return pb.WorkerMessage(heartbeat=pb.Heartbeat(
        worker_id=worker_id, generation=generation, tasks=tasks, rss_bytes=rss,
        cpu_percent=cpu))
