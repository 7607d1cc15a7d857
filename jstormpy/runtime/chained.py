"""A bolt task chained into its source task's thread (``runtime/channel_plan.py``).

The source task's sends to it call :meth:`ChainedTask.run_chained`, which runs the batch
or marker through the task's usual code (``TaskExecutor._handle``) right there: no
queue, no credit, no hand-off between threads, and so nothing for the GIL to switch on.
Barriers, watermarks and end-of-stream stay in order with the data because they travel
the same call path.

The chained task keeps a thread of its own for what does not arrive on its input: the
Topology Master's commands (a sink's commit when a checkpoint completes, stop), ticks,
deferred sink commits and the linger flush of its own output when its source is idle.
One lock serialises that thread and the source's calls, so the component never runs in
two threads at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jstormpy.runtime.task_host import TaskStopped

READY_POLL_S = 0.05


class ChainedTask:
    """Mixin of :class:`~jstormpy.runtime.executor.TaskExecutor`: the chained mode."""

    chained = False
    """Set by the worker before ``start()`` for a task that runs in its source's thread."""

    # provided by TaskExecutor
    collector: Any
    ctrl: Any
    wake: threading.Event
    stopping: bool
    linger_s: float
    tick_s: float | None
    next_tick: float

    def _init_chain(self) -> None:
        self.chain_lock = threading.Lock()
        self.chain_ready = threading.Event()  # the task's own start-up (a sink's begin) ran
        self.chain_flushed = time.monotonic()

    def run_chained(self, item: Any) -> None:
        """Process one item of the task's only input channel in the caller's thread.

        Raises:
            TaskStopped: the task is stopping (or failed under exactly-once).
        """
        while not self.chain_ready.wait(READY_POLL_S):
            if self.stopping:
                raise TaskStopped
        with self.chain_lock:
            if self.stopping:
                raise TaskStopped
            self._handle(*item)  # type: ignore[attr-defined]
            self._flush_lingered(time.monotonic())

    def _flush_lingered(self, now: float) -> None:
        """Send the task's partly filled output batches once they waited ``linger_s``."""
        if self.collector.dirty and now - self.chain_flushed >= self.linger_s:
            self.collector.flush()
            self.chain_flushed = now

    def _run_chain_owner(self) -> None:
        """The chained task's own thread: commands, ticks, commit retries, idle flushes."""
        with self.chain_lock:
            self._begin_sink()  # type: ignore[attr-defined]
        self.chain_ready.set()
        coll = self.collector
        while True:
            timeout = self.linger_s if coll.dirty else READY_POLL_S
            if self.tick_s is not None:
                timeout = min(timeout, max(self.next_tick - time.monotonic(), 0.0))
            self.wake.wait(timeout)
            self.wake.clear()
            with self.chain_lock:
                if self.ctrl or self.stopping:
                    self._process_ctrl()  # type: ignore[attr-defined]
                now = time.monotonic()
                self._flush_lingered(now)
                self._run_due(now)  # type: ignore[attr-defined]
