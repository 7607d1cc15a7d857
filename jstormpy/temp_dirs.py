"""Temporary directories that live as long as the process that made them, however it ends.

:func:`process_temp_dir` is for what a process needs while it runs and nobody needs after:
the users' testing kit's private output (``jstormpy/testing/kit.py``), code unpacked outside
a run directory (``jstormpy/operations/codepkg.py``), a worker's task databases where it
has no run directory (Spark; ``jstormpy/runtime/worker.py``), a multilang subprocess's pid
directory (``jstormpy/multilang/protocol.py``) and a Spark task's TLS files
(``deploy/spark.py``).

- A normal exit removes the directory (an exit handler; :func:`remove_temp_dir` removes it
  sooner).
- A process that is killed (SIGKILL, the OOM killer) runs no handler. So each directory
  holds a lock file, a hard link to one file per process that the process keeps locked
  (``flock``: the kernel releases the lock when the process dies, however it dies; one
  open file per process, however many directories). The next :func:`process_temp_dir` of
  the same prefix, in any process on the host, first removes every directory of that
  prefix whose lock it can take: one whose owner is gone.

Storm's supervisor and Flink's task executor clean up what a dead worker left locally in
the same spirit. A directory without a lock file (made by an older version) is left alone;
where the temp directory takes no ``flock`` or no hard links, a directory has none and goes
at its process's normal exit only.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable

LOCK_NAME = ".owner.lock"
"""The lock file in each directory: a hard link to its process's :data:`OWNER_PREFIX` file."""

OWNER_PREFIX = "jstorm-owner-"
"""The per-process lock file in the temp directory (removed at exit, or by a later sweep)."""

_owner: tuple[int, str, int] | None = None
"""This process's lock file: (pid, path, open descriptor holding its lock)."""


def _owner_lock() -> str | None:
    """This process's locked lock file (made at the first call in this process; a forked
    child makes its own); None where the temp directory takes no ``flock``."""
    global _owner
    if _owner is None or _owner[0] != os.getpid():
        _sweep(OWNER_PREFIX, os.unlink)
        # locked under a name no sweep looks at, then renamed: a sweep finds it locked
        fd, staging = tempfile.mkstemp(prefix="jstorm-new-owner-", suffix=".lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: nobody else holds it
        except OSError:
            os.close(fd)
            os.unlink(staging)
            return None
        path = os.path.join(os.path.dirname(staging),
                            OWNER_PREFIX + os.path.basename(staging)[len("jstorm-new-owner-"):])
        os.rename(staging, path)
        _owner = (os.getpid(), path, fd)
        atexit.register(_remove_if_mine, os.getpid(), path, os.unlink)
    return _owner[1]


def process_temp_dir(prefix: str) -> str:
    """A new temporary directory (mode 0700, in :func:`tempfile.gettempdir`) that this
    process removes when it exits, and that a later call with the same ``prefix`` removes
    if this process is killed (see the module's docstring); abandoned directories of
    ``prefix`` are removed first.

    Only the process that made it removes it at exit: a process forked from this one runs
    this one's exit handlers too, and a worker may hold the path (a pickled component)
    while this process still uses it. Removal waits for the exit, not for a garbage
    collection: a topology still running may write into the directory after its maker
    dropped its last reference to the object holding the path.
    """
    sweep_abandoned(prefix)
    owner = _owner_lock()
    path = tempfile.mkdtemp(prefix=prefix)
    # locked already: the same file (without flock or hard links in the temp directory:
    # removed at exit only, as a directory without a lock file)
    if owner is not None:
        with contextlib.suppress(OSError):
            os.link(owner, os.path.join(path, LOCK_NAME))
    atexit.register(_remove_if_mine, os.getpid(), path, remove_temp_dir)
    return path


def remove_temp_dir(path: str) -> None:
    """Remove a directory :func:`process_temp_dir` made, now."""
    shutil.rmtree(path, ignore_errors=True)


def sweep_abandoned(prefix: str) -> list[str]:
    """Remove the directories of ``prefix`` in the temp directory whose process is gone
    (their lock file can be locked); the paths removed."""
    return _sweep(prefix, lambda path: shutil.rmtree(os.path.dirname(path)), LOCK_NAME)


def _sweep(prefix: str, remove: Callable[[str], None], lock_name: str = "") -> list[str]:
    """Remove (``remove(lock path)``) each entry of the temp directory named ``prefix...``
    whose lock file (the entry itself, or ``lock_name`` in it) nobody holds locked."""
    removed: list[str] = []
    root = tempfile.gettempdir()
    try:
        names = [e.name for e in os.scandir(root) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(root, name)
        lock = os.path.join(path, lock_name) if lock_name else path
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # no lock file (gone meanwhile, an older version's, not a dir)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its process holds it: alive
            os.close(fd)
            continue
        try:
            remove(lock)
            removed.append(path)
        except OSError:  # another sweep was first
            pass
        finally:
            os.close(fd)
    return removed


def _remove_if_mine(owner_pid: int, path: str, remove: Callable[[str], None]) -> None:
    if os.getpid() == owner_pid:
        with contextlib.suppress(OSError):
            remove(path)
