"""One submit at a time per topology name under a ``JSTORM_HOME``.

``refuse_if_running`` refuses a name whose registration (``topologies/NAME.json``) names a
live launcher with a Topology Master that answers. A launcher writes that registration
only once its Topology Master is up, so two launchers that submit the same name at the
same instant both passed the check, and then overwrote each other's run directory.

A submit now runs its check, its run directory and its start-up, up to the registration,
while it holds ``topologies/NAME.lock`` (``flock``, exclusive). A second launcher waits
for the lock, then finds the first one's registration and is refused as before. The
kernel drops the lock of a process that dies, so a launcher killed in the middle of a
submit never leaves a stale lock behind. The lock file itself is never removed (removing
a lock file races with a process about to lock it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from jstormpy.api.errors import JStormError

WAIT_STEP_S = 0.02


@contextlib.contextmanager
def submit_lock(home: Path, name: str, timeout_s: float = 120.0) -> Iterator[None]:
    """Hold the submit lock of topology ``name`` under ``home`` for the ``with`` block.

    Raises:
        JStormError: another launcher held it for longer than ``timeout_s``.
    """
    folder = home / "topologies"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() > deadline:
                raise JStormError(
                    f"another launcher (pid {_holder(path)}) has been submitting a topology "
                    f"named {name!r} under {home} for over {timeout_s:.0f} s")
            time.sleep(WAIT_STEP_S)  # the lock has no blocking call with a timeout
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def _holder(path: Path) -> str:
    """The pid the lock's holder wrote, or "unknown"."""
    with contextlib.suppress(OSError, ValueError):
        return str(int(path.read_text().split()[0]))
    return "unknown"
