"""The part-file layout of a :class:`~jstormpy.connectors.sinks.FileSink` directory.

Names of committed parts, durable directory operations, and the readers of committed
output (:func:`committed_files`, :func:`read_committed`). See ``sinks.py`` for the layout.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jstormpy.api.errors import SinkError

__all__ = ["committed_files", "read_committed"]

PART_RE = re.compile(r"^part-(\d{10,})-(\d{5,})\.(jsonl|parquet)$")
WORK_RE = re.compile(r"^part-(\d+)-(\d+)\.(jsonl|parquet)(?:\..*)?$")


def part_name(checkpoint_id: int, task_id: int, fmt: str) -> str:
    return f"part-{checkpoint_id:010d}-{task_id:05d}.{fmt}"


def fsync_dir(path: str) -> None:
    """fsync a directory so renames/links/unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def unlink_missing_ok(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True



def committed_names(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if PART_RE.match(n))


def parts_after(names: Iterable[str], checkpoint_id: int) -> list[str]:
    """The part files among ``names`` committed for a checkpoint above ``checkpoint_id``:
    the names a run restored from ``checkpoint_id`` would take again."""
    return sorted(n for n in names
                  if (m := PART_RE.match(n)) is not None and int(m.group(1)) > checkpoint_id)


def committed_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The committed part files of a :class:`FileSink` directory, in (checkpoint, task) order.

    Raises:
        SinkError: ``directory`` does not exist or cannot be listed.
    """
    root = Path(directory)
    try:
        names = os.listdir(root)
    except OSError as exc:
        raise SinkError(f"cannot list FileSink output directory {os.fspath(root)!r}: "
                        f"{exc.strerror or exc}") from exc
    parts = []
    for name in names:
        m = PART_RE.match(name)
        if m:
            parts.append((int(m.group(1)), int(m.group(2)), name))
    parts.sort()
    return [root / name for _c, _t, name in parts]


def read_committed(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every committed record of a :class:`FileSink` directory.

    Part files are read in (checkpoint id, task id) order, records within a file in arrival
    order. JSON-lines and Parquet parts are both read. Staged and in-progress files are
    never read.

    Raises:
        SinkError: The directory is missing or a part file cannot be read or decoded.
    """
    records: list[dict[str, Any]] = []
    for path in committed_files(directory):
        try:
            if path.suffix == ".parquet":
                import pyarrow.parquet as pq

                records.extend(pq.read_table(path).to_pylist())
            else:
                with open(path, encoding="utf-8") as fh:
                    records.extend(json.loads(line) for line in fh if line.strip())
        except (OSError, ValueError) as exc:
            raise SinkError(f"cannot read committed part file {os.fspath(path)!r}: "
                            f"{exc}") from exc
    return records
