"""What a task executor shares with its worker: the host protocol, the counters the
heartbeat reads, and the exception that stops a task thread."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from jstormpy.metrics import LATENCY_BUCKETS_MS

__all__ = ["TaskCommand", "TaskHost", "TaskMetricsCounters", "TaskStopped"]


class TaskCommand(Enum):
    """What a worker asks of a task's thread (``TaskExecutor.command``)."""

    TRIGGER = "trigger"  # a spout takes checkpoint n: snapshot, barrier on every channel
    TRIGGER_PAUSE = "trigger_pause"  # ... then emits nothing until RESUME (gray release)
    RESUME = "resume"  # the quiescent pause is over: spouts emit, bolts tick again
    COMPLETE = "complete"  # checkpoint n is complete: sinks commit
    THROTTLE = "throttle"  # a spout emits nothing until the given monotonic time


class TaskStopped(Exception):
    """Raised inside a task thread when the worker stops it (rollback/shutdown)."""


@dataclass
class TaskMetricsCounters:
    """Counters a task updates; read by the heartbeat thread."""

    executed: int = 0
    errors: int = 0
    latency_sum_ms: float = 0.0
    latency_samples: int = 0
    snapshot_pause_ms: float = 0.0
    """How long the last snapshot stopped the task thread (capture + barrier; reported
    with the checkpoint's ack, plus any wait for its RocksDB apply)."""
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS_MS))

    def observe_ms(self, per_tuple_ms: float, count: int = 1) -> None:
        """Record one latency sample (weighted by ``count`` tuples)."""
        self.latency_sum_ms += per_tuple_ms * count
        self.latency_samples += count
        for i, bound in enumerate(LATENCY_BUCKETS_MS):
            if per_tuple_ms <= bound:
                self.buckets[i] += count
                break


class TaskHost(Protocol):
    """What an executor needs from its worker (the worker runtime implements it)."""

    generation: int
    guarantee: str
    worker_id: int

    def write_snapshot(self, checkpoint_id: int, task_id: int, data: bytes | Iterable[bytes],
                       refs: bytes | None = None, *, generation: int | None = None) -> str:
        """Store a task snapshot (and the segment keys it references) under the fencing
        token of ``generation`` (the barrier's; default: the worker's current one);
        returns its handle. ``data``: the bytes, or their pieces (a
        :class:`~jstormpy.runtime.snapshots.SnapshotStream`), written as they come."""

    def ack_checkpoint(self, checkpoint_id: int, task_id: int, handle: str, size: int,
                       finished: bool, alignment_ms: float, snapshot_ms: float, *,
                       generation: int | None = None, pause_ms: float = 0.0) -> None:
        """Tell the TM this task's part of the checkpoint (of ``generation``) is done
        (``pause_ms``: how long the checkpoint stopped the task thread)."""

    def fail_checkpoint(self, checkpoint_id: int, task_id: int, reason: str, *,
                        generation: int | None = None) -> None:
        """Tell the TM this task could not snapshot (for ``generation``)."""

    def report_error(self, task_id: int, component: str, exc: BaseException,
                     tup: Any) -> None:
        """Report an exception raised by user code."""

    def report_committed(self, checkpoint_id: int, task_id: int) -> None:
        """Tell the TM a sink committed a checkpoint's output."""

    def return_credit(self, src: int, dst: int, n: int) -> None:
        """Give credits of channel ``src → dst`` back to its sender."""
