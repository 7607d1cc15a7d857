"""The life of a test server run as a child process in a temp dir of its own.

Subclasses (:class:`~jstormpy.testing.servers.redis_server.RedisServer`,
:class:`~jstormpy.testing.servers.zookeeper.ZooKeeperServer`) start their binary in
``start()``; this base stops it (SIGTERM, then SIGKILL after 10 s), deletes the directory
on ``close()``, and makes the server a context manager. ``stop()`` then ``start()`` keeps
the data.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Self


class ServerProcess:
    """A server process with its data under :attr:`root`."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it answers (the subclass's probe)."""
        raise NotImplementedError

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
