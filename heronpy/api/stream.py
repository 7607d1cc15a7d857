"""Output streams and groupings (``heronpy.api.stream``).

Example:
    >>> from heronpy.api.stream import Grouping, Stream
    >>> Stream(fields=["word", "n"], name="counts").stream_id
    'counts'
    >>> Grouping.fields("word").fields
    ['word']
    >>> Grouping.GLOBAL == Grouping.LOWEST
    True
"""

from __future__ import annotations

import collections
from typing import Any

from heronpy.api.custom_grouping import ICustomGrouping
from heronpy.api.serializer import default_serializer
from jstormpy.api.errors import TopologyError


class Stream:
    """An output stream: its field names, its name (``"default"`` unless given), and
    whether it is direct (its tuples go to the task ``emit(..., direct_task=)`` names)."""

    DEFAULT_STREAM_ID = "default"

    def __init__(self, fields: list[str] | tuple[str, ...] | None = None,
                 name: str = DEFAULT_STREAM_ID, direct: bool = False) -> None:
        if fields is None:
            fields = []
        if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) for f in fields):
            raise TopologyError(f"Stream fields must be a list or tuple of strings, "
                                f"not {fields!r}")
        if not isinstance(name, str):
            raise TopologyError(f"Stream name must be a string, not {name!r}")
        if not isinstance(direct, bool):
            raise TopologyError(f"Stream direct= must be True or False, not {direct!r}")
        self.fields = list(fields)
        self.stream_id = name
        self.direct = direct

    def __repr__(self) -> str:
        return f"Stream(fields={self.fields!r}, name={self.stream_id!r})"


class Grouping:
    """How a bolt's input is spread over its tasks.

    ``SHUFFLE``, ``ALL`` (every task), ``LOWEST`` (alias ``GLOBAL``: the lowest task id),
    ``NONE`` (like shuffle), ``DIRECT``, ``fields(*names)`` (by hash of those fields) and
    ``custom(grouping)`` (an :class:`ICustomGrouping`).
    """

    SHUFFLE = "SHUFFLE"
    ALL = "ALL"
    LOWEST = "LOWEST"
    NONE = "NONE"
    DIRECT = "DIRECT"

    FIELDS = collections.namedtuple("FIELDS", "gtype, fields")
    CUSTOM = collections.namedtuple("CUSTOM", "gtype, python_serialized")

    # streamparse's names
    GLOBAL = LOWEST
    LOCAL_OR_SHUFFLE = SHUFFLE

    @classmethod
    def is_grouping_sane(cls, gtype: Any) -> bool:
        """Whether ``gtype`` is one of the groupings above."""
        if isinstance(gtype, cls.FIELDS):
            return gtype.gtype == "FIELDS" and bool(gtype.fields)
        if isinstance(gtype, cls.CUSTOM):
            return gtype.gtype == "CUSTOM" and gtype.python_serialized is not None
        return isinstance(gtype, str) and gtype in (cls.SHUFFLE, cls.ALL, cls.LOWEST,
                                                    cls.NONE, cls.DIRECT)

    @classmethod
    def fields(cls, *fields: Any) -> Any:
        """Fields grouping on ``fields`` (names, or one list of names)."""
        names = list(fields[0]) if len(fields) == 1 and isinstance(fields[0], list) \
            else list(fields)
        if not names:
            raise TopologyError("Grouping.fields() needs at least one field name")
        if not all(isinstance(f, str) for f in names):
            raise TopologyError(f"Grouping.fields() takes field names (strings), not {names!r}")
        return cls.FIELDS(gtype="FIELDS", fields=names)

    @classmethod
    def custom(cls, customgrouper: Any) -> Any:
        """A grouping by an :class:`ICustomGrouping` instance (or its ``module.Class``
        path)."""
        if not isinstance(customgrouper, (ICustomGrouping, str)):
            raise TopologyError(f"Grouping.custom() takes an ICustomGrouping instance or a "
                                f"class path, not {customgrouper!r}")
        return cls.custom_serialized(default_serializer.serialize(customgrouper), is_java=False)

    @classmethod
    def custom_serialized(cls, serialized: bytes, is_java: bool = True) -> Any:
        """A custom grouping from its serialized form (Python only: Java groupings cannot
        run here)."""
        if not isinstance(serialized, bytes):
            raise TopologyError(f"Grouping.custom_serialized() takes bytes, not {serialized!r}")
        if is_java:
            raise TopologyError("a custom grouping in Java cannot run on jstormpy; implement "
                                "heronpy.api.custom_grouping.ICustomGrouping in Python")
        return cls.CUSTOM(gtype="CUSTOM", python_serialized=serialized)

    @classmethod
    def custom_object(cls, java_class_name: str, arg_list: Any) -> Any:
        """Java groupings cannot run here."""
        raise TopologyError(f"Grouping.custom_object({java_class_name!r}) names a Java class, "
                            "which cannot run on jstormpy; implement ICustomGrouping in Python")
