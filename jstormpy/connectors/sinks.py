"""Transactional file sinks: exactly-once output to a directory (JSON lines or Parquet).

Layout of a :class:`FileSink` directory::

    part-0000000007-00003.jsonl        committed: transaction (checkpoint) 7 of task 3
    _staging/t00003-g2-<pid>-<random>/part-0000000008-00003.jsonl
                                       pre-committed (durable, invisible) transaction 8,
                                       staged by the incarnation of task 3 that owns
                                       this directory (its fencing token: generation 2 +
                                       process + random)
    _inprogress/part-0000000009-00003.jsonl.<pid>-g<generation>-<random>
                                       the open transaction 9 of one process

Readers (including Spark and Hadoop input formats) ignore names starting with ``_`` or
``.``, so only committed part files are ever visible. Every step is a single atomic
rename (or link) followed by an fsync of the directories involved.

Fencing: each incarnation of a task stages into its own directory. A new incarnation
(``prepare``) adopts the staged files of every older one and removes their directories,
so an older incarnation that wakes up later (a frozen "zombie") can neither stage nor
commit: its directory is gone and every such step fails with
:class:`~jstormpy.api.errors.FencedError`.
"""

from __future__ import annotations

import errno
import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import FencedError, SinkError
from jstormpy.barrier.twophase import Sink
from jstormpy.connectors.file_parts import (
    PART_RE,
    WORK_RE,
    committed_files,
    part_name,
    parts_after,
    read_committed,
)
from jstormpy.connectors.jsonl import encode_rows, encode_value
from jstormpy.connectors.sink_fs import OS_SINK_FILESYSTEM, NewFile, SinkFilesystem

__all__ = ["FORMATS", "FileSink", "committed_files", "read_committed"]

_log = logging.getLogger(__name__)

FORMATS = ("jsonl", "parquet")
_LINES_PER_WRITE = 2048
"""jsonl records buffered before one write to the in-progress file."""
_BLOCK_CHARS = 1 << 20
"""Batch-encoded jsonl text buffered before one write (fewer, larger writes)."""
_encode_json = encode_value
"""Output formats :class:`FileSink` can write."""

STAGING_DIR = "_staging"
INPROGRESS_DIR = "_inprogress"

def _count_parts(names: list[str], noun: str) -> str:
    """``1 part file``, ``3 part files``."""
    return f"{len(names)} {noun}{'' if len(names) == 1 else 's'}"


def _name_parts(names: list[str]) -> str:
    """One file by its name; more as the first and last of their sorted names."""
    return names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]}"


class FileSink(Sink):
    """Exactly-once sink writing one file per (checkpoint, task) into ``directory``.

    Each input tuple becomes one record whose keys are the tuple's field names
    (``tup.as_dict()``), in arrival order. Committed output is
    ``directory/part-{checkpoint_id:010d}-{task_id:05d}.{format}``; empty transactions
    produce no file. Use :func:`read_committed` to read the output back.

    Args:
        directory: Output directory (created if missing). Every task of the component
            writes into the same directory; file names carry the task id.
        format: ``"jsonl"`` (one compact JSON object per line) or ``"parquet"`` (one
            Parquet file per transaction, columns named after the fields; rows of the open
            transaction are buffered in memory until the barrier).

    Raises:
        SinkError: ``format`` is not one of :data:`FORMATS`.

    Example:
        >>> sink = FileSink("/tmp/out", format="jsonl")  # doctest: +SKIP
        >>> builder.set_bolt("out", sink).shuffle_grouping("count")  # doctest: +SKIP
    """

    fs: SinkFilesystem = OS_SINK_FILESYSTEM
    """The filesystem every step goes through (``connectors/sink_fs.py``): the os calls;
    the simulator's is simulated."""

    def __init__(self, directory: str | os.PathLike[str],
                 format: str = "jsonl") -> None:  # noqa: A002 - public keyword name
        if format not in FORMATS:
            raise SinkError(f"FileSink format {format!r} is not supported; use one of {FORMATS}")
        self.directory = os.fspath(directory)
        self.format = format
        self._task_id: int | None = None
        self._token = ""
        self._txn: int | None = None
        self._fh: NewFile | None = None
        self._inprogress_path: str | None = None
        self._rows: list[dict[str, Any]] = []
        self._lines: list[str] = []
        """jsonl lines not yet written to the in-progress file (written in blocks)."""
        self._blocks: list[str] = []
        """Batch-encoded jsonl text not yet written (ahead of ``_lines``)."""
        self._block_chars = 0
        self._count = 0
        self._empty: set[int] = set()
        self._exactly = True

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fh"] = None  # an open file handle cannot be shipped; recover() cleans up
        return state

    # ------------------------------------------------------------------ paths & helpers

    @property
    def _staging(self) -> str:
        return os.path.join(self.directory, STAGING_DIR)

    @property
    def _inprogress(self) -> str:
        return os.path.join(self.directory, INPROGRESS_DIR)

    def _task(self) -> int:
        if self._task_id is None:
            raise SinkError("FileSink used before prepare(): the engine must call "
                            "prepare(conf, context) first so the sink knows its task id")
        return self._task_id

    def _name(self, checkpoint_id: int) -> str:
        return part_name(checkpoint_id, self._task(), self.format)

    @property
    def _own(self) -> str:
        """This incarnation's staging directory (named by its fencing token)."""
        return os.path.join(self._staging, f"t{self._task():05d}-{self._token}")

    def _staged_path(self, checkpoint_id: int) -> str:
        return os.path.join(self._own, self._name(checkpoint_id))

    def _fenced(self, action: str) -> FencedError:
        return FencedError(
            f"FileSink task {self._task_id} cannot {action} in {self.directory!r}: a newer "
            f"incarnation of the task took over (its staging directory {self._own!r} was "
            "retired); this instance is a zombie and publishes nothing")

    def _target_path(self, checkpoint_id: int) -> str:
        return os.path.join(self.directory, self._name(checkpoint_id))

    def _logger(self) -> Any:
        return self.log or _log

    def _unlink(self, path: str) -> bool:
        """Remove ``path``; False if it was not there."""
        try:
            self.fs.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def _committed_names(self) -> list[str]:
        return sorted(n for n in self.fs.listdir(self.directory) if PART_RE.match(n))

    def _new_token(self, context: TopologyContext) -> str:
        """This incarnation's fencing token (names its staging directory)."""
        return f"{os.getpid()}-g{context.generation}-{uuid.uuid4().hex[:8]}"

    def _fail(self, action: str, exc: OSError) -> SinkError:
        return SinkError(
            f"FileSink task {self._task_id} cannot {action} in {self.directory!r}: "
            f"{exc.strerror or exc} ({exc.filename or self.directory})"
        )

    # ------------------------------------------------------------------ lifecycle

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Create the directory layout and remember this task's id.

        Raises:
            SinkError: The directory cannot be created or is not writable.
        """
        self._task_id = context.task_id
        # at_most_once restores nothing: recover(None) is also what its restarts look like
        self._exactly = conf.get("guarantee", "exactly_once") != "at_most_once"
        self._token = self._new_token(context)
        try:
            for path in (self.directory, self._staging, self._inprogress):
                self.fs.makedirs(path)
        except OSError as exc:
            raise self._fail("create its output directories", exc) from exc
        for path in (self.directory, self._staging, self._inprogress):
            if not self.fs.writable(path):
                raise SinkError(f"FileSink task {self._task_id}: directory {path!r} is not "
                                "writable; choose another directory or fix its permissions")
        try:
            self.fs.mkdir(self._own)
            self.fs.fsync_dir(self._staging)
            self._adopt_staged()
        except OSError as exc:
            raise self._fail("take over the task's staged transactions", exc) from exc

    def _adopt_staged(self) -> None:
        """Move every staged file of this task out of older incarnations' directories
        (and the flat layout of earlier versions) into ours, then remove those
        directories: whatever an older incarnation still tries afterwards fails."""
        task = self._task()
        mine = os.path.basename(self._own)
        prefix = f"t{task:05d}-"
        fs = self.fs
        for name in sorted(fs.listdir(self._staging)):
            path = os.path.join(self._staging, name)
            if name == mine:
                continue
            if name.startswith(prefix) and fs.is_dir(path):
                for _ in range(100):  # a zombie may still be renaming into it
                    for part in fs.listdir(path):
                        fs.replace(os.path.join(path, part), os.path.join(self._own, part))
                    try:
                        fs.rmdir(path)
                        break
                    except FileNotFoundError:
                        break
                    except OSError as exc:
                        if exc.errno != errno.ENOTEMPTY:
                            raise
            else:
                m = WORK_RE.match(name)
                if m and int(m.group(2)) == task and fs.is_file(path):
                    fs.replace(path, os.path.join(self._own, name))
        fs.fsync_dir(self._own)
        fs.fsync_dir(self._staging)

    def cleanup(self) -> None:
        """Close the open in-progress file (its content is discarded by the next recover)."""
        self._close_file()

    def _close_file(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError as exc:
                self._logger().warning("FileSink: closing %s failed: %s",
                                       self._inprogress_path, exc)
            self._fh = None

    # ------------------------------------------------------------------ transactions

    def begin(self, checkpoint_id: int) -> None:
        """Open transaction ``checkpoint_id`` (its file is created on the first write).

        Raises:
            SinkError: Another transaction is still open.
        """
        self._task()
        if self._txn is not None:
            raise SinkError(f"FileSink task {self._task_id}: begin({checkpoint_id}) while "
                            f"transaction {self._txn} is still open; pre_commit or abort it")
        self._txn = checkpoint_id
        self._rows = []
        self._lines = []
        self._blocks = []
        self._block_chars = 0
        self._count = 0
        self._inprogress_path = os.path.join(
            self._inprogress, f"{self._name(checkpoint_id)}.{self._token}")

    def write(self, tup: Tuple) -> None:
        """Append ``tup`` (as ``{field: value}``) to the open transaction.

        Raises:
            SinkError: No transaction is open, a value cannot be encoded as JSON, or the
                in-progress file cannot be written (jsonl lines are written in blocks of
                2048 and at ``pre_commit``, so an I/O error surfaces at the write or
                ``pre_commit`` that writes the block).
        """
        if self._txn is None:
            raise SinkError(f"FileSink task {self._task_id}: write() with no open "
                            "transaction; the engine must call begin() first")
        record = tup.as_dict()
        if self.format == "parquet":
            self._rows.append(record)
            self._count += 1
            return
        try:
            line = _encode_json(record)
        except (TypeError, ValueError) as exc:
            raise SinkError(f"FileSink cannot encode {tup!r} as JSON: {exc}") from exc
        if self._fh is None:  # the in-progress file exists from the first record on
            try:
                assert self._inprogress_path is not None
                self._fh = self.fs.create(self._inprogress_path)
            except OSError as exc:
                raise self._fail(f"write transaction {self._txn}", exc) from exc
        lines = self._lines
        lines.append(line)
        self._count += 1
        if len(lines) >= _LINES_PER_WRITE:
            self._write_lines()

    def execute_batch(self, batch: Any) -> None:
        """Batch path (the engine calls it once per channel batch): :meth:`write_batch`,
        unless a subclass overrides ``execute`` (then tuple by tuple through it)."""
        if type(self).execute is Sink.execute:
            self.write_batch(batch)
        else:
            self._write_each(batch, self.execute)

    def write_batch(self, batch: Any) -> None:
        """The same records as :meth:`write` per tuple, jsonl-encoded column by column
        (``connectors/jsonl.py``).

        A subclass that overrides ``write``, the parquet format, rows of another shape
        and values the fast encoder refuses all go tuple by tuple; a record that cannot
        be encoded is skipped while the rest of the batch is written, then its
        :class:`SinkError` is raised (as ``write`` would have raised it for that tuple).
        """
        text = None
        if self.format == "jsonl" and self._txn is not None and \
                type(self).write is FileSink.write:
            try:
                text = encode_rows(batch.rows, batch.field_index)
            except (TypeError, ValueError):
                text = None  # found again, tuple by tuple, below
        if text is None:
            self._write_each(batch, self.write)
            return
        if self._fh is None:  # the in-progress file exists from the first record on
            try:
                assert self._inprogress_path is not None
                self._fh = self.fs.create(self._inprogress_path)
            except OSError as exc:
                raise self._fail(f"write transaction {self._txn}", exc) from exc
        blocks = self.__dict__.setdefault("_blocks", [])
        if self._lines:  # earlier single writes stay ahead of this batch
            blocks.append("\n".join(self._lines) + "\n")
            self._lines = []
        blocks.append(text)
        self._block_chars = self.__dict__.get("_block_chars", 0) + len(text)
        self._count += len(batch)
        if self._block_chars >= _BLOCK_CHARS:
            self._write_lines()

    @staticmethod
    def _write_each(batch: Any, write: Callable[[Tuple], None]) -> None:
        """Tuple by tuple through ``write``; unencodable records are skipped and the
        first one's error raised after the rest of the batch was written."""
        first: SinkError | None = None
        skipped = 0
        for tup in batch:
            try:
                write(tup)
            except SinkError as exc:
                if not isinstance(exc.__cause__, (TypeError, ValueError)):
                    raise  # no transaction or I/O: the rest would fail too
                skipped += 1
                first = first or exc
        if first is not None:
            if skipped > 1:
                raise SinkError(f"{first} (and {skipped - 1} more record(s) of this batch "
                                "could not be encoded)") from first.__cause__
            raise first

    def _write_lines(self) -> None:
        """Append the buffered jsonl lines to the in-progress file (one write call)."""
        lines = self.__dict__.get("_lines")
        blocks = self.__dict__.get("_blocks")
        if not lines and not blocks:
            return
        text = "".join(blocks) if blocks else ""
        if lines:
            text += "\n".join(lines) + "\n"  # single writes come after every block
        self._lines = []
        self._blocks = []
        self._block_chars = 0
        try:
            if self._fh is None:
                assert self._inprogress_path is not None
                self._fh = self.fs.create(self._inprogress_path)
            self._fh.write(text.encode("utf-8"))
        except OSError as exc:
            raise self._fail(f"write transaction {self._txn}", exc) from exc

    def pre_commit(self, checkpoint_id: int) -> None:
        """Flush, fsync and atomically move the open transaction into ``_staging/``.

        Raises:
            SinkError: ``checkpoint_id`` is not the open transaction, or I/O failed.
        """
        if self._txn != checkpoint_id:
            raise SinkError(f"FileSink task {self._task_id}: pre_commit({checkpoint_id}) "
                            f"but the open transaction is {self._txn}")
        inprogress = self._inprogress_path
        assert inprogress is not None
        try:
            if self.format == "parquet":
                if self._rows:
                    self._write_parquet(inprogress, self._rows)
                    written = True
                else:
                    written = False
            else:
                self._write_lines()
                written = self._fh is not None
                if self._fh is not None:
                    self._fh.flush()
                    self.fs.fsync(self._fh)
                    self._fh.close()
                    self._fh = None
            if written:
                if not self.fs.is_dir(self._own):
                    raise self._fenced(f"stage transaction {checkpoint_id}")
                try:
                    self.fs.replace(inprogress, self._staged_path(checkpoint_id))
                except FileNotFoundError:  # retired (or our in-progress file removed)
                    raise self._fenced(f"stage transaction {checkpoint_id}") from None
                self.fs.fsync_dir(self._own)
                self.fs.fsync_dir(self._inprogress)
            else:
                self._empty.add(checkpoint_id)
        except OSError as exc:
            raise self._fail(f"stage transaction {checkpoint_id}", exc) from exc
        self._logger().debug("FileSink task %s staged transaction %s (%d records)",
                             self._task_id, checkpoint_id, self._count)
        self._txn = None
        self._rows = []
        self._inprogress_path = None

    def _write_parquet(self, path: str, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns: dict[str, None] = {}
        for row in rows:
            for name in row:
                columns.setdefault(name)
        try:
            table = pa.table({name: [row.get(name) for row in rows] for name in columns})
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SinkError(f"FileSink cannot convert the transaction to Parquet "
                            f"(columns {list(columns)}): {exc}") from exc
        fh = self.fs.create(path)
        try:
            pq.write_table(table, fh)
            fh.flush()
            self.fs.fsync(fh)
        finally:
            fh.close()

    def commit(self, checkpoint_id: int) -> None:
        """Publish staged transaction ``checkpoint_id`` (idempotent).

        The staged file is hard-linked to its final name (which fails if the target exists,
        so a repeated commit never overwrites), the directory fsynced, then the staged name
        removed. Already committed, or nothing staged (empty transaction): no-op.

        Raises:
            SinkError: I/O failed.
        """
        staged = self._staged_path(checkpoint_id)
        target = self._target_path(checkpoint_id)
        try:
            fs = self.fs
            if fs.exists(target):
                # already committed; a staged copy may be left by a commit interrupted
                # between publishing and cleaning up
                if self._unlink(staged):
                    fs.fsync_dir(self._own)
                return
            if not fs.is_dir(self._own):
                raise self._fenced(f"commit transaction {checkpoint_id}")
            if not fs.exists(staged):
                if checkpoint_id not in self._empty:
                    self._logger().info(
                        "FileSink task %s: commit(%s) found nothing staged and nothing "
                        "committed (an empty transaction)", self._task_id, checkpoint_id)
                self._empty.discard(checkpoint_id)
                return
            try:
                fs.link(staged, target)
            except FileExistsError:
                pass  # a concurrent/earlier commit published it
            except FileNotFoundError:  # retired between the check and the link
                raise self._fenced(f"commit transaction {checkpoint_id}") from None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP,
                                     errno.EMLINK, errno.ENOSYS):
                    raise
                # no hard links on this file system: rename (target checked above)
                fs.rename(staged, target)
            fs.fsync_dir(self.directory)
            if self._unlink(staged):
                fs.fsync_dir(self._own)
        except OSError as exc:
            raise self._fail(f"commit transaction {checkpoint_id}", exc) from exc
        self._logger().debug("FileSink task %s committed %s", self._task_id, target)

    def abort(self, checkpoint_id: int) -> None:
        """Discard transaction ``checkpoint_id`` if it is open or staged (never committed)."""
        try:
            if self._txn == checkpoint_id:
                self._close_file()
                if self._inprogress_path is not None:
                    self._unlink(self._inprogress_path)
                self._txn = None
                self._rows = []
                self._lines = []
                self._blocks = []
                self._block_chars = 0
                self._inprogress_path = None
            if self._unlink(self._staged_path(checkpoint_id)):
                self.fs.fsync_dir(self._own)
        except OSError as exc:
            raise self._fail(f"abort transaction {checkpoint_id}", exc) from exc
        self._empty.discard(checkpoint_id)

    def check_fresh_run(self) -> None:
        """Refuse a fresh run into a directory holding an earlier run's committed output.

        Launchers call it before starting a run that does not resume (``recover(None)``
        checks again in the worker).

        Raises:
            SinkError: The directory holds committed part files; the message names it.
        """
        if self.fs.is_dir(self.directory):
            self._refuse_earlier_output()

    def check_savepoint_restore(self, checkpoint_id: int) -> None:
        """Refuse a savepoint restore into a directory holding output committed after the
        savepoint (its checkpoint ``checkpoint_id``).

        The restored run continues checkpoint ids from the savepoint's, so its part files
        would take the names of those files; a commit finding its name taken counts the
        transaction as already committed, and the restored output would be dropped. The
        launcher calls it before the restore changes anything (``prepare_restore``).

        Raises:
            SinkError: Such part files exist; the message names them and what to do.
        """
        if not self.fs.is_dir(self.directory):
            return
        try:
            names = self._committed_names()
        except OSError as exc:
            raise self._fail("list its output directory", exc) from exc
        later = parts_after(names, checkpoint_id)
        if later:
            raise SinkError(
                f"FileSink directory {self.directory!r} holds {_count_parts(later, 'part file')} "
                f"committed after the savepoint's checkpoint {checkpoint_id} "
                f"({_name_parts(later)}); the restored run continues checkpoint ids from "
                f"{checkpoint_id} and would write the same names, so its output would be "
                "dropped. Restore into an empty directory, or move the part files with a "
                f"checkpoint id above {checkpoint_id} away (the restored run writes that "
                "output again)")

    def _refuse_earlier_output(self) -> None:
        try:
            earlier = self._committed_names()
        except OSError as exc:
            raise self._fail("list its output directory", exc) from exc
        if earlier:
            raise SinkError(
                f"FileSink directory {self.directory!r} already holds "
                f"{_count_parts(earlier, 'committed part file')} of an earlier run "
                f"({_name_parts(earlier)}); "
                "a fresh run restarts checkpoint ids at 1 and would collide with "
                f"{'it' if len(earlier) == 1 else 'them'}. "
                "Write to an empty directory, move the old output away, or continue the "
                "earlier run with --resume (LocalCluster.submit(..., resume=True))")

    def recover(self, completed_id: int | None) -> None:
        """Discard this task's in-progress files (any process) and staged files > completed_id.

        Staged files ``<= completed_id`` whose committed file exists are leftovers of an
        interrupted commit and are removed too; any other staged file ``<= completed_id`` is
        kept (and logged), since it may hold data.

        ``completed_id`` None means a fresh run (no checkpoint of this run ever completed,
        so none of its output was committed): committed part files already in the
        directory then belong to an earlier run. Its checkpoint ids would collide with this
        run's (ids restart at 1), so the sink refuses to start rather than mix or lose
        output; nothing is deleted or overwritten.

        Raises:
            SinkError: I/O failed, or a fresh run found an earlier run's committed output.
        """
        task = self._task()
        if completed_id is None and self._exactly:
            self._refuse_earlier_output()
        if self._txn is not None:
            self.abort(self._txn)
        log = self._logger()
        fs = self.fs
        try:
            removed = 0
            for name in fs.listdir(self._inprogress):
                m = WORK_RE.match(name)
                if m and int(m.group(2)) == task:
                    removed += self._unlink(os.path.join(self._inprogress, name))
            if removed:
                fs.fsync_dir(self._inprogress)
            dropped = 0
            for name in fs.listdir(self._own):
                m = WORK_RE.match(name)
                if not m or int(m.group(2)) != task:
                    continue
                checkpoint_id = int(m.group(1))
                path = os.path.join(self._own, name)
                if completed_id is None or checkpoint_id > completed_id:
                    dropped += self._unlink(path)
                elif fs.exists(os.path.join(self.directory, name)):
                    dropped += self._unlink(path)
                else:
                    log.warning("FileSink task %s: staged transaction %s (<= restored "
                                "checkpoint %s) was never committed; keeping %s",
                                task, checkpoint_id, completed_id, path)
            if dropped:
                fs.fsync_dir(self._own)
        except OSError as exc:
            raise self._fail("discard leftover transactions", exc) from exc
        if removed or dropped:
            log.info("FileSink task %s recovered to checkpoint %s: discarded %d in-progress "
                     "and %d staged file(s)", task, completed_id, removed, dropped)
