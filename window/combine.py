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
* a time mode other than ``"ingestion"``: in ingestion time the bolt stamps every record
  of a received batch with one arrival time and moves its watermark once per batch, so
  records of one key in one shipment always fall into the same windows, none is ever
  late, and folding them first is the same as adding them one by one. Event time (per
  record timestamps, late records, late firings per record) and processing time are not
  combined;
* count windows (they fire on record counts), ``early_fire_every_n`` (a per-record
  trigger), a ``watermark`` strategy (per-record watermarks);
* ``execute``/``execute_batch`` overridden (the bolt's input path is its own);
* a subscription that is not a fields grouping on exactly the bolt's ``key``, or a
  consumer of the bolt's late stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jstormpy.window.assigners import CountWindows

INGESTION = "ingestion"


class Partial:
    """A partial accumulator standing in for records of one key in the bolt's operator:
    its aggregator folds it in with ``merge`` instead of ``add``. Never late: it is
    stamped on arrival like the records it stands for (ingestion time)."""

    __slots__ = ("acc",)

    def __init__(self, acc: Any) -> None:
        self.acc = acc

    def __repr__(self) -> str:
        return f"Partial({self.acc!r})"


@dataclass(frozen=True)
class SenderAggregation:
    """What a sending task needs to combine records for one subscription: the bolt's
    ``create`` and ``add`` (bound to an unprepared copy of the bolt) and its key fields."""

    consumer: str
    create: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    key_fields: tuple[str, ...]


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
    if getattr(bolt, "time", "event") != INGESTION:
        return f"time = {getattr(bolt, 'time', 'event')!r} (only ingestion time is combined)"
    if isinstance(getattr(bolt, "window", None), CountWindows):
        return "count windows"
    if getattr(bolt, "early_fire_every_n", None) is not None:
        return "early_fire_every_n"
    if getattr(bolt, "watermark", None) is not None:
        return "a watermark strategy"
    if _overrides(cls, "execute") or _overrides(cls, "execute_batch"):
        return "execute or execute_batch overridden"
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
    if combine_refusal(bolt) is not None or late_consumed or grouping_kind != "fields":
        return None
    keys = key_fields(bolt)
    if keys is None or tuple(grouping_fields) != keys:
        return None
    try:  # create() must not need prepare(); one probe here, add() is guarded per record
        bolt.create()
    except Exception:
        return None
    return SenderAggregation(consumer, bolt.create, bolt.add, keys)


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
