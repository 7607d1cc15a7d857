"""``file:///dir`` — the embedded default: write a temp file, fsync, atomic rename."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from jstormpy.api.errors import BackendError, ObjectExistsError, SnapshotNotFoundError
from jstormpy.state_backends.base import ChunkSource, StateBackend


class FileBackend(StateBackend):
    """Objects are files under a root directory; keys map to relative paths."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
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
        try:
            _make_dirs_durable(target.parent)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as fh:
                    for chunk in source:
                        fh.write(chunk)
                    fh.flush()
                    os.fsync(fh.fileno())
                if create:
                    os.link(tmp, target)
                    os.unlink(tmp)
                else:
                    os.replace(tmp, target)
            except BaseException:
                with _suppress():
                    os.unlink(tmp)
                raise
            _fsync_dir(target.parent)
        except FileExistsError:
            raise ObjectExistsError(f"{key!r} exists in {self.uri}") from None
        except OSError as exc:
            if exc is source.error:
                raise  # the producer's failure, not the write's: nothing was stored
            raise BackendError(f"cannot write {key!r} to {self.uri}: {exc.strerror or exc} "
                               f"({exc.filename or target})") from exc

    def get_object(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
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
            if not stat.S_ISDIR(os.stat(start).st_mode):
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
        for dirpath, _dirs, files in os.walk(start, onerror=walk_error):
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
        for key in self.list_objects(prefix):
            with _suppress():
                os.unlink(self._path(key))
        # remove directories left empty under the prefix
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if head:
            d = self._path(head)
            with _suppress():
                for sub in sorted(d.rglob("*"), reverse=True):
                    if sub.is_dir():
                        sub.rmdir()
                d.rmdir()


def _fsync_dir(path: Path) -> None:
    """fsync a directory, so the entries created in it survive a power loss."""
    dfd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _make_dirs_durable(path: Path) -> None:
    """``mkdir -p path``, fsyncing the parent of every directory it creates (outermost
    first): a new ``chk-N/`` is only durable once the checkpoint root was fsynced, else
    a power loss can take the whole checkpoint (and its ``_metadata``) with it."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():  # an existing non-directory fails the mkdir (ENOTDIR)
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:  # a concurrent writer: fsync anyway, it may not have yet
            if not d.is_dir():
                raise
        _fsync_dir(d.parent)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]
