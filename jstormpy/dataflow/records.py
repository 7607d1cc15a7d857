"""How dataflow items travel between compiled bolts, and how a sink writes them.

Every compiled component's output stream has one of a few layouts (:class:`Wire`); a
consumer knows, per ``(source component, stream)`` it reads, which layout that is and
turns each tuple back into the item the user's function sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from jstormpy.api.component import Tuple
from jstormpy.dataflow.results import WindowResult

ITEM_FIELDS = ("_item",)
"""The fields of an unkeyed dataflow stream: one field holding the item."""
KEY_FIELD = "_key"
"""The hidden key field a ``key_by`` adds (the fields grouping of keyed operators)."""
KEYED_FIELDS = (KEY_FIELD, "_item")
"""The fields of a keyed dataflow stream."""


class Wire(Enum):
    """The layout of one component's output stream."""

    RAW = "raw"
    """A spout's own tuples: the item is ``{field: value}``."""
    ITEM = "item"
    """``("_item",)``: the item itself."""
    KEYED = "keyed"
    """``("_key", "_item")``: the key and the item."""
    FIRING = "firing"
    """A WindowedBolt's firings ``(key, start, end, result, kind)``: a WindowResult."""
    LATE = "late"
    """A WindowedBolt's late records: the keyed input tuple, the item is the second value."""


def decode_item(wire: Wire, tup: Tuple) -> Any:
    """The item a tuple of layout ``wire`` carries."""
    if wire is Wire.ITEM:
        return tup.values[0]
    if wire is Wire.RAW:
        return tup.as_dict()
    if wire is Wire.FIRING:
        return WindowResult(*tup.values)
    return tup.values[1]  # KEYED, LATE


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
