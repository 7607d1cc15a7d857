"""The dataflow's sink adapter: a copy of the user's sink that writes every item it
receives as a record (``as_record``).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping
from typing import Any

from jstormpy.api.component import Tuple
from jstormpy.barrier.twophase import Sink
from jstormpy.dataflow.fusion import InputKey
from jstormpy.dataflow.records import (
    PLAIN_ITEMS,
    RecordTuples,
    Wire,
    decode_item,
    record_batches,
)


def dataflow_sink(sink: Any, inputs: Mapping[InputKey, Wire]) -> Any:
    """A copy of the user's ``sink`` that writes every item it receives as a record.

    The copy's class is a subclass of the sink's own (same slots), whose ``execute``
    turns the incoming dataflow tuple into a Tuple with the record's fields
    (:func:`~jstormpy.dataflow.records.as_record`) and hands it to the sink's own
    ``execute``; its ``execute_batch`` goes tuple by tuple through that. Everything else
    (begin / write / pre_commit / commit / abort, snapshots) is the sink's own.
    """
    base = type(sink)
    sub = _SINK_CLASSES.get(base)
    if sub is None:
        sub = _SINK_CLASSES[base] = type(base.__name__, (base,), {
            "__slots__": (), "__module__": base.__module__,
            "__qualname__": base.__qualname__, "execute": _sink_execute,
            "execute_batch": _sink_execute_batch, "_df_base": base})
    out = copy.copy(sink)
    out.__class__ = sub
    out.__dict__["_df_inputs"] = dict(inputs)
    return out


_SINK_CLASSES: dict[type, type] = {}


def _record_tuples(sink: Any) -> RecordTuples:
    records = sink.__dict__.get("_df_records")
    if records is None:
        records = sink.__dict__["_df_records"] = RecordTuples()
    return records


def _sink_execute(self: Any, tup: Tuple) -> None:
    item = decode_item(self.__dict__["_df_inputs"][(tup.source, tup.stream)], tup)
    self._df_base.execute(self, _record_tuples(self).channel(tup.source, tup.task)(item))


def _sink_execute_batch(self: Any, batch: Any) -> None:
    """A channel batch: its layout and record builder looked up once, items read off the
    rows.

    An unkeyed row ``(item,)`` of a plain item (a str, a number, a plain tuple, ...) is
    already the values of its ``{"value": item}`` record: it goes into one record Tuple
    reused from row to row for as long as the sink keeps no reference to it (checked
    with ``sys.getrefcount``, as the executor does for its own tuples). A sink whose class
    keeps ``Sink.execute`` gets ``write`` called directly (that is all it does), and if
    it has a batch write of its own (``write_batch``, FileSink's encodes column by
    column), the records go to it as batches of one record shape
    (:func:`~jstormpy.dataflow.records.record_batches`): no Tuple per record."""
    wire = self.__dict__["_df_inputs"][(batch.source, batch.stream)]
    base_execute = self._df_base.execute
    if (base_execute is Sink.execute and type(self).write_batch is not Sink.write_batch
            and wire is not Wire.FIRING and wire is not Wire.RAW):
        items = batch[0] if wire is Wire.ITEM else batch[-1]
        for shape in record_batches(items, batch.source, batch.task):
            self.write_batch(shape)
        return
    execute: Callable[[Tuple], None]
    if base_execute is Sink.execute:  # not overridden: it is write(), one call less
        execute = self.write
    else:
        def execute(tup: Tuple) -> None:
            base_execute(self, tup)
    records = _record_tuples(self)
    record = records.channel(batch.source, batch.task)
    if wire is Wire.ITEM:
        value_cls = records.value_class(batch.source, batch.task)
        plain = PLAIN_ITEMS
        refs = sys.getrefcount
        tup: Any = None
        for values in batch.rows:
            if type(values[0]) in plain:
                # 2 references (this variable and the argument): the sink kept none
                if tup is None or refs(tup) > 2:
                    tup = value_cls(values)  # type: ignore[call-arg]  # Tuple.bound
                else:
                    tup.values = values
                execute(tup)
            else:
                execute(record(values[0]))
    elif wire is Wire.KEYED or wire is Wire.LATE:
        for values in batch.rows:
            execute(record(values[-1]))
    else:
        for tup in batch:
            execute(record(decode_item(wire, tup)))


__all__ = ["dataflow_sink"]
