"""Temporary directories a process removes when it exits.

:func:`process_temp_dir` is for what lives as long as the process that needs it: the users'
testing kit's private output (``jstormpy/testing/kit.py``) and code unpacked outside a run
directory (``jstormpy/operations/codepkg.py``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile


def process_temp_dir(prefix: str) -> str:
    """A new temporary directory that this process removes when it exits.

    Only the process that made it removes it: a process forked from this one runs this
    one's exit handlers too, and a worker may hold the path (a pickled component) while
    this process still uses it. Removal waits for the exit, not for a garbage collection:
    a topology still running may write into the directory after its maker dropped its
    last reference to the object holding the path.
    """
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(_remove_if_mine, os.getpid(), path)
    return path


def _remove_if_mine(owner_pid: int, path: str) -> None:
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)
