"""Combining before the shuffle, the sending side: per target task, one partial
accumulator per key.

A :class:`~jstormpy.runtime.routing.Route` whose consumer accepts combined input (which
one does is decided by ``jstormpy/window/combine.py``) batches records per target as
usual, but hands a full (or flushed) batch to :meth:`PartialBuffers.send` instead of the
transport: the batch's records are folded, in one loop, into the target's partial
accumulators with the consumer's ``create``/``add``. The partials are sent when the route
is flushed (whatever sends a batch: the linger, a barrier, a watermark, the end of the
stream, the input going idle) or when a target's partials hold ``limit`` keys, as one
DATA item whose payload is a tuple ``(keys, accumulators, records)`` -- a plain batch is
a list, so the receiving executor tells the two apart by type.

Event time (the aggregation names a timestamp field): a partial stands for the records of
one key in one *pane* (the consumer's ``gcd(size, slide)`` slice) and is keyed ``(key, pane
start)``. Only a record whose pane is on time for all its windows under :attr:`bound` (the
highest watermark the task has sent) is folded; any other (late, or with a timestamp the
consumer will report as bad) goes to the target as a record, in a plain batch sent at once.
A receiver's watermark is never above the bound when a partial arrives: the task sends its
partials before it sends a higher watermark (``OutputCollector.emit_watermark``), and the
bound survives a restore (:func:`restored_bound`). So no partial is ever late.

``add`` runs the consumer's code in the sending task. If it raises, the route stops
combining for good: the partials so far are sent, then that record and every later one
go out as plain records, so the consumer's own ``add`` meets the record in the consumer's
task (and reports it there, as without combining).
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

log = logging.getLogger(__name__)

_MISSING = object()


def _sole_holder_refs() -> int:
    """What ``sys.getrefcount`` reports, in this module, for an object that only a local
    variable holds: 2 interpreted (the variable and the call's argument), 1 when Cython
    compiled the module (its calls borrow their arguments; ``jstormpy/compiled.py``). The
    reuse checks compare against it, so a record the user kept is never overwritten."""
    refs = sys.getrefcount
    probe = object()
    return refs(probe)


_SOLE = _sole_holder_refs()

SendFn = Callable[[int, tuple[Any, ...]], None]


class CombiningAggregation(Protocol):
    """The consumer's aggregation as the sender uses it (``window.combine``'s
    ``SenderAggregation``)."""

    @property
    def consumer(self) -> str:
        """The consumer component's name (for logs)."""

    @property
    def create(self) -> Callable[[], Any]:
        """A new, empty accumulator."""

    @property
    def add(self) -> Callable[[Any, Any], Any]:
        """``add(acc, tup)``: the accumulator with one more record."""

    @property
    def timestamp_field(self) -> str | None:
        """Event time: the timestamp field (None: ingestion time, one partial per key)."""

    @property
    def pane(self) -> int:
        """Event time: the pane length; partials are keyed ``(key, pane start)``."""

    def on_time_from(self, watermark: float) -> float:
        """Event time: the lowest timestamp whose pane is on time for all its windows at
        a receiver whose watermark is at most ``watermark``."""


_INF = math.inf


def restored_bound(snapshot: dict[str, Any] | None, restoring: bool) -> float:
    """The watermark bound a (re)built task starts with: what its snapshot recorded
    (``forwarded_wm``, the highest watermark it had sent); ``-inf`` on a fresh start
    (no receiver has a watermark yet); ``+inf`` (fold nothing in event time) when the
    task is restored or respawned without one (a snapshot of older code, a partial
    prepare), since its receivers' watermarks are then unknown."""
    if snapshot is not None and "forwarded_wm" in snapshot:
        return float(snapshot["forwarded_wm"])
    return _INF if restoring or snapshot is not None else -_INF


PartialsPayload = tuple[list[Any], list[Any], int]
"""A combined DATA payload: keys, their partial accumulators, the records they stand for."""


class PartialBuffers:
    """One route's partial accumulators, per target position."""

    __slots__ = ("aggregation", "accs", "bound", "failed", "head", "key_index", "limit",
                 "make_tuple", "on_time", "pane", "panes", "position", "records",
                 "targets", "transport", "ts_index")

    def __init__(self, aggregation: CombiningAggregation, targets: Sequence[int],
                 head: tuple[int, int, str], key_index: tuple[int, ...],
                 make_tuple: Callable[[Any], Any], limit: int, transport: SendFn,
                 ts_index: int | None = None) -> None:
        self.aggregation = aggregation
        self.targets = list(targets)
        self.position = {t: i for i, t in enumerate(self.targets)}
        self.head = head
        """``(src, DATA, stream)`` of the items the route sends."""
        self.key_index = key_index
        self.make_tuple = make_tuple
        self.limit = limit
        """Keys a target's partials hold before they are sent on their own."""
        self.transport = transport
        """The route's real send."""
        self.accs: list[dict[Any, Any]] = [{} for _ in self.targets]
        self.panes: list[dict[Any, dict[Any, Any]]] = [{} for _ in self.targets]
        """Event time: per target, pane start -> {key: partial accumulator}."""
        self.records = [0] * len(self.targets)
        """Records folded into each target's partials since they were last sent."""
        self.failed = False
        """``add`` or ``create`` raised once: the route sends plain records from then on."""
        self.ts_index = ts_index
        """Event time: the timestamp's position in a row (None: ingestion time)."""
        self.pane = aggregation.pane if ts_index is not None else 0
        self.bound = -_INF
        """Event time: the highest watermark the task has sent (:meth:`raise_bound`)."""
        self.on_time = -_INF
        """Event time: records at or after this timestamp are folded (their pane is on
        time at every receiver whose watermark is at most :attr:`bound`)."""

    def raise_bound(self, watermark: float) -> None:
        """The task sent (or, restored, had sent) ``watermark``: from now on only records
        on time under it are folded. Call after the partials folded under the old bound
        were sent (before the watermark)."""
        if watermark > self.bound and self.ts_index is not None:
            self.bound = watermark
            self.on_time = self.aggregation.on_time_from(watermark)

    @property
    def holding(self) -> bool:
        """Whether some partials are not sent yet."""
        return any(self.accs) or any(self.panes)

    def send(self, dst: int, item: tuple[Any, ...]) -> None:
        """The route's send: a batch of records is folded into ``dst``'s partials (sent
        as they are after a failure)."""
        if self.failed:
            self.transport(dst, item)
            return
        i = self.position[dst]
        rows = item[3]
        if self.ts_index is not None:
            rows = self.fold_panes(i, rows)
            if rows:  # late records (or bad timestamps): as they are, now
                self.transport(dst, (*self.head, rows))
            if sum(map(len, self.panes[i].values())) >= self.limit:
                self.ship(i)
            return
        done = self.fold(i, rows)
        if done < len(rows):  # add() raised: stop combining, the rest goes plain
            self.transport(dst, (*self.head, rows[done:]))
        elif len(self.accs[i]) >= self.limit:
            self.ship(i)

    def fold(self, i: int, rows: Sequence[Any]) -> int:
        """Fold ``rows`` into target ``i``'s partials; returns how many were folded (all,
        unless ``add`` or ``create`` raised: then combining stops, see :meth:`fail`)."""
        accs = self.accs[i]
        get = accs.get
        create = self.aggregation.create
        add = self.aggregation.add
        make = self.make_tuple
        refs = sys.getrefcount
        sole = _SOLE
        missing = _MISSING
        ki = self.key_index
        k0 = ki[0]
        one = len(ki) == 1
        tup: Any = None
        n = 0
        try:
            for values in rows:
                # only this variable holds it (_SOLE): add() kept none of it
                if tup is None or refs(tup) > sole:
                    tup = make(values)
                else:
                    tup.values = values
                key = values[k0] if one else tuple(values[k] for k in ki)
                acc = get(key, missing)
                accs[key] = add(create() if acc is missing else acc, tup)
                n += 1
        except Exception as exc:
            self.records[i] += n
            self.fail(exc)
            return n
        self.records[i] += n
        return n

    def fold_panes(self, i: int, rows: Sequence[Any]) -> list[Any]:
        """Event time: fold the records of ``rows`` that are on time under the bound into
        target ``i``'s partials, per pane and key; returns the others (and, if ``add`` or
        ``create`` raised, every record from that one on: combining stops, see
        :meth:`fail`). The pane of the previous record is kept: in-order input finds
        its pane with two comparisons, no arithmetic."""
        panes = self.panes[i]
        create = self.aggregation.create
        add = self.aggregation.add
        make = self.make_tuple
        refs = sys.getrefcount
        sole = _SOLE
        missing = _MISSING
        ki = self.key_index
        k0 = ki[0]
        one = len(ki) == 1
        ti = self.ts_index
        assert ti is not None
        pane = self.pane
        on_time = self.on_time
        inf = _INF
        plain: list[Any] = []
        tup: Any = None
        lo = hi = inf  # the current pane [lo, hi) (none yet)
        accs: dict[Any, Any] = {}
        get = accs.get
        n = 0
        try:
            for values in rows:
                ts = values[ti]
                cls = ts.__class__
                if not (cls is int or cls is float):
                    plain.append(values)  # the receiver reports a bad timestamp
                    continue
                if not lo <= ts < hi:
                    # a bool is not an int here; nan and +-inf fail the comparisons
                    if not on_time <= ts < inf:
                        plain.append(values)  # behind the bound (or non-finite)
                        continue
                    lo = ts - ts % pane
                    hi = lo + pane
                    got = panes.get(lo)
                    if got is None:
                        got = panes[lo] = {}
                    accs = got
                    get = accs.get
                if tup is None or refs(tup) > sole:
                    tup = make(values)
                else:
                    tup.values = values
                key = values[k0] if one else tuple(values[k] for k in ki)
                acc = get(key, missing)
                accs[key] = add(create() if acc is missing else acc, tup)
                n += 1
        except Exception as exc:
            self.records[i] += n
            self.fail(exc)
            return [*plain, *rows[n + len(plain):]]  # from the record that raised on
        self.records[i] += n
        return plain

    def ship(self, i: int) -> None:
        """Send target ``i``'s partials (nothing if it has none); event time: keyed
        ``(key, pane start)``, pane by pane."""
        panes = self.panes[i]
        if panes:
            by_pane: PartialsPayload = (
                [(k, ps) for ps, d in panes.items() for k in d],
                [a for d in panes.values() for a in d.values()], self.records[i])
            self.panes[i] = {}
            self.records[i] = 0
            self.transport(self.targets[i], (*self.head, by_pane))
            return
        accs = self.accs[i]
        if not accs:
            return
        payload: PartialsPayload = (list(accs), list(accs.values()), self.records[i])
        self.accs[i] = {}
        self.records[i] = 0
        self.transport(self.targets[i], (*self.head, payload))

    def flush(self) -> None:
        """Send every target's partials."""
        for i in range(len(self.targets)):
            self.ship(i)

    def fail(self, exc: Exception) -> None:
        """Stop combining: send the partials so far, plain records from now on."""
        self.failed = True
        log.warning("combining before the shuffle towards %r stopped: its add() raised "
                    "%r in the sending task; its records are sent as they are from now on "
                    "(set combine_before_shuffle = False on the bolt if create/add/merge "
                    "need prepare())", self.aggregation.consumer, exc)
        self.flush()
