"""``file:///dir`` — the embedded default: write a temp file, fsync, atomic rename.

Every filesystem call goes through a :class:`~jstormpy.state_backends.filesystem.Filesystem`
port: the os calls in production, a simulated filesystem in ``jstorm simulate``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path

from jstormpy.api.errors import BackendError, ObjectExistsError, SnapshotNotFoundError
from jstormpy.state_backends.base import ChunkSource, StateBackend
from jstormpy.state_backends.filesystem import OS_FILESYSTEM, Filesystem


class FileBackend(StateBackend):
    """Objects are files under a root directory; keys map to relative paths.

    ``fs`` is the filesystem it runs on (default: the real one)."""

    def __init__(self, uri: str, fs: Filesystem = OS_FILESYSTEM) -> None:
        self.uri = uri
        self.fs = fs
        path = uri[len("file://"):] if uri.startswith("file://") else uri
        if not path.startswith("/"):
            raise BackendError(f"state backend {uri!r}: file:// needs an absolute path "
                               "(file:///tmp/ckpt)")
        self.root = Path(path)

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise BackendError(f"bad object key {key!r}")
        return self.root / key

    def put_object(self, key: str, data: bytes) -> None:
        self._write(key, (data,), create=False)

    def put_object_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        """The chunks go into the temp file as they come (only one is in memory), then
        fsync and rename as :meth:`put_object`: the key appears whole or not at all."""
        self._write(key, chunks, create=False)

    def create_object(self, key: str, data: bytes) -> None:
        """Create-only and atomic: the whole file is hard-linked to its name, which fails
        if the name exists (no check-then-write window)."""
        self._write(key, (data,), create=True)

    def _write(self, key: str, chunks: Iterable[bytes], create: bool) -> None:
        target = self._path(key)
        source = ChunkSource(chunks)
        fs = self.fs
        try:
            _make_dirs_durable(fs, target.parent)
            tmp = fs.create_temp(target.parent)
            try:
                try:
                    for chunk in source:
                        tmp.write(chunk)
                    tmp.sync()
                finally:
                    tmp.close()
                if create:
                    fs.link(tmp.path, target)
                    fs.unlink(tmp.path)
                else:
                    fs.replace(tmp.path, target)
            except BaseException:
                with _suppress():
                    fs.unlink(tmp.path)
                raise
            fs.fsync_dir(target.parent)
        except FileExistsError:
            raise ObjectExistsError(f"{key!r} exists in {self.uri}") from None
        except OSError as exc:
            if exc is source.error:
                raise  # the producer's failure, not the write's: nothing was stored
            raise BackendError(f"cannot write {key!r} to {self.uri}: {exc.strerror or exc} "
                               f"({exc.filename or target})") from exc

    def get_object(self, key: str) -> bytes:
        try:
            return self.fs.read_bytes(self._path(key))
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"no object {key!r} in {self.uri}") from None
        except OSError as exc:
            raise BackendError(f"cannot read {key!r} from {self.uri}: {exc}") from exc

    def list_objects(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix``; [] if its directory does not exist.

        A directory that exists but cannot be read (EIO, EMFILE, a file in its place) is
        a BackendError, never a short or empty list: the TM restores the newest listed
        checkpoint, and a listing missing one would silently restore an older one.
        """
        # every key under "a/b/c" lies below the directory "a/b": walk only that
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self._path(head) if head else self.root
        try:
            if not self.fs.is_dir(start):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(start))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._list_error(prefix, exc) from exc

        def walk_error(exc: OSError) -> None:
            if isinstance(exc, FileNotFoundError):
                return  # deleted after its parent was listed: its keys are gone
            raise self._list_error(prefix, exc) from exc

        out = []
        for dirpath, _dirs, files in self.fs.walk(start, onerror=walk_error):
            rel = os.path.relpath(dirpath, self.root)
            for name in files:
                if name.startswith(".tmp-"):
                    continue
                key = name if rel == "." else f"{rel}/{name}"
                if key.startswith(prefix):
                    out.append(key)
        return out

    def _list_error(self, prefix: str, exc: OSError) -> BackendError:
        return BackendError(f"state backend {self.uri}: cannot list {prefix!r}: "
                            f"{exc.strerror or exc} ({exc.filename}); the listing is "
                            "incomplete, so it is not used")

    def delete_objects(self, prefix: str) -> None:
        fs = self.fs
        for key in self.list_objects(prefix):
            with _suppress():
                fs.unlink(self._path(key))
        # remove directories left empty under the prefix, deepest first
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if head:
            d = self._path(head)
            with _suppress():
                subdirs = [Path(p) for p, _, _ in fs.walk(d, onerror=_ignore) if Path(p) != d]
                for sub in sorted(subdirs, reverse=True):
                    fs.rmdir(sub)
                fs.rmdir(d)


def _ignore(exc: OSError) -> None:
    return None


def _make_dirs_durable(fs: Filesystem, path: Path) -> None:
    """``mkdir -p path``, fsyncing the parent of every directory it creates (outermost
    first): a new ``chk-N/`` is only durable once the checkpoint root was fsynced, else
    a power loss can take the whole checkpoint (and its ``_metadata``) with it."""
    missing: list[Path] = []
    probe = path
    while not fs.exists(probe):  # an existing non-directory fails the mkdir (ENOTDIR)
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for d in reversed(missing):
        try:
            fs.mkdir(d)
        except FileExistsError:  # a concurrent writer: fsync anyway, it may not have yet
            if not fs.is_dir(d):
                raise
        fs.fsync_dir(d.parent)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]
