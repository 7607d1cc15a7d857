"""What a task executor shares with its worker: the host protocol, the counters the
heartbeat reads, and the exception that stops a task thread."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.metrics import LATENCY_BUCKETS_MS
from jstormpy.state_backends import StateBackend

__all__ = ["DetachedHost", "TaskCommand", "TaskHost", "TaskMetricsCounters", "TaskStopped"]


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
    tasks_generation: int
    """The generation the worker's tasks run in (log lines name it)."""
    incarnation: str
    """This worker process's fencing name (a native upload's attempt)."""
    max_parallelism: int | None
    """The number of key groups, stored in every snapshot (None: a host outside a run,
    whose snapshots are not checked against one)."""
    config: Config | None
    """The run's configuration (None: a host without one; the defaults apply)."""
    backend: StateBackend | None
    """Where native uploads go (None: no state backend)."""

    def spout_finished(self, task_id: int) -> None:
        """A spout task emitted its end of stream."""

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


class DetachedHost:
    """A :class:`TaskHost` outside any run, for an executor driven directly (benchmarks,
    the unit tests' recording host): no configuration (the defaults apply), no state
    backend, no key groups; snapshots are kept in memory and every report goes nowhere.
    Subclasses override what they observe."""

    guarantee = "exactly_once"
    worker_id = 0
    generation = 1
    tasks_generation = 0
    incarnation = "detached"
    max_parallelism: int | None = None
    config: Config | None = None
    backend: StateBackend | None = None

    def write_snapshot(self, checkpoint_id: int, task_id: int, data: bytes | Iterable[bytes],
                       refs: bytes | None = None, *, generation: int | None = None) -> str:
        return f"detached-{checkpoint_id}-{task_id}"

    def ack_checkpoint(self, checkpoint_id: int, task_id: int, handle: str, size: int,
                       finished: bool, alignment_ms: float, snapshot_ms: float, *,
                       generation: int | None = None, pause_ms: float = 0.0) -> None:
        return None

    def fail_checkpoint(self, checkpoint_id: int, task_id: int, reason: str, *,
                        generation: int | None = None) -> None:
        return None

    def report_error(self, task_id: int, component: str, exc: BaseException,
                     tup: Any) -> None:
        return None

    def report_committed(self, checkpoint_id: int, task_id: int) -> None:
        return None

    def return_credit(self, src: int, dst: int, n: int) -> None:
        return None

    def spout_finished(self, task_id: int) -> None:
        return None
