"""Built-in window aggregates: ``Count``, ``Sum``, ``Min``, ``Max``, ``Mean``.

Each is an :class:`~jstormpy.window.operator.Aggregator` (``create`` / ``add`` /
``merge`` / ``result``), so it works with every window kind, and adds what lets sliced
windows skip per-record and per-firing Python calls:

* ``add_many(slice, keys, values)`` folds a whole column into one slice's
  ``key -> accumulator`` dict (``Count``: one C call, ``collections`` counting;
  the others: one dict-get loop, no function call per record);
* ``slice_merge``: a C-level merge (``operator.add``, ``min``, ``max``) for the
  two-stacks queues of sliding windows (slice accumulators are never empty);
* ``results(accs)``: every firing's result of a round in one call (identity for all
  but ``Mean``).

Use one on a :class:`~jstormpy.window.WindowedBolt` with ``aggregate = Mean("temp")``
(no ``create``/``add``/``merge``/``result`` to write), or pass it to a
:class:`~jstormpy.window.WindowOperator`. ``field`` names the tuple field aggregated;
``None`` aggregates the record itself (operator use with plain values).

The results are exactly those of the obvious per-record code, in the same order of
operations (so the batch and per-record paths agree to the last bit). ``Mean`` keeps
``(sum, count)`` as one complex number ``sum + count*1j`` so that merging is one C-level
addition; its arithmetic is float arithmetic (``count`` is exact up to 2**53).
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod

# the C loop behind Counter.update, for a plain dict: no public stdlib equivalent counts
# an iterable into a mapping at C speed (Counter itself would change the state's type)
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import MutableMapping, Sequence
from typing import Any

from jstormpy.api.errors import TopologyError

_EMPTY: Any = None
"""Min/Max accumulator before the first record (records are never None)."""


class BuiltinAggregate(ABC):
    """Base of the built-in aggregates (see the module doc)."""

    field: str | None
    slice_merge: Any
    """A C-level merge of two non-empty accumulators (a builtin: never bound)."""

    def __init__(self, field: str | None = None) -> None:
        if field is not None and not (isinstance(field, str) and field):
            raise TopologyError(f"{type(self).__name__}(field) must be a field name or "
                                f"None, got {field!r}")
        self.field = field

    def column(self, batch: Any) -> Sequence[Any] | None:
        """The values this aggregate reads from a :class:`~jstormpy.api.batch.Batch`."""
        return None if self.field is None else batch[self.field]

    @abstractmethod
    def create(self) -> Any:
        """A fresh accumulator."""

    @abstractmethod
    def add(self, acc: Any, record: Any) -> Any:
        """``acc`` with ``record`` added."""

    @abstractmethod
    def merge(self, a: Any, b: Any) -> Any:
        """Two accumulators combined (``a`` older)."""

    @abstractmethod
    def add_many(self, slice_accs: MutableMapping[Any, Any], keys: Sequence[Any],
                 values: Sequence[Any]) -> None:
        """Add ``values[i]`` to ``slice_accs[keys[i]]`` for every ``i``, in order."""

    def result(self, key: Any, window: Any, acc: Any) -> Any:
        """The emitted value of one window."""
        return acc

    def results(self, accs: list[Any]) -> list[Any]:
        """:meth:`result` of many windows (key and window do not matter)."""
        return accs

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class Count(BuiltinAggregate):
    """Number of records (``Count()``; it reads no field)."""

    slice_merge = operator.add

    def __init__(self) -> None:
        super().__init__(None)

    def __repr__(self) -> str:
        return "Count()"

    def create(self) -> int:
        return 0

    def add(self, acc: int, record: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def column(self, batch: Any) -> Sequence[Any] | None:
        return batch.rows  # counting reads no field: any column of the right length

    def add_many(self, slice_accs: MutableMapping[Any, Any], keys: Sequence[Any],
                 values: Sequence[Any]) -> None:
        _count_elements(slice_accs, keys)


class Sum(BuiltinAggregate):
    """Sum of a numeric field (``0`` + the values in arrival order)."""

    slice_merge = operator.add

    def create(self) -> int:
        return 0

    def add(self, acc: Any, record: Any) -> Any:
        f = self.field
        return acc + (record if f is None else record[f])

    def merge(self, a: Any, b: Any) -> Any:
        return a + b

    def add_many(self, slice_accs: MutableMapping[Any, Any], keys: Sequence[Any],
                 values: Sequence[Any]) -> None:
        get = slice_accs.get
        for k, v in zip(keys, values, strict=True):
            slice_accs[k] = get(k, 0) + v


class Mean(BuiltinAggregate):
    """Arithmetic mean of a numeric field (float); accumulator ``sum + count*1j``."""

    slice_merge = operator.add

    def create(self) -> complex:
        return 0j

    def add(self, acc: complex, record: Any) -> complex:
        f = self.field
        return acc + (record if f is None else record[f]) + 1j

    def merge(self, a: complex, b: complex) -> complex:
        return a + b

    def add_many(self, slice_accs: MutableMapping[Any, Any], keys: Sequence[Any],
                 values: Sequence[Any]) -> None:
        get = slice_accs.get
        for k, v in zip(keys, values, strict=True):
            slice_accs[k] = get(k, 0j) + v + 1j

    def result(self, key: Any, window: Any, acc: complex) -> float:
        return acc.real / acc.imag

    def results(self, accs: list[Any]) -> list[Any]:
        return [a.real / a.imag for a in accs]


class Min(BuiltinAggregate):
    """Smallest value of a field (the first one on ties)."""

    slice_merge = min

    def create(self) -> Any:
        return _EMPTY

    def add(self, acc: Any, record: Any) -> Any:
        f = self.field
        v = record if f is None else record[f]
        return v if acc is _EMPTY or v < acc else acc

    def merge(self, a: Any, b: Any) -> Any:
        if a is _EMPTY:
            return b
        return a if b is _EMPTY or not b < a else b

    def add_many(self, slice_accs: MutableMapping[Any, Any], keys: Sequence[Any],
                 values: Sequence[Any]) -> None:
        get = slice_accs.get
        for k, v in zip(keys, values, strict=True):
            o = get(k, _EMPTY)
            if o is _EMPTY or v < o:
                slice_accs[k] = v


class Max(BuiltinAggregate):
    """Largest value of a field (the first one on ties)."""

    slice_merge = max

    def create(self) -> Any:
        return _EMPTY

    def add(self, acc: Any, record: Any) -> Any:
        f = self.field
        v = record if f is None else record[f]
        return v if acc is _EMPTY or v > acc else acc

    def merge(self, a: Any, b: Any) -> Any:
        if a is _EMPTY:
            return b
        return a if b is _EMPTY or not b > a else b

    def add_many(self, slice_accs: MutableMapping[Any, Any], keys: Sequence[Any],
                 values: Sequence[Any]) -> None:
        get = slice_accs.get
        for k, v in zip(keys, values, strict=True):
            o = get(k, _EMPTY)
            if o is _EMPTY or v > o:
                slice_accs[k] = v
