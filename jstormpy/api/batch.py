"""The columnar view of a batch of tuples (the opt-in batch API, DESIGN §11).

A bolt that defines ``execute_batch(batch)`` gets one :class:`Batch` per received
channel batch instead of one ``execute(tup)`` call per tuple. ``batch["word"]`` is the
column of field ``word`` (a list, built once and cached), ``len(batch)`` the number of
tuples, and iterating yields ordinary :class:`~jstormpy.api.component.Tuple` objects, so
per-tuple code can be reused inside a batch bolt.

A batch never spans a barrier, a watermark or the end of a stream: it is exactly the
tuples one upstream task sent on one channel between two such markers (or fewer).

Emitting goes the other way: :func:`rows_from_columns` turns what a component passes to
``emit_batch`` (``{"field": column, ...}``, one sequence per declared field in order, or a
received ``Batch``) into rows, checking the field names and column lengths.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

from jstormpy.api.component import DEFAULT_STREAM, Tuple
from jstormpy.api.errors import TopologyError


class Batch:
    """Tuples of one channel between two markers, seen column by column.

    Example:
        >>> b = Batch([("cat", 1), ("dog", 2)], {"word": 0, "n": 1}, "split", "default", 3)
        >>> len(b), b.fields, b["word"], b.source, [t["n"] for t in b]
        (2, ('word', 'n'), ['cat', 'dog'], 'split', [1, 2])
    """

    __slots__ = ("_columns", "_index", "rows", "source", "stream", "task", "_tuple_cls")

    def __init__(self, rows: Sequence[Sequence[Any]], index: Mapping[str, int], source: str,
                 stream: str = DEFAULT_STREAM, task: int = -1,
                 tuple_cls: type[Tuple] | None = None) -> None:
        self.rows = rows
        """The tuples' values, one sequence per tuple (row-major)."""
        self._index = index
        self.source = source
        self.stream = stream
        self.task = task
        self._columns: dict[int, list[Any]] = {}
        self._tuple_cls = tuple_cls

    @property
    def fields(self) -> tuple[str, ...]:
        """The stream's field names, in declared order."""
        return tuple(sorted(self._index, key=self._index.__getitem__))

    @property
    def field_index(self) -> Mapping[str, int]:
        """Each field's position in a row (shared with the channel's tuples; do not modify)."""
        return self._index

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def tuple_class(self) -> type[Tuple]:
        """The one-argument ``Tuple`` class of this batch's channel (``cls(values)``)."""
        cls = self._tuple_cls
        if cls is None:
            cls = self._tuple_cls = Tuple.bound(self._index, self.source, self.stream,
                                                self.task)
        return cls

    def __getitem__(self, key: str | int) -> list[Any]:
        """The column of field ``key`` (a name, or a position in the declared order)."""
        if key.__class__ is str:
            try:
                pos = self._index[key]  # type: ignore[index]
            except KeyError:
                raise KeyError(f"stream {self.stream!r} of {self.source!r} has no field "
                               f"{key!r} (fields: {list(self.fields)})") from None
        else:
            pos = int(key)
        col = self._columns.get(pos)
        if col is None:
            col = self._columns[pos] = list(map(itemgetter(pos), self.rows))
        return col

    def columns(self) -> dict[str, list[Any]]:
        """Every column by field name."""
        return {name: self[name] for name in self.fields}

    def __iter__(self) -> Iterator[Tuple]:
        return map(self.tuple_class, self.rows)

    def __repr__(self) -> str:
        return f"Batch({self.source}:{self.task}/{self.stream} {len(self.rows)} tuples)"


_FAILED_RECORD = "_jstorm_failed_record"


def mark_failed_record(exc: BaseException, record: Any) -> None:
    """Say which record of a batch ``exc`` was raised on: the failure report (``jstorm
    run``, ``handle.wait()``, ``jstorm status``) then shows that record, not the batch.
    A component looping over a batch calls it in its ``except`` clause (the loop variable
    still holds the record; the loop itself pays nothing)."""
    try:
        setattr(exc, _FAILED_RECORD, (record,))
    except (AttributeError, TypeError):  # an exception type without a __dict__
        pass


class FailedRecord:
    """The record of a batch an error was raised on, as a failure report shows it."""

    __slots__ = ("batch", "record")

    def __init__(self, record: Any, batch: Batch) -> None:
        self.record = record
        self.batch = batch

    def __repr__(self) -> str:
        return f"{self.record!r} (a record of {self.batch!r})"


def failed_input(exc: BaseException, received: Any) -> Any:
    """What ``exc`` was raised on: the record :func:`mark_failed_record` named when
    ``received`` is a batch, else ``received`` itself."""
    marked = getattr(exc, _FAILED_RECORD, None)
    if isinstance(received, Batch) and isinstance(marked, tuple) and len(marked) == 1:
        return FailedRecord(marked[0], received)
    return received


def rows_from_columns(data: Any, fields: Sequence[str], component: str,
                      stream: str) -> Sequence[Sequence[Any]]:
    """Rows (one values tuple per record) from what ``emit_batch`` was given.

    ``data`` is ``{"field": column}`` with exactly the stream's fields, a sequence of
    columns in declared field order, or a :class:`Batch` (its rows are forwarded as they
    are). Raises :class:`TopologyError` naming the problem (unknown or missing field, wrong
    number of columns, columns of different lengths).
    """
    if isinstance(data, Batch):
        if len(data.fields) != len(fields):
            raise TopologyError(f"component {component!r}: emit_batch on stream {stream!r} "
                                f"(fields {list(fields)}) got a batch with fields "
                                f"{list(data.fields)}")
        return data.rows
    if isinstance(data, Mapping):
        unknown = [k for k in data if k not in fields]
        missing = [f for f in fields if f not in data]
        if unknown or missing:
            raise TopologyError(f"component {component!r}: emit_batch on stream {stream!r} "
                                f"(fields {list(fields)}): "
                                + "; ".join(([f"unknown field(s) {unknown}"] if unknown else [])
                                            + ([f"missing field(s) {missing}"] if missing
                                               else [])))
        cols = [data[f] for f in fields]
    elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        cols = list(data)
        if len(cols) != len(fields):
            raise TopologyError(f"component {component!r}: emit_batch on stream {stream!r} "
                                f"got {len(cols)} column(s) for {len(fields)} field(s) "
                                f"{list(fields)}")
    else:
        raise TopologyError(f"component {component!r}: emit_batch wants {{field: column}} or "
                            f"a sequence of columns, not {type(data).__name__}")
    if not cols:
        return []
    n = len(cols[0])
    for f, c in zip(fields, cols, strict=True):
        if len(c) != n:
            raise TopologyError(f"component {component!r}: emit_batch on stream {stream!r}: "
                                f"column {f!r} has {len(c)} values, column {fields[0]!r} "
                                f"has {n}")
    return list(zip(*cols, strict=True))
