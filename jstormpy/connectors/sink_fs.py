"""The filesystem port of :class:`~jstormpy.connectors.sinks.FileSink`: the primitives its
commit protocol stages, commits, aborts and recovers through.

Production's port is :data:`OS_SINK_FILESYSTEM` (the os calls the sink always made: an
in-progress file opened exclusively, fsync, an atomic rename or hard link, the
directory's fsync, listings). The simulator (``jstorm simulate``) gives the same sink a
simulated directory tree on its simulated clock, so the sink it tests is the one
production runs (issue 37): staging, publishing by link, the take-over of an older
incarnation's staged files and the recovery of staged files are not a copy.

Paths are strings, as the sink builds them. Errors are the ``OSError`` subclasses the os
calls raise (``FileNotFoundError``, ``FileExistsError``, ``OSError(EIO)``...); the sink
turns them into its own errors (:class:`~jstormpy.api.errors.SinkError`,
:class:`~jstormpy.api.errors.FencedError`).
"""

from __future__ import annotations

import os
from typing import IO, Protocol

from jstormpy.connectors.file_parts import fsync_dir


class NewFile(Protocol):
    """A file created for writing (``open(path, "xb")``)."""

    def write(self, data: bytes, /) -> object:
        """Append ``data``."""

    def flush(self) -> None:
        """Hand buffered data to the filesystem."""

    def fileno(self) -> int:
        """The descriptor :meth:`SinkFilesystem.fsync` syncs."""

    def close(self) -> None:
        """Close it (it stays on disk)."""


class SinkFilesystem(Protocol):
    """What :class:`~jstormpy.connectors.sinks.FileSink` needs of a filesystem."""

    def makedirs(self, path: str) -> None:
        """Create ``path`` and its parents; no error if it exists."""

    def writable(self, path: str) -> bool:
        """Whether entries can be created in directory ``path`` (``os.access`` W|X)."""

    def mkdir(self, path: str) -> None:
        """Create one directory; FileExistsError if taken."""

    def listdir(self, path: str) -> list[str]:
        """The names in directory ``path``."""

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (False if nothing is there)."""

    def is_file(self, path: str) -> bool:
        """Whether ``path`` is a regular file (False if nothing is there)."""

    def exists(self, path: str) -> bool:
        """Whether anything is at ``path``."""

    def create(self, path: str) -> NewFile:
        """Create ``path`` for writing; FileExistsError if it exists."""

    def fsync(self, file: NewFile) -> None:
        """Make what was written to ``file`` (flushed) durable."""

    def replace(self, source: str, target: str) -> None:
        """Rename ``source`` to ``target`` atomically, replacing it."""

    def rename(self, source: str, target: str) -> None:
        """``os.rename``."""

    def link(self, source: str, target: str) -> None:
        """Hard-link ``source`` as ``target``; FileExistsError if ``target`` exists."""

    def unlink(self, path: str) -> None:
        """Remove a file; FileNotFoundError if it is not there."""

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""

    def fsync_dir(self, path: str) -> None:
        """fsync a directory, so the entries made in it survive a power loss."""


class OsSinkFilesystem:
    """The real filesystem: each primitive is the os call."""

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def writable(self, path: str) -> bool:
        return os.access(path, os.W_OK | os.X_OK)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def create(self, path: str) -> IO[bytes]:
        return open(path, "xb")  # noqa: SIM115 - the sink keeps it open

    def fsync(self, file: NewFile) -> None:
        os.fsync(file.fileno())

    def replace(self, source: str, target: str) -> None:
        os.replace(source, target)

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def link(self, source: str, target: str) -> None:
        os.link(source, target)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def fsync_dir(self, path: str) -> None:
        fsync_dir(path)


OS_SINK_FILESYSTEM = OsSinkFilesystem()
"""Production's port."""
