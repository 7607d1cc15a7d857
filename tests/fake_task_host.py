"""The one fake :class:`~jstormpy.runtime.task_host.TaskHost` the unit tests use: it records
what a task tells its worker, the way the worker would see it.

Like the worker, a call that carries no generation is taken to be of the host's current
``generation`` (the worker's own field), so a test can see which generation a late
snapshot thread wrote and acked under.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jstormpy.runtime.task_host import DetachedHost


@dataclass(frozen=True)
class Write:
    """One snapshot write: which checkpoint, task and generation its key names."""

    checkpoint_id: int
    task_id: int
    generation: int


@dataclass(frozen=True)
class Ack:
    """One checkpoint ack, as the Topology Master would receive it."""

    checkpoint_id: int
    task_id: int
    handle: str
    size: int
    finished: bool
    alignment_ms: float
    generation: int


@dataclass(frozen=True)
class Failure:
    """One CheckpointFailed report."""

    checkpoint_id: int
    task_id: int
    reason: str
    generation: int


class FakeTaskHost(DetachedHost):
    """Records writes, acks, failures, errors, commits and credit; stores snapshots in
    memory. ``blocking=True``: every write waits for :attr:`release` (a slow upload).
    ``errors_fail=True``: a reported user error fails the test at once."""


    def __init__(self, guarantee: str = "exactly_once", generation: int = 1,
                 blocking: bool = False, errors_fail: bool = True) -> None:
        self.guarantee = guarantee
        self.generation = generation
        self.release = threading.Event()
        if not blocking:
            self.release.set()
        self.errors_fail = errors_fail
        self.stored: dict[str, bytes] = {}
        self.writes: list[Write] = []
        self.acks: list[Ack] = []
        self.pauses: list[float] = []  # each ack's task-thread pause (ms)
        self.acked = threading.Event()
        self.failures: list[Failure] = []
        self.errors: list[tuple[BaseException, Any]] = []
        self.committed: list[int] = []

    def write_snapshot(self, checkpoint_id: int, task_id: int, data: bytes | Iterable[bytes],
                       refs: bytes | None = None, *, generation: int | None = None) -> str:
        assert self.release.wait(10), "the test never released the upload"
        gen = self.generation if generation is None else generation
        self.writes.append(Write(checkpoint_id, task_id, gen))
        handle = f"chk-{checkpoint_id}/task-{task_id}-g{gen}"
        self.stored[handle] = data if isinstance(data, bytes) else b"".join(data)
        return handle

    def ack_checkpoint(self, checkpoint_id: int, task_id: int, handle: str, size: int,
                       finished: bool, alignment_ms: float, snapshot_ms: float, *,
                       generation: int | None = None, pause_ms: float = 0.0) -> None:
        gen = self.generation if generation is None else generation
        self.pauses.append(pause_ms)
        self.acks.append(Ack(checkpoint_id, task_id, handle, size, finished, alignment_ms,
                             gen))
        self.acked.set()

    def fail_checkpoint(self, checkpoint_id: int, task_id: int, reason: str, *,
                        generation: int | None = None) -> None:
        gen = self.generation if generation is None else generation
        self.failures.append(Failure(checkpoint_id, task_id, reason, gen))

    def report_error(self, task_id: int, component: str, exc: BaseException,
                     tup: Any) -> None:
        if self.errors_fail:
            raise AssertionError(f"task {task_id} ({component}) raised {exc!r} on {tup!r}")
        self.errors.append((exc, tup))

    def report_committed(self, checkpoint_id: int, task_id: int) -> None:
        self.committed.append(checkpoint_id)

    def return_credit(self, src: int, dst: int, n: int) -> None:
        """Credit goes nowhere: the tests feed input queues directly."""
