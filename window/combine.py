"""Combining before the shuffle: when a WindowedBolt's input may arrive pre-aggregated.

A task that emits towards a fields-grouped :class:`~jstormpy.window.WindowedBolt` may keep,
per destination task, one partial accumulator per key built with the bolt's own
``create``/``add``, and ship the partials (with their record counts) instead of the
records when its batch is sent; the bolt then folds each partial into its windows with
``merge`` (Flink's local-global aggregation, Spark's map-side combine). This module
decides *where* that gives the same result as shipping the records (the rules of
``docs/windows.md``, "Combining before the shuffle") and defines the receiving side's
record type :class:`Partial`; the sending side lives in the data plane
(``jstormpy/runtime/combine.py``).

The rules, each one a reason to refuse (:func:`combine_refusal`):

* ``combine_before_shuffle = False`` on the bolt (the opt-out);
* a built-in ``aggregate`` (not combined yet: they have their own column path) or no
  ``merge``;
* a time mode other than ``"ingestion"`` or ``"event"`` (processing time is not combined).
  In ingestion time the bolt stamps every record of a received batch with one arrival
  time and moves its watermark once per batch, so records of one key in one shipment
  always fall into the same windows, none is ever late, and folding them first is the
  same as adding them one by one. In event time a partial stands for the records of one
  key and one *pane* (the ``gcd(size, slide)`` slice their timestamps fall in: records of
  a pane belong to the same windows), and the sender folds only records whose pane is on
  time for all its windows under the highest watermark it has sent (the receiver's
  watermark cannot be above it when the partial arrives: see ``docs/windows.md``); the
  rest go as records. That needs tumbling or sliding windows of integer sizes (session
  windows: a key's records in one shipment can belong to different sessions, which merge
  with the receiver's, so there is no pane to key a partial by) and a ``timestamp``
  field (a ``timestamp()`` method is not run in the sender);
* count windows (they fire on record counts), ``early_fire_every_n`` (a per-record
  trigger), a ``watermark`` strategy (per-record watermarks);
* ``execute``/``execute_batch`` overridden (the bolt's input path is its own);
* a subscription that is not a fields grouping on exactly the bolt's ``key`` (or, in
  ingestion time, a consumer of the bolt's late stream), or an event-time subscription
  whose stream lacks the timestamp field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jstormpy.window.assigners import CountWindows, SessionWindows
from jstormpy.window.sliced import on_time_from

INGESTION = "ingestion"
EVENT = "event"


class Partial:
    """A partial accumulator standing in for records of one key in the bolt's operator:
    its aggregator folds it in with ``merge`` instead of ``add``. Never late: in
    ingestion time it is stamped on arrival like the records it stands for; in event
    time its pane is on time for all its windows when it arrives (the sender's bound)."""

    __slots__ = ("acc",)

    def __init__(self, acc: Any) -> None:
        self.acc = acc

    def __repr__(self) -> str:
        return f"Partial({self.acc!r})"


@dataclass(frozen=True)
class SenderAggregation:
    """What a sending task needs to combine records for one subscription: the bolt's
    ``create`` and ``add`` (bound to an unprepared copy of the bolt) and its key fields;
    in event time also its timestamp field and window geometry."""

    consumer: str
    create: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    key_fields: tuple[str, ...]
    timestamp_field: str | None = None
    """Event time: the field holding the record's timestamp (None: ingestion time, one
    partial per key)."""
    size: int = 0
    slide: int = 0
    pane: int = 0
    """Event time: ``gcd(size, slide)``; a partial stands for one key's records of one
    pane, and is keyed ``(key, pane start)``."""

    def on_time_from(self, watermark: float) -> float:
        """Event time: the lowest timestamp whose pane is on time for all its windows at a
        receiver whose watermark is at most ``watermark``."""
        return on_time_from(self.size, self.slide, watermark)


def _overrides(cls: type, name: str) -> bool:
    from jstormpy.window.bolt import WindowedBolt

    return getattr(cls, name, None) is not getattr(WindowedBolt, name)


def combine_refusal(bolt: Any) -> str | None:
    """Why ``bolt`` (a WindowedBolt class or instance) cannot take combined input, or
    None if it can (whatever reads it: see :func:`sender_aggregation`)."""
    if not getattr(bolt, "combine_before_shuffle", False):
        return "combine_before_shuffle is False"
    return partials_refusal(bolt)


def partials_refusal(bolt: Any) -> str | None:
    """:func:`combine_refusal` without the opt-out: why ``bolt`` could not fold in a
    partial at all. A bolt that could makes its operator accept partials whatever its
    ``combine_before_shuffle`` says, so a gray release that turns combining off meets
    no partial it cannot merge from tasks still on the old code."""
    from jstormpy.window.bolt import WindowedBolt

    cls = bolt if isinstance(bolt, type) else type(bolt)
    if not (isinstance(cls, type) and issubclass(cls, WindowedBolt)):
        return "not a WindowedBolt"
    if getattr(bolt, "aggregate", None) is not None:
        return "a built-in aggregate"
    if not callable(getattr(bolt, "merge", None)):
        return "no merge(a, b)"
    time = getattr(bolt, "time", EVENT)
    if time not in (INGESTION, EVENT):
        return f"time = {time!r} (only ingestion and event time are combined)"
    window = getattr(bolt, "window", None)
    if isinstance(window, CountWindows):
        return "count windows"
    if time == EVENT:
        why = _event_time_refusal(bolt, window)
        if why is not None:
            return why
    if getattr(bolt, "early_fire_every_n", None) is not None:
        return "early_fire_every_n"
    if getattr(bolt, "watermark", None) is not None:
        return "a watermark strategy"
    if _overrides(cls, "execute") or _overrides(cls, "execute_batch"):
        return "execute or execute_batch overridden"
    return None


def _event_time_refusal(bolt: Any, window: Any) -> str | None:
    """Why an event-time bolt's input cannot be combined per key and pane (None: it can)."""
    if isinstance(window, SessionWindows):
        return ("session windows in event time (a key's records in one shipment can "
                "belong to different sessions, which merge with the receiver's: there is "
                "no pane to key a partial by)")
    size = getattr(window, "size_ms", None)
    slide = getattr(window, "slide_ms", None)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (size, slide)):
        return "window sizes that are not integers (event time is combined per pane)"
    if not isinstance(getattr(bolt, "timestamp", None), str):
        return ("no timestamp field (a timestamp() method is not combined: the sender "
                "reads the field)")
    return None


def key_fields(bolt: Any) -> tuple[str, ...] | None:
    """The bolt's key as a tuple of field names (None: no key)."""
    key = getattr(bolt, "key", None)
    if key is None:
        return None
    return (key,) if isinstance(key, str) else tuple(key)


def sender_aggregation(consumer: str, bolt: Any, grouping_kind: str,
                       grouping_fields: Sequence[str],
                       late_consumed: bool) -> SenderAggregation | None:
    """The aggregation a sender may combine with for one subscription of ``bolt`` (an
    instance: the sending task's own unprepared copy), or None where combining would not
    give the same result (module docs)."""
    if combine_refusal(bolt) is not None or grouping_kind != "fields":
        return None
    event = getattr(bolt, "time", EVENT) == EVENT
    # ingestion-time partials are never late; event-time late records go as records
    if late_consumed and not event:
        return None
    keys = key_fields(bolt)
    if keys is None or tuple(grouping_fields) != keys:
        return None
    try:  # create() must not need prepare(); one probe here, add() is guarded per record
        bolt.create()
    except Exception:
        return None
    if not event:
        return SenderAggregation(consumer, bolt.create, bolt.add, keys)
    size, slide = bolt.window.size_ms, bolt.window.slide_ms
    return SenderAggregation(consumer, bolt.create, bolt.add, keys, bolt.timestamp,
                             size, slide, math.gcd(size, slide))


def merging_add(add: Callable[[Any, Any], Any],
                merge: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """An aggregator ``add`` that folds a :class:`Partial` in with ``merge`` and any other
    record with ``add`` (what a combinable bolt's operator uses)."""
    partial = Partial

    def add_record_or_partial(acc: Any, record: Any) -> Any:
        if record.__class__ is partial:
            return merge(acc, record.acc)
        return add(acc, record)

    return add_record_or_partial
