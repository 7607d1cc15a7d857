"""``hdfs://host:port/base/dir`` — snapshots in HDFS, over WebHDFS (the ``hdfs`` package).

``host:port`` is the NameNode's **WebHDFS** (HTTP) address (9870 on Hadoop 3), not the
RPC port: the backend talks REST so it needs no JVM or native Hadoop libraries.

Atomicity design
----------------
* **Write-once keys** (everything outside ``meta/``: task snapshots, ``_metadata``).
  ``put_object`` streams the bytes to ``<dir>/.tmp-<uuid>`` (invisible to
  ``list_objects``), then RENAMEs it onto the key's path. A NameNode rename is atomic, so
  a reader sees no file or the complete file, never a half-written one. If the key
  already exists (a retried put), the rename is repeated with
  ``renameoptions=OVERWRITE`` (``ClientProtocol.rename2``, an atomic replace in the
  NameNode); a WebHDFS gateway that rejects the option gets delete-then-rename, which
  never exposes partial data but briefly shows the key as absent (logged as a warning).
* **Overwritable keys** (``meta/<name>``). The documented WebHDFS RENAME never replaces
  an existing file, so these keys are *versioned*: ``meta/<name>`` is a directory of
  complete versions ``v-<20-digit sequence>``. A put writes ``.tmp-<uuid>`` in that
  directory and renames it to the next free version number; rename fails if that name
  exists, so two writers can never claim the same version (the loser retries with the
  next number). The highest version is the value; older versions are deleted after the
  new one is in place. A reader lists the directory and opens the highest version
  (re-listing if a concurrent cleanup removed it first). Every version file appears
  only by rename, so only complete values are ever visible.

Failures: connection errors, timeouts and HTTP 5xx / ``RetriableException`` /
``StandbyException`` are retried ``retries`` times with exponential backoff; then
:class:`~jstormpy.api.errors.BackendError` naming the URI is raised. A listing never comes
back short: a 404 on a directory known to exist (the root once anything under it was
seen, a ``chk-N/`` its parent just listed) is retried the same way, then a BackendError.
"""

from __future__ import annotations

import logging
import posixpath
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests

from jstormpy.api.errors import BackendError, ObjectExistsError, SnapshotNotFoundError
from jstormpy.state_backends.base import ChunkSource, StateBackend

log = logging.getLogger(__name__)

T = TypeVar("T")
TMP_PREFIX = ".tmp-"
VERSION_PREFIX = "v-"
VERSIONED_PREFIX = "meta/"
_TRANSIENT_REMOTE = {"RetriableException", "StandbyException", "SafeModeException"}


class _TransientHttpError(Exception):
    """An HTTP 5xx answer: worth retrying."""


class _ListingIncomplete(Exception):
    """A directory known to exist answered 404 while being listed (a NameNode failover,
    a gateway losing its mount): the listing would be short, so it is retried and then
    fails, never returned as "no checkpoints"."""


def _raise_on_5xx(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    if response.status_code >= 500:
        raise _TransientHttpError(f"HTTP {response.status_code} from {response.url}")


class HdfsBackend(StateBackend):
    """Checkpoint objects as files under a base directory in HDFS, via WebHDFS.

    Args:
        uri: ``hdfs://namenode:webhdfs_port/base/dir``.
        user: HDFS user (``user.name``) for simple auth; default: the local user.
        timeout_s: Connect/read timeout of each HTTP request, in seconds.
        retries: How often a transiently failing operation is retried.
        kerberos: Authenticate with SPNEGO (``hdfs.ext.kerberos.KerberosClient``;
            needs ``pip install hdfs[kerberos]`` and a ticket).
        backoff_s: First retry delay; doubles on each further retry (capped at 5 s).

    Raises:
        BackendError: Bad URI, or Kerberos requested without its dependencies.
    """

    def __init__(self, uri: str, *, user: str | None = None, timeout_s: float = 10,
                 retries: int = 3, kerberos: bool = False, backoff_s: float = 0.1) -> None:
        self.uri = uri
        parts = urlsplit(uri)
        if parts.scheme != "hdfs" or not parts.hostname or not parts.port:
            raise BackendError(f"state backend {uri!r}: expected hdfs://host:port/base/dir "
                               "(port = the NameNode's WebHDFS HTTP port, e.g. 9870)")
        self.root = posixpath.normpath(parts.path or "/")
        if not self.root.startswith("/"):
            self.root = "/" + self.root
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        session = requests.Session()
        session.hooks["response"].append(_raise_on_5xx)
        url = f"http://{parts.hostname}:{parts.port}"
        if kerberos:
            try:
                from hdfs.ext.kerberos import KerberosClient
            except ImportError as exc:
                raise BackendError(
                    f"state backend {uri!r}: kerberos=True needs the Kerberos extras of the "
                    f"hdfs package (pip install 'hdfs[kerberos]'): {exc}") from exc
            self.client: Any = KerberosClient(url, root=self.root, timeout=timeout_s,
                                              session=session)
        else:
            from hdfs import InsecureClient
            self.client = InsecureClient(url, user=user, root=self.root, timeout=timeout_s,
                                         session=session)
        self._overwrite_rename_supported = True
        # set once any object or directory under the root was seen: from then on a 404
        # listing the root is a fault, not an empty backend
        self._root_seen = False

    # -- helpers ------------------------------------------------------------------------
    def _path(self, key: str) -> str:
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in key.split("/")):
            raise BackendError(f"state backend {self.uri}: bad object key {key!r}")
        return posixpath.join(self.root, key)

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying transient failures with exponential backoff."""
        from hdfs import HdfsError

        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except (requests.ConnectionError, requests.Timeout, _TransientHttpError,
                    _ListingIncomplete, requests.exceptions.ChunkedEncodingError) as exc:
                err: Exception = exc
            except HdfsError as exc:
                if getattr(exc, "exception", None) not in _TRANSIENT_REMOTE:
                    raise BackendError(f"state backend {self.uri}: {what} failed: "
                                       f"{exc}") from exc
                err = exc
            if attempt < self.retries:
                log.warning("state backend %s: %s failed (%s), retry %d/%d in %.2fs",
                            self.uri, what, err, attempt + 1, self.retries, delay)
                time.sleep(delay)  # backoff between attempts, not a test wait
                delay = min(delay * 2, 5.0)
        raise BackendError(f"state backend {self.uri} unreachable: {what} failed after "
                           f"{self.retries + 1} attempts: {err}") from err

    def _list_dir(self, path: str) -> list[tuple[str, dict[str, Any]]] | None:
        """``(name, FileStatus)`` of a directory's entries, or None if it does not exist."""
        # HdfsCLI's public list() raises one HdfsError for "missing" and for every other
        # failure; the raw call lets a 404 mean "no directory" and anything else raise
        res = self.client._list_status(path, strict=False)
        if res.status_code == 404:
            return None
        if not res:
            from hdfs.client import _to_error  # HdfsCLI's own error of a raw response
            raise _to_error(res)
        self._root_seen = True
        statuses = res.json()["FileStatuses"]["FileStatus"]
        if len(statuses) == 1 and not statuses[0]["pathSuffix"]:
            return None  # a file, not a directory
        return [(s["pathSuffix"], s) for s in statuses]

    def _write_tmp(self, directory: str, data: bytes | Iterable[bytes]) -> str:
        tmp = posixpath.join(directory, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        try:
            # bytes: one request body; an iterable: streamed, chunk by chunk
            self.client.write(tmp, data=data, overwrite=False)
        except BaseException:
            self._discard(tmp)  # a stream that failed part-way leaves a partial file
            raise
        return tmp

    def _discard(self, path: str) -> None:
        try:
            self.client.delete(path, recursive=True)
        except Exception as exc:  # noqa: BLE001 - best effort cleanup
            log.debug("state backend %s: could not remove %s: %s", self.uri, path, exc)

    @staticmethod
    def _versions(entries: list[tuple[str, dict[str, Any]]]) -> list[int]:
        out = []
        for name, status in entries:
            if name.startswith(VERSION_PREFIX) and status["type"] == "FILE":
                try:
                    out.append(int(name[len(VERSION_PREFIX):]))
                except ValueError:
                    continue
        return sorted(out)

    # -- primitives ---------------------------------------------------------------------
    def put_object(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (see the module docstring)."""
        target = self._path(key)
        if key.startswith(VERSIONED_PREFIX):
            self._retry(f"put {key!r}", lambda: self._put_versioned(target, data))
        else:
            self._retry(f"put {key!r}", lambda: self._put_once(key, target, data))
        self._root_seen = True

    def put_object_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        """:meth:`put_object` streaming ``chunks`` (HTTP chunked transfer) into the temp
        file as they come, so the object is never whole in memory; the rename makes it
        appear whole or not at all. A retry iterates ``chunks`` again."""
        target = self._path(key)
        tries = [0]

        def attempt() -> None:
            tries[0] += 1
            if tries[0] > 1 and iter(chunks) is chunks:  # partly consumed: it would
                raise BackendError(                      # store less than was given
                    f"state backend {self.uri}: put {key!r} failed and its one-shot "
                    "stream cannot be written again")
            source = ChunkSource(chunks)
            try:
                if key.startswith(VERSIONED_PREFIX):
                    self._put_versioned(target, source)
                else:
                    self._put_once(key, target, source)
            except Exception:
                if source.error is not None:  # the producer failed, not HDFS: no retry
                    raise source.error from None
                raise

        self._retry(f"put {key!r}", attempt)
        self._root_seen = True

    def create_object(self, key: str, data: bytes) -> None:
        """Create-only: a rename that does not overwrite (WebHDFS answers false when the
        target exists). A retried create whose first rename landed reports the key taken,
        like a write that timed out and landed: the caller treats it as failed."""
        target = self._path(key)
        self._retry(f"create {key!r}", lambda: self._create_once(key, target, data))
        self._root_seen = True

    def _create_once(self, key: str, target: str, data: bytes) -> None:
        tmp = self._write_tmp(posixpath.dirname(target), data)
        try:
            if not self.client._rename(tmp, destination=target).json()["boolean"]:
                raise ObjectExistsError(f"{key!r} exists in {self.uri}")
        except BaseException:
            self._discard(tmp)
            raise

    def _put_once(self, key: str, target: str, data: bytes | Iterable[bytes]) -> None:
        from hdfs import HdfsError

        tmp = self._write_tmp(posixpath.dirname(target), data)
        try:
            # the raw RENAME: the public rename() neither returns WebHDFS's boolean (false:
            # the target exists) nor passes renameoptions=OVERWRITE, both needed here
            res = self.client._rename(tmp, destination=target)
            if res.json()["boolean"]:
                return
            # the key exists already (a retried put): replace it atomically
            if self._overwrite_rename_supported:
                try:
                    self.client._rename(tmp, destination=target, renameoptions="OVERWRITE")
                    return
                except HdfsError as exc:
                    if exc.exception not in ("IllegalArgumentException",
                                             "UnsupportedOperationException"):
                        raise
                    self._overwrite_rename_supported = False
            log.warning("state backend %s: server cannot rename with OVERWRITE; replacing "
                        "%r by delete+rename", self.uri, key)
            self.client.delete(target)
            self.client.rename(tmp, target)
        except BaseException:
            self._discard(tmp)
            raise

    def _put_versioned(self, target: str, data: bytes | Iterable[bytes]) -> None:
        tmp = self._write_tmp(target, data)  # creates the key's directory if needed
        try:
            while True:
                entries = self._list_dir(target) or []
                versions = self._versions(entries)
                new = (versions[-1] + 1) if versions else 1
                dest = posixpath.join(target, f"{VERSION_PREFIX}{new:020d}")
                # the raw RENAME: only it returns WebHDFS's boolean (false: version taken)
                if self.client._rename(tmp, destination=dest).json()["boolean"]:
                    break
                # a concurrent writer took that version number: take the next one
        except BaseException:
            self._discard(tmp)
            raise
        for old in versions:
            if old < new:
                self._discard(posixpath.join(target, f"{VERSION_PREFIX}{old:020d}"))

    def get_object(self, key: str) -> bytes:
        """The bytes under ``key``; SnapshotNotFoundError if absent."""
        path = self._path(key)
        if key.startswith(VERSIONED_PREFIX):
            return self._retry(f"get {key!r}", lambda: self._get_versioned(key, path))
        return self._retry(f"get {key!r}", lambda: self._read(key, path))

    def _read(self, key: str, path: str) -> bytes:
        from hdfs import HdfsError

        try:
            with self.client.read(path) as reader:
                data: bytes = reader.read()
            self._root_seen = True
            return data
        except HdfsError as exc:
            if exc.exception == "FileNotFoundException":
                raise SnapshotNotFoundError(f"no object {key!r} in {self.uri}") from None
            raise

    def _get_versioned(self, key: str, path: str) -> bytes:
        for _ in range(10):
            entries = self._list_dir(path)
            versions = self._versions(entries or [])
            if not versions:
                raise SnapshotNotFoundError(f"no object {key!r} in {self.uri}")
            try:
                return self._read(key, posixpath.join(path, f"{VERSION_PREFIX}{versions[-1]:020d}"))
            except SnapshotNotFoundError:
                continue  # superseded and cleaned up between list and open: re-list
        raise BackendError(f"state backend {self.uri}: {key!r} kept changing while read")

    def _walk(self, rel: str, prefix: str, must_exist: bool) -> Iterator[tuple[str, str]]:
        """Yield ``(key, kind)`` under relative dir ``rel`` whose keys may match ``prefix``;
        kind is "file" or "versioned" (a versioned object's directory). ``must_exist``:
        ``rel`` is known to exist (its parent listed it, or it is the root and was seen),
        so a 404 listing it is :class:`_ListingIncomplete`, not an empty directory."""
        path = posixpath.join(self.root, rel) if rel else self.root
        entries = self._list_dir(path)
        if entries is None:
            if must_exist:
                raise _ListingIncomplete(
                    f"listing {path} answered 404 (FileNotFoundException) although it "
                    "exists: the listing would be incomplete, so it is not used")
            return
        for name, status in entries:
            if name.startswith(TMP_PREFIX):
                continue
            key = f"{rel}/{name}" if rel else name
            if status["type"] == "FILE":
                if key.startswith(prefix):
                    yield key, "file"
                continue
            if not (key.startswith(prefix) or prefix.startswith(key + "/")):
                continue  # nothing under this directory can match
            if key.startswith(VERSIONED_PREFIX) and key.startswith(prefix):
                children = self._list_dir(posixpath.join(self.root, key)) or []
                if self._versions(children):
                    yield key, "versioned"
                    continue
            yield from self._walk(key, prefix, must_exist=True)

    def _start_dir(self, prefix: str) -> str:
        return prefix.rsplit("/", 1)[0] if "/" in prefix else ""

    def list_objects(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix`` (temp files and old versions excluded)."""
        start = self._start_dir(prefix)
        return self._retry(f"list {prefix!r}", lambda: [
            k for k, _ in self._walk(start, prefix, must_exist=not start and self._root_seen)])

    def delete_objects(self, prefix: str) -> None:
        """Delete every key starting with ``prefix`` (whole directories when they match)."""
        start = self._start_dir(prefix)

        def run() -> None:
            base = posixpath.join(self.root, start) if start else self.root
            if start and prefix == start + "/":
                self.client.delete(base, recursive=True)  # every key under it matches
                return
            entries = self._list_dir(base)
            if entries is None:
                return
            for name, _status in entries:
                key = f"{start}/{name}" if start else name
                if key.startswith(prefix):
                    self.client.delete(posixpath.join(self.root, key), recursive=True)
                elif prefix.startswith(key + "/"):
                    for sub, _kind in self._walk(key, prefix, must_exist=False):
                        self.client.delete(posixpath.join(self.root, sub), recursive=True)

        self._retry(f"delete {prefix!r}", run)

    def close(self) -> None:
        """Close the HTTP session."""
        session = getattr(self.client, "_session", None)
        if session is not None:
            session.close()
