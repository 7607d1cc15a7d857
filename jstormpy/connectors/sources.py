"""Replayable spouts: line-by-line files and a deterministic keyed sequence generator.

Both implement the replayable-source contract: ``snapshot()`` returns the position reached
as plain data (picklable, JSON-friendly), ``restore(snap)`` rewinds to it. ``restore`` runs
before ``open``, so defaults are set in ``__init__`` and ``open`` never resets the position.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import time
from typing import IO, Any

from jstormpy.api.component import Spout, TopologyContext
from jstormpy.api.errors import SourceError

__all__ = ["FileSpout", "SequenceSpout"]

_log = logging.getLogger(__name__)


def _expand(paths: str | os.PathLike[str] | list[str]) -> list[str]:
    """Glob-expand ``paths`` (sorted per pattern, duplicates dropped, order kept)."""
    patterns = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not patterns:
        raise SourceError("FileSpout needs at least one path or glob pattern, got none")
    files: dict[str, None] = {}
    for entry in patterns:
        pattern = os.fspath(entry)
        if glob.has_magic(pattern):
            matched = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
            if not matched:
                raise SourceError(f"FileSpout: glob {pattern!r} matches no file")
        elif os.path.isfile(pattern):
            matched = [pattern]
        else:
            raise SourceError(f"FileSpout: input file {pattern!r} does not exist "
                              "(or is not a regular file)")
        for path in matched:
            files.setdefault(path)
    return list(files)


class FileSpout(Spout):
    """Emit one tuple ``(line,)`` per line of one or more text files (UTF-8).

    Lines are emitted without their line ending (``\\n`` or ``\\r\\n``). Task ``i`` of ``n``
    reads the files whose index in the expanded, per-pattern sorted file list satisfies
    ``index % n == i``, one file after the other. The position (byte offset per file and the
    current file) is snapshotted, so a restore resumes exactly after the last emitted line.
    The file list must not change between a snapshot and its restore.

    Each file is a split and its byte offset the split's offset (the split contract of
    :class:`~jstormpy.api.component.Spout`), so the spout's parallelism can change with
    ``jstorm rescale``: every file continues on its new owner after the last line read.

    Args:
        paths: A file path, a glob pattern, or a list of either.
        field: The name of the single output field.
        batch: Most lines emitted per ``next_tuple`` call.

    Example:
        >>> spout = FileSpout("/data/logs/*.txt", field="text")  # doctest: +SKIP
    """

    redistribute_state = Spout.redistribute_splits  # rescalable: files are the splits

    def __init__(self, paths: str | os.PathLike[str] | list[str], field: str = "line",
                 batch: int = 256) -> None:
        if batch < 1:
            raise SourceError(f"FileSpout batch={batch!r} must be >= 1")
        self.paths = paths
        self.field = field
        self.batch = batch
        self.outputs = (field,)  # type: ignore[misc]  # per-instance field name
        self._files: list[str] = []
        self._offsets: dict[str, int] = {}
        self._file_index = 0
        self._fh: IO[bytes] | None = None
        self._fh_path: str | None = None

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Resolve this task's share of the files (keeps any restored position).

        Raises:
            SourceError: A path does not exist or a glob matches nothing.
        """
        every = _expand(self.paths)
        n = context.parallelism
        self._files = [p for i, p in enumerate(every) if i % n == context.task_index]
        mine = set(self._files)  # after a rescale: offsets of every file; keep our own
        self._offsets = {p: o for p, o in self._offsets.items() if p in mine}
        _log.debug("FileSpout task %s reads %d of %d file(s)", context.task_id,
                   len(self._files), len(every))

    def snapshot(self) -> dict[str, Any]:
        """The position: ``{"offsets": {path: byte_offset}, "file_index": i}``."""
        return {"offsets": dict(self._offsets), "file_index": self._file_index}

    def restore(self, snap: dict[str, Any]) -> None:
        """Rewind to a position returned by :meth:`snapshot`."""
        self._close_file()
        self._offsets = {str(k): int(v) for k, v in snap.get("offsets", {}).items()}
        self._file_index = int(snap.get("file_index", 0))

    def next_tuple(self) -> None:
        """Emit up to ``batch`` lines; call ``finish()`` after the last line of the last file."""
        budget = self.batch
        while budget > 0:
            if self._file_index >= len(self._files):
                self._close_file()
                if not self.finished:
                    self.finish()
                return
            path = self._files[self._file_index]
            fh = self._file(path)
            offset = self._offsets.get(path, 0)
            try:
                while budget > 0:
                    raw = fh.readline()
                    if not raw:
                        break
                    offset += len(raw)
                    if raw.endswith(b"\n"):
                        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
                    self.emit((raw.decode("utf-8"),))
                    self._offsets[path] = offset
                    budget -= 1
            except UnicodeDecodeError as exc:
                raise SourceError(f"FileSpout: {path!r} near byte {offset} is not valid "
                                  f"UTF-8: {exc.reason}") from exc
            except OSError as exc:
                raise SourceError(f"FileSpout cannot read {path!r}: {exc}") from exc
            if budget > 0:  # end of this file
                self._offsets[path] = offset
                self._close_file()
                self._file_index += 1

    def _file(self, path: str) -> IO[bytes]:
        if self._fh is None or self._fh_path != path:
            self._close_file()
            try:
                fh = open(path, "rb")  # noqa: SIM115 - kept open across calls
                fh.seek(self._offsets.get(path, 0))
            except OSError as exc:
                raise SourceError(f"FileSpout cannot open {path!r}: {exc}") from exc
            self._fh, self._fh_path = fh, path
        return self._fh

    def _close_file(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._fh, self._fh_path = None, None

    def close(self) -> None:
        """Close the current file."""
        self._close_file()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fh"], state["_fh_path"] = None, None
        return state


class SequenceSpout(Spout):
    """Deterministic keyed events ``(key, seq, value)`` for exactly-once checks.

    There are ``keys`` keys named ``f"{key_prefix}{i}"``; every key gets the sequence numbers
    ``0 .. per_key - 1`` in increasing order, with ``value = seq * 7 % 13``. Task ``i`` of
    ``n`` owns the keys whose index satisfies ``index % n == i`` and interleaves them
    round-robin. The position is one counter, so snapshots are tiny and replays identical.
    Feed the sink's output to :func:`jstormpy.testing.semantics.check_sequences` with
    :meth:`expected_counts`.

    Args:
        keys: Number of distinct keys.
        per_key: Events per key.
        batch: Most events emitted per ``next_tuple`` call.
        key_prefix: Prefix of the key names.
        rate_per_s: If set, the most events per second this task emits (a call never
            sleeps more than a few milliseconds).
    """

    outputs = ("key", "seq", "value")

    def __init__(self, keys: int = 10, per_key: int = 1000, batch: int = 100,
                 key_prefix: str = "k", rate_per_s: float | None = None) -> None:
        for name, value in (("keys", keys), ("per_key", per_key), ("batch", batch)):
            least = 0 if name == "per_key" else 1
            if not isinstance(value, int) or value < least:
                raise SourceError(f"SequenceSpout {name}={value!r} must be an int >= {least}")
        if rate_per_s is not None and not rate_per_s > 0:
            raise SourceError(f"SequenceSpout rate_per_s={rate_per_s!r} must be > 0 or None")
        self.keys = keys
        self.per_key = per_key
        self.batch = batch
        self.key_prefix = key_prefix
        self.rate_per_s = rate_per_s
        self._owned: list[str] = [self.key(i) for i in range(keys)]
        self._emitted = 0
        self._rate_start: float | None = None
        self._rate_base = 0

    def key(self, index: int) -> str:
        """The name of key number ``index``."""
        return f"{self.key_prefix}{index}"

    def expected_counts(self) -> dict[str, int]:
        """``{key: per_key}`` over all keys (all tasks): what a correct output contains."""
        return {self.key(i): self.per_key for i in range(self.keys)}

    @staticmethod
    def value_of(seq: int) -> int:
        """The deterministic value emitted with ``seq``."""
        return seq * 7 % 13

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Take this task's share of the keys (keeps any restored position)."""
        n = context.parallelism
        self._owned = [self.key(i) for i in range(self.keys) if i % n == context.task_index]
        self._rate_start = None

    def snapshot(self) -> dict[str, int]:
        """The position: ``{"emitted": events emitted by this task so far}``."""
        return {"emitted": self._emitted}

    def restore(self, snap: dict[str, int]) -> None:
        """Rewind to a position returned by :meth:`snapshot`."""
        self._emitted = int(snap["emitted"])
        self._rate_start = None

    @property
    def total(self) -> int:
        """Events this task emits in all."""
        return len(self._owned) * self.per_key

    def next_tuple(self) -> None:
        """Emit the next events (up to ``batch``, fewer when throttled); finish at the end."""
        total = self.total
        if self._emitted >= total:
            if not self.finished:
                self.finish()
            return
        count = min(self.batch, total - self._emitted)
        if self.rate_per_s is not None:
            count = min(count, self._allowance())
            if count <= 0:
                return
        owned = self._owned
        n_owned = len(owned)
        for j in range(self._emitted, self._emitted + count):
            seq = j // n_owned
            self.emit((owned[j % n_owned], seq, seq * 7 % 13))
            self._emitted = j + 1
        if self._emitted >= total:
            self.finish()

    def _allowance(self) -> int:
        """Events allowed now by the rate limit; sleeps at most ~5 ms when none is."""
        assert self.rate_per_s is not None
        now = time.monotonic()
        if self._rate_start is None:
            self._rate_start, self._rate_base = now, self._emitted
        allowed = math.floor((now - self._rate_start) * self.rate_per_s) + 1
        allowed -= self._emitted - self._rate_base
        if allowed <= 0:
            wait = (self._emitted - self._rate_base) / self.rate_per_s - (now - self._rate_start)
            time.sleep(min(max(wait, 0.0), 0.005))
        return allowed
