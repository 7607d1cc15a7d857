"""The Topology Master's state-backend thread.

State-backend calls never run under the TM's lock: they go to :class:`BackendIO`, one FIFO
thread per TM, and report back by taking the lock. So a backend that hangs delays
checkpoints -- each call bounded by ``Config.state_backend_timeout_ms`` -- but never
``jstorm status``, ``kill``, heartbeats or control messages. FIFO order matters: a
recovery's listing of completed checkpoints runs after every metadata write queued before
it, so it sees each commit point that was reached.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

log = logging.getLogger("jstormpy.master")


class BackendIO:
    """One thread running the TM's state-backend calls in submission order."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._idle = threading.Condition()
        self._busy = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` after every job submitted before it."""
        with self._idle:
            self._busy += 1
        self._jobs.put(job)

    def wait_idle(self, timeout: float) -> bool:
        """Block until every submitted job ran (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("state-backend job failed")
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()
