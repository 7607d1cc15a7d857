"""The users' testing kit: a replayable list source and a sink that collects committed output.

:class:`TestingSource` emits a list of items (optionally failing once after ``fail_after``
of them, to exercise recovery); :class:`TestingSink` is a :class:`~jstormpy.FileSink`
into a private temporary directory whose :meth:`TestingSink.items` reads back what was
committed. Both work the same under :func:`jstormpy.testing.run_inline` (one process) and
under ``LocalCluster`` (worker processes on this machine): the failure marker and the
output live in files, not in the process.

Example:
    >>> from jstormpy.dataflow import Dataflow
    >>> from jstormpy.testing import TestingSink, TestingSource, run_inline
    >>> flow = Dataflow("double")
    >>> out = TestingSink()
    >>> flow.source("in", TestingSource([1, 2, 3])).map(lambda r: r["value"] * 2) \\
    ...     .sink("out", out)
    >>> sorted(r["value"] for r in run_inline(flow))
    [2, 4, 6]
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

from jstormpy.api.component import Spout, TopologyContext
from jstormpy.api.errors import JStormError
from jstormpy.connectors.file_parts import read_committed
from jstormpy.connectors.sinks import FileSink
from jstormpy.temp_dirs import process_temp_dir


class TestingSourceFailure(JStormError):
    """The failure a :class:`TestingSource` injects once, after ``fail_after`` items."""

    __test__ = False  # not a pytest test class


class TestingSource(Spout):
    """A replayable spout over ``items``: ``batch_size`` items per ``next_tuple``.

    Dict items are emitted with their keys as the fields (every item must have the keys
    of the first); any other item as the one field ``value``, so a dataflow source sees
    ``{"value": item}``. The position (items emitted) is the snapshot, so a restore
    replays exactly what followed the checkpoint. With parallelism ``n``, task ``i``
    emits items ``i, i + n, i + 2n, ...``.

    ``fail_after=N`` raises :class:`TestingSourceFailure` once, when a task has emitted
    ``N`` items (counted per task): the engine rolls back to the last completed checkpoint
    and the source replays from there. "Once" holds across worker processes: a marker
    file in a private temporary directory records that the failure happened (removed
    when the process that made the source exits).

    Example:
        >>> src = TestingSource([{"user": "a", "n": 1}, {"user": "b", "n": 2}])
        >>> src.outputs
        ('user', 'n')
    """

    __test__ = False  # not a pytest test class

    def __init__(self, items: Sequence[Any], batch_size: int = 1,
                 fail_after: int | None = None) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise JStormError(f"TestingSource batch_size={batch_size!r} must be an int >= 1")
        if fail_after is not None and (not isinstance(fail_after, int) or fail_after < 0):
            raise JStormError(f"TestingSource fail_after={fail_after!r} must be an int >= 0 "
                              "or None")
        self.items = list(items)
        self.batch_size = batch_size
        self.fail_after = fail_after
        first = self.items[0] if self.items else None
        self.as_dicts = isinstance(first, dict)
        self.outputs = tuple(first) if isinstance(first, dict) else ("value",)  # type: ignore[misc]
        for item in self.items:
            if self.as_dicts and (not isinstance(item, dict) or tuple(item) != self.outputs):
                raise JStormError(f"TestingSource: every dict item needs the keys "
                                  f"{self.outputs} of the first, in that order; got {item!r}")
        self.marker = (os.path.join(process_temp_dir("jstorm-testing-source-"),
                                    "failed") if fail_after is not None else None)
        self.emitted = 0
        self.mine: list[Any] = self.items

    @property
    def failed(self) -> bool:
        """Whether the injected failure happened (in any process)."""
        return self.marker is not None and os.path.exists(self.marker)

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Take this task's share of the items (keeps a restored position)."""
        self.mine = self.items[context.task_index::context.parallelism]

    def snapshot(self) -> dict[str, int]:
        """The position: ``{"emitted": items this task emitted}``."""
        return {"emitted": self.emitted}

    def restore(self, snap: dict[str, int]) -> None:
        """Rewind to a position returned by :meth:`snapshot`."""
        self.emitted = int(snap["emitted"])

    def next_tuple(self) -> None:
        """Emit up to ``batch_size`` items; inject the failure once; finish at the end."""
        end = min(len(self.mine), self.emitted + self.batch_size)
        for item in self.mine[self.emitted:end]:
            if self.fail_after is not None and self.emitted >= self.fail_after:
                self._fail_once()
            self.emit(tuple(item.values()) if self.as_dicts else (item,))
            self.emitted += 1
        if self.emitted >= len(self.mine) and not self.finished:
            self.finish()

    def _fail_once(self) -> None:
        assert self.marker is not None
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        raise TestingSourceFailure(f"TestingSource: injected failure after {self.emitted} "
                                   "items")


class TestingSink(FileSink):
    """A :class:`~jstormpy.FileSink` into a private temporary directory (or ``directory``);
    :meth:`items` returns the committed records. The private directory is removed when
    the process that made the sink exits; a ``directory`` you pass is left alone.

    Records are what the sink wrote: a dataflow item as its record (a dict as is, a
    NamedTuple as ``_asdict()``, anything else as ``{"value": item}``), a plain
    topology's tuple as ``{field: value}``, each read back from JSON (tuples come back as
    lists). Output a checkpoint has not committed is never seen.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        super().__init__(directory if directory is not None
                         else process_temp_dir("jstorm-testing-sink-"))

    def items(self) -> list[dict[str, Any]]:
        """Every committed record, in (checkpoint, task) order; arrival order within."""
        if not os.path.isdir(self.directory):
            return []
        return read_committed(self.directory)

    def clear(self) -> None:
        """Remove everything written so far (committed or not): the next run starts empty."""
        shutil.rmtree(self.directory, ignore_errors=True)
        os.makedirs(self.directory, exist_ok=True)
