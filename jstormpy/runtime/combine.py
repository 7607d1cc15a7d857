"""Combining before the shuffle, the sending side: per target task, one partial
accumulator per key.

A :class:`~jstormpy.runtime.routing.Route` whose consumer accepts combined input (which
one does is decided by ``jstormpy/window/combine.py``) adds each emitted record to its
target's partial for the record's key with the consumer's ``create``/``add``, instead of
appending the record to the target's batch. When the route is flushed (whatever sends a
batch: ``batch_size`` keys in one target's partials, the linger, a barrier, a watermark,
the end of the stream) each target's partials go out as one DATA item whose payload is
a tuple ``(keys, accumulators, record counts)`` -- a plain batch is a list, so the
receiving executor tells the two apart by type.

``add`` runs the consumer's code in the sending task. If it raises, the route stops
combining for good: the partials so far are sent, then that record and every later one
go out as plain records, so the consumer's own ``add`` meets the record in the consumer's
task (and reports it there, as without combining).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

_MISSING = object()


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


PartialsPayload = tuple[list[Any], list[Any], int]
"""A combined DATA payload: keys, their partial accumulators, the records they stand for."""


class PartialBuffers:
    """One route's partial accumulators, per target position."""

    __slots__ = ("aggregation", "accs", "failed", "make_tuple", "records", "limit")

    def __init__(self, aggregation: CombiningAggregation, targets: int,
                 make_tuple: Callable[[Any], Any], limit: int) -> None:
        self.aggregation = aggregation
        self.accs: list[dict[Any, Any]] = [{} for _ in range(targets)]
        self.records = [0] * targets
        """Records folded into each target's partials since they were last sent."""
        self.make_tuple = make_tuple
        self.limit = limit
        """Keys a target's partials hold before they are sent on their own."""
        self.failed = False
        """``add`` or ``create`` raised once: the route sends plain records from then on."""

    def take(self, i: int) -> PartialsPayload | None:
        """Target ``i``'s partials as a payload (None: none), leaving it empty."""
        accs = self.accs[i]
        if not accs:
            return None
        records = self.records[i]
        self.accs[i] = {}
        self.records[i] = 0
        return list(accs), list(accs.values()), records

    def held(self) -> int:
        """Records held in partials not sent yet."""
        return sum(self.records)

    def compile_add(self, key_index: tuple[int, ...], position: Callable[[Any], int | None],
                    place: Callable[[Any], int], ship: Callable[[int], None],
                    append_plain: Callable[[int, Any], None], stream: str = "",
                    arity: int = 0, arity_error: Callable[[Any], None] | None = None,
                    other: Callable[[Any, str], None] | None = None) -> Callable[..., None]:
        """The route's per-record function: fold ``values`` into its target's partial.

        ``key_index``: the key fields' positions in a record; ``position(key)``: the
        target position from the route's memo (None: not memoised yet), ``place(key)``:
        computed; ``ship(i)``: send target ``i``'s partials; ``append_plain(i, values)``:
        the route's plain batching (after a failure).

        As the collector's ``emit`` (one call per record): ``stream`` is the route's
        stream, ``other(values, stream)`` the collector's ``emit`` for any other stream,
        ``arity`` the stream's declared field count and ``arity_error(values)`` raises
        the error for a record of another length.
        """
        accs_of = self.accs
        records = self.records
        create = self.aggregation.create
        add = self.aggregation.add
        make = self.make_tuple
        limit = self.limit
        refs = sys.getrefcount
        missing = _MISSING
        held: list[Any] = [None]  # the reused Tuple (add kept no reference to it)
        k0 = key_index[0]
        one = len(key_index) == 1

        def add_combined(values: Any, to: str = stream) -> None:
            if to != stream:  # only as emit, on another stream
                assert other is not None
                other(values, to)
                return
            if arity:
                try:  # a try costs nothing on Python >= 3.11 unless it raises
                    if len(values) != arity:
                        arity_error(values)  # type: ignore[misc]
                except TypeError:  # not a sequence (e.g. emit(5))
                    arity_error(values)  # type: ignore[misc]
            key = values[k0] if one else tuple(values[k] for k in key_index)
            i = position(key)
            if i is None:
                i = place(key)
            if self.failed:  # shared by the route's add and the collector's emit
                append_plain(i, values)
                return
            tup = held[0]
            # 3 references: held, this variable, the argument: add() kept none of it
            if tup is None or refs(tup) > 3:
                tup = held[0] = make(values)
            else:
                tup.values = values
            accs = accs_of[i]
            acc = accs.get(key, missing)
            try:
                accs[key] = add(create() if acc is missing else acc, tup)
            except Exception as exc:
                self.fail(exc, ship)
                append_plain(i, values)
                return
            records[i] += 1
            if acc is missing and len(accs) >= limit:
                ship(i)

        return add_combined

    def fail(self, exc: Exception, ship: Callable[[int], None]) -> None:
        """Stop combining: send the partials so far, plain records from now on."""
        self.failed = True
        log.warning("combining before the shuffle towards %r stopped: its add() raised "
                    "%r in the sending task; its records are sent as they are from now on "
                    "(set combine_before_shuffle = False on the bolt if create/add/merge "
                    "need prepare())", self.aggregation.consumer, exc)
        for i in range(len(self.accs)):
            ship(i)
