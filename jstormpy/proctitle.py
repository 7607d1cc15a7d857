"""Process and thread titles: ``ps`` and ``top`` show ``jstorm TM NAME`` and ``jstorm worker
N NAME`` instead of ``python -m jstormpy.deploy.forkserver`` for every process of a
topology, and ``top -H``, ``ps -L``, ``perf`` and ``pidstat -t`` show each engine thread
by its name (``task-3-count``, ``heartbeat``, ...) instead of the process title every
thread would otherwise inherit."""

from __future__ import annotations

import contextlib
import sys
import threading
from types import FrameType
from typing import Any


def set_process_title(title: str) -> None:
    """Set this process's title (what ``ps``/``top`` show) if ``setproctitle`` is
    installed; otherwise leave it as it is."""
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(title)


def _title_this_thread(frame: FrameType, event: str, arg: Any) -> None:
    """A new thread's first profiling event: give the thread its Python name as its OS
    name, and take this hook off the thread (it costs nothing after). It never raises: an
    exception here would end the thread before its ``run``."""
    sys.setprofile(None)
    with contextlib.suppress(Exception):
        import setproctitle

        setproctitle.setthreadtitle(threading.current_thread().name)


def title_threads() -> None:
    """From here on, every thread this process starts through ``threading`` carries its
    Python name as its OS name too (Linux keeps the first 15 bytes), if ``setproctitle``
    is installed.

    Installed with ``threading.setprofile``: the hook runs once, at the start of each new
    thread, and removes itself there. A user's own ``threading.setprofile`` later replaces
    it (their threads then keep the process title)."""
    try:
        import setproctitle  # noqa: F401  (the hook imports it again, from the cache)
    except ImportError:
        return
    threading.setprofile(_title_this_thread)
