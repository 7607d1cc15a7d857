"""The life of a test server: run as a child process in a temp dir of its own, or served
in the foreground by its own command.

Subclasses (:class:`~jstormpy.testing.servers.redis_server.RedisServer`,
:class:`~jstormpy.testing.servers.zookeeper.ZooKeeperServer`) start their binary in
``start()``; this base stops it (SIGTERM, then SIGKILL after 10 s), deletes the directory
on ``close()``, and makes the server a context manager. ``stop()`` then ``start()`` keeps
the data.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self


def serve_in_foreground(stop: Callable[[], None], ready_line: str) -> None:
    """A test server's command (``jstorm testing webhdfs|hbase``): print ``ready_line``,
    serve until SIGTERM or Ctrl-C, then ``stop()``. The SIGTERM handler is in place before
    the line, which tells a caller it may stop the server."""
    stopped = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print(ready_line, flush=True)
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop()


class ServerProcess(ABC):
    """A server process with its data under :attr:`root`."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it answers (the subclass's probe)."""

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s); its files stay."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        """Stop the server and delete its files."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
