"""How dataflow items travel between compiled bolts, and how a sink writes them.

Every compiled component's output stream has one of a few layouts (:class:`Wire`); a
consumer knows, per ``(source component, stream)`` it reads, which layout that is and
turns each tuple back into the item the user's function sees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

from jstormpy.api.batch import Batch
from jstormpy.api.component import DEFAULT_STREAM, Tuple
from jstormpy.dataflow.results import WindowResult

ITEM_FIELDS = ("_item",)
LATE_STREAM = "late"
"""The stream of an operator's late records (``.late()``): a window aggregate's carry the
keyed input tuple (:attr:`Wire.LATE`), a join's the item (:attr:`Wire.ITEM`)."""
"""The fields of an unkeyed dataflow stream: one field holding the item."""
KEY_FIELD = "_key"
"""The hidden key field a ``key_by`` adds (the fields grouping of keyed operators)."""
KEYED_FIELDS = (KEY_FIELD, "_item")
"""The fields of a keyed dataflow stream."""
SELF_KEYED_FIELDS = (KEY_FIELD,)
"""The fields of a stream keyed by the items themselves (``key_by(lambda w: w)``): the
row is ``(item,)``, the key and the item one value, so no column is sent twice. Keyed
readers take the key at index 0 and the item at index -1, which fits both layouts."""


class Wire(Enum):
    """The layout of one component's output stream."""

    RAW = "raw"
    """A spout's own tuples: the item is ``{field: value}``."""
    ITEM = "item"
    """``("_item",)``: the item itself."""
    KEYED = "keyed"
    """``("_key", "_item")``: the key and the item; or ``("_key",)`` when the item is its
    own key (:data:`SELF_KEYED_FIELDS`). The item is the last value in both."""
    FIRING = "firing"
    """A WindowedBolt's firings ``(key, start, end, result, kind)``: a WindowResult."""
    LATE = "late"
    """A WindowedBolt's late records: the keyed input tuple, the item is the last value."""


def decode_item(wire: Wire, tup: Tuple) -> Any:
    """The item a tuple of layout ``wire`` carries."""
    if wire is Wire.ITEM:
        return tup.values[0]
    if wire is Wire.RAW:
        return tup.as_dict()
    if wire is Wire.FIRING:
        return WindowResult(*tup.values)
    return tup.values[-1]  # KEYED, LATE: (key, item) or (item,)


def as_record(item: Any) -> dict[str, Any]:
    """What a sink writes for ``item``: a dict as is, a NamedTuple as its ``_asdict()``,
    anything else as ``{"value": item}``.

    Example:
        >>> from jstormpy.dataflow.results import KeyedValue
        >>> as_record({"a": 1}), as_record(KeyedValue("k", 2)), as_record(3)
        ({'a': 1}, {'key': 'k', 'value': 2}, {'value': 3})
    """
    if isinstance(item, Mapping):
        return dict(item)
    if isinstance(item, tuple) and hasattr(item, "_asdict"):
        return dict(item._asdict())
    return {"value": item}


def record_tuple(record: Mapping[str, Any], source: str, task: int) -> Tuple:
    """``record`` as a Tuple whose fields are its keys (what a sink's ``write`` takes)."""
    keys = tuple(record)
    return Tuple(tuple(record.values()), {k: i for i, k in enumerate(keys)}, source,
                 task=task)


VALUE_KEYS = ("value",)
PLAIN_ITEMS = frozenset({tuple, list, str, bytes, int, float, bool, type(None)})
"""Item types written as ``{"value": item}`` without further checks."""


class RecordTuples:
    """Builds the record Tuples of one sink task fast: the fields and values of
    ``record_tuple(as_record(item), source, task)``, with one Tuple class per record shape
    and channel built once (:meth:`Tuple.bound`) instead of a field index per record, and
    no intermediate dict.

    Example:
        >>> record = RecordTuples().channel("src", 3)
        >>> t = record({"a": 1, "b": 2})
        >>> t.as_dict(), t.source, t.task, record(7).as_dict()
        ({'a': 1, 'b': 2}, 'src', 3, {'value': 7})
    """

    MAX_SHAPES = 1024
    """Record shapes cached per channel at most (beyond, a record builds its index)."""

    def __init__(self) -> None:
        self.channels: dict[tuple[str, int], Callable[[Any], Tuple]] = {}
        self.value_classes: dict[tuple[str, int], type[Tuple]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {}  # classes and closures built at run time: rebuilt, never shipped

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.channels = {}
        self.value_classes = {}

    def value_class(self, source: str, task: int) -> type[Tuple]:
        """The Tuple class of ``{"value": item}`` records from ``source``'s task ``task``:
        ``cls((item,))`` is what :meth:`channel`'s function gives for a plain item
        (:data:`PLAIN_ITEMS`)."""
        cls = self.value_classes.get((source, task))
        if cls is None:
            cls = self.value_classes[(source, task)] = Tuple.bound(
                {"value": 0}, source, "default", task)
        return cls

    def channel(self, source: str, task: int) -> Callable[[Any], Tuple]:
        """The function turning an item from ``source``'s task ``task`` into its Tuple."""
        record = self.channels.get((source, task))
        if record is None:
            record = self.channels[(source, task)] = self._channel(source, task)
        return record

    def _channel(self, source: str, task: int) -> Callable[[Any], Tuple]:
        classes: dict[tuple[str, ...], type[Tuple]] = {}
        limit = self.MAX_SHAPES

        def bound(keys: tuple[str, ...], values: tuple[Any, ...]) -> Tuple:
            if len(classes) >= limit:
                return Tuple(values, {k: i for i, k in enumerate(keys)}, source, task=task)
            cls = classes[keys] = Tuple.bound({k: i for i, k in enumerate(keys)}, source,
                                              "default", task)
            return cls(values)  # type: ignore[call-arg]  # Tuple.bound's one-arg form

        value_cls = self.value_class(source, task)
        get = classes.get
        plain = PLAIN_ITEMS

        def record(item: Any) -> Tuple:
            kind = type(item)
            if kind is dict:
                keys = tuple(item)
                values = tuple(item.values())
            elif kind in plain:
                return value_cls((item,))  # type: ignore[call-arg]
            elif isinstance(item, tuple) and hasattr(item, "_asdict"):
                keys = item._fields  # type: ignore[attr-defined]  # a NamedTuple
                values = tuple(item)
            elif isinstance(item, Mapping):
                keys = tuple(item)
                values = tuple(item.values())
            else:
                return value_cls((item,))  # type: ignore[call-arg]
            cls = get(keys)
            if cls is None:
                return bound(keys, values)
            return cls(values)  # type: ignore[call-arg]

        return record


_VALUE_INDEX = {"value": 0}


def record_batches(items: Sequence[Any], source: str, task: int) -> list[Batch]:
    """The records of ``items`` (:func:`as_record`) as batches, one per run of
    consecutive records with the same keys in the same order: a batch's fields are the
    keys, its rows the records' values (what a sink's ``write_batch`` takes). A batch
    of dicts of one shape (a map's rows) is one batch built with C-level passes.

    Example:
        >>> [(b.fields, b.rows) for b in record_batches([{"a": 1}, {"a": 2}, 3], "s", 0)]
        [(('a',), [(1,), (2,)]), (('value',), [(3,)])]
    """
    if not items:
        return []
    kinds = set(map(type, items))
    if kinds == {dict}:
        shapes = list(map(tuple, items))
        first = shapes[0]
        if shapes.count(first) == len(shapes):
            rows: list[Any] = list(map(tuple, map(dict.values, items)))
            return [Batch(rows, _index(first), source, DEFAULT_STREAM, task)]
    elif kinds <= PLAIN_ITEMS:
        return [Batch([(item,) for item in items], _VALUE_INDEX, source, DEFAULT_STREAM,
                      task)]
    batches: list[Batch] = []
    keys: tuple[str, ...] | None = None
    rows = []
    for item in items:
        shape, values = _keys_values(item)
        if shape != keys:
            if rows:
                batches.append(Batch(rows, _index(keys), source, DEFAULT_STREAM, task))
            keys, rows = shape, []
        rows.append(values)
    batches.append(Batch(rows, _index(keys), source, DEFAULT_STREAM, task))
    return batches


def _keys_values(item: Any) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """The keys and values of ``as_record(item)``, without the dict."""
    kind = type(item)
    if kind is dict:
        return tuple(item), tuple(item.values())
    if kind in PLAIN_ITEMS:
        return VALUE_KEYS, (item,)
    if isinstance(item, tuple) and hasattr(item, "_asdict"):
        return item._fields, tuple(item)  # type: ignore[attr-defined]  # a NamedTuple
    if isinstance(item, Mapping):
        return tuple(item), tuple(item.values())
    return VALUE_KEYS, (item,)


_INDEXES: dict[tuple[str, ...], dict[str, int]] = {}


def _index(keys: Any) -> dict[str, int]:
    """The field index of records with ``keys`` (shared; at most 1024 shapes kept)."""
    index = _INDEXES.get(keys)
    if index is None:
        index = {k: i for i, k in enumerate(keys)}
        if len(_INDEXES) < RecordTuples.MAX_SHAPES:
            _INDEXES[keys] = index
    return index
