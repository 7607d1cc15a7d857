"""The filesystem port of the ``file://`` backend: the handful of primitives it writes,
reads, lists and deletes through.

Production's port is :data:`OS_FILESYSTEM` (the os calls the backend always made: a temp
file, fsync, an atomic rename or hard link, the directory's fsync). The simulator
(``jstorm simulate``) gives the same backend a simulated filesystem on its simulated clock
that injects storage faults, so the backend it tests is the one production runs (issue
37): commit points, listing, retention and shared files are not a copy.

Paths are absolute :class:`~pathlib.Path` objects. Errors are the ``OSError`` subclasses
the os calls raise (``FileNotFoundError``, ``FileExistsError``, ``OSError(ENOSPC)``...);
the backend turns them into its own errors.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

Walk = Iterator[tuple[str, list[str], list[str]]]
"""``os.walk``'s answer: ``(dirpath, dirnames, filenames)``, top-down."""


class TempFile(Protocol):
    """A new temp file, open for writing (``mkstemp``)."""

    path: Path

    def write(self, data: bytes) -> None:
        """Append ``data``."""

    def sync(self) -> None:
        """Flush and fsync: the data is durable once this returns."""

    def close(self) -> None:
        """Close it (it stays on disk until unlinked or renamed)."""


class Filesystem(Protocol):
    """What :class:`~jstormpy.state_backends.file.FileBackend` needs of a filesystem."""

    def create_temp(self, directory: Path) -> TempFile:
        """A new, uniquely named temp file in ``directory`` (``.tmp-*.part``)."""

    def link(self, source: Path, target: Path) -> None:
        """Hard-link ``source`` as ``target``; FileExistsError if ``target`` exists."""

    def replace(self, source: Path, target: Path) -> None:
        """Rename ``source`` to ``target`` atomically, replacing it."""

    def unlink(self, path: Path) -> None:
        """Remove a file."""

    def fsync_dir(self, path: Path) -> None:
        """fsync a directory, so the entries made in it survive a power loss."""

    def read_bytes(self, path: Path) -> bytes:
        """A file's contents."""

    def exists(self, path: Path) -> bool:
        """Whether anything is at ``path``."""

    def is_dir(self, path: Path) -> bool:
        """Whether ``path`` is a directory; FileNotFoundError if nothing is there."""

    def mkdir(self, path: Path) -> None:
        """Create one directory (its parent exists); FileExistsError if taken."""

    def rmdir(self, path: Path) -> None:
        """Remove an empty directory."""

    def walk(self, top: Path, onerror: Callable[[OSError], None]) -> Walk:
        """``os.walk(top, onerror=onerror)``."""


class _OsTempFile:
    def __init__(self, directory: Path) -> None:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
        self.path = Path(name)
        self._file: BinaryIO = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        self._file.write(data)

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


class OsFilesystem:
    """The real filesystem: each primitive is the os call."""

    def create_temp(self, directory: Path) -> TempFile:
        return _OsTempFile(directory)

    def link(self, source: Path, target: Path) -> None:
        os.link(source, target)

    def replace(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def fsync_dir(self, path: Path) -> None:
        dfd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def read_bytes(self, path: Path) -> bytes:
        return path.read_bytes()

    def exists(self, path: Path) -> bool:
        return path.exists()

    def is_dir(self, path: Path) -> bool:
        return stat.S_ISDIR(os.stat(path).st_mode)

    def mkdir(self, path: Path) -> None:
        path.mkdir()

    def rmdir(self, path: Path) -> None:
        path.rmdir()

    def walk(self, top: Path, onerror: Callable[[OSError], None]) -> Walk:
        return os.walk(top, onerror=onerror)


OS_FILESYSTEM = OsFilesystem()
"""Production's port."""
