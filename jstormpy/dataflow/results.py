"""What dataflow operators emit: small immutable records a sink can write as JSON.

NamedTuples, so a sink writes them as their ``_asdict()`` (field name -> value) and they
cost little to build (one per output record).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class KeyedValue(NamedTuple):
    """A running value of one key (``KeyedStream.reduce``)."""

    key: Any
    value: Any


class WindowResult(NamedTuple):
    """One firing of one window of one key (``KeyedStream.window(...).aggregate``).

    ``[start, end)`` is half-open, in the timestamp's unit (element positions for
    count windows); ``kind`` is ``"early"``, ``"on_time"`` or ``"late"``.
    """

    key: Any
    start: float
    end: float
    value: Any
    kind: str


class JoinResult(NamedTuple):
    """One joined pair of one key; ``left`` or ``right`` is None for the missing side of
    an outer (``how="left"`` / ``"outer"``) window join."""

    key: Any
    left: Any
    right: Any
