"""Small helpers shared by the integration tests (real processes, no mocks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jstormpy import Config, read_committed

_SCRIPT = Path(sys.executable).parent / "jstorm"
JSTORM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jstormpy.cli.main"]
"""The installed ``jstorm`` command of this interpreter (or its module, run directly)."""


def start_as_terminal_job(args: list[str], **popen: Any) -> subprocess.Popen[str]:
    """Start ``args`` with SIGINT at its default action, as a terminal starts a foreground
    job, so that a test's SIGINT is a Ctrl-C to it. A test run started in the background by
    a shell without job control (``cmd &`` in a script) has SIGINT ignored, and an ignored
    disposition survives ``exec``: the child would never see the signal. A caught one is
    reset to the default by ``exec``, so the parent catches it while it starts the child."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(args, text=True, **popen)
    finally:
        signal.signal(signal.SIGINT, previous)


def wait_until(pred: Callable[[], Any], timeout: float = 20.0, what: str = "condition",
               interval: float = 0.05) -> Any:
    """Poll ``pred`` until it returns something truthy (which is returned); fail the test
    with ``what`` in the message if that does not happen within ``timeout`` seconds.
    Exceptions raised by ``pred`` count as "not yet" (the last one is reported)."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    pause = threading.Event()
    while True:
        try:
            value = pred()
        except Exception as exc:  # e.g. the TM not reachable yet
            last_exc = exc
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f" (last error: {last_exc!r})" if last_exc else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{extra}")
        pause.wait(interval)


def fast_config(**changes: Any) -> Config:
    """2 workers with short checkpoint/heartbeat periods so small topologies drain fast."""
    base: dict[str, Any] = {"workers": 2, "guarantee": "exactly_once",
                            "checkpoint_interval_ms": 200, "heartbeat_interval_ms": 100}
    base.update(changes)
    return Config(**base)


def committed_count(out: Any) -> int:
    """How many records a FileSink directory holds committed (0 before it exists)."""
    return len(read_committed(out)) if out.exists() else 0


def kill_now(handle, victim: str, worker: int) -> None:
    """SIGKILL the TM or worker ``worker`` (its replacement if it is restarting)."""
    deadline = time.monotonic() + 30
    while True:
        pid = handle.master_pid if victim == "master" else next(
            (w.pid for w in handle.workers() if w.id == worker and w.alive), None)
        try:
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                return
        except ProcessLookupError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no live {victim} {worker} to kill")
        time.sleep(0.02)
