"""A dataflow sink hands whole channel batches of records to a sink with a batch write
(``Sink.write_batch``), FileSink's among them: the same records and the same bytes as
record by record, for any mix of record shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.barrier.twophase import Sink
from jstormpy.connectors.sinks import FileSink
from jstormpy.dataflow.records import ITEM_FIELDS, KEYED_FIELDS, Wire, as_record
from jstormpy.dataflow.sink_adapter import dataflow_sink
from tests.file_sink_txn import committed, started

ITEM = {("up", "default"): Wire.ITEM}


class Pair(NamedTuple):
    key: str
    value: int


def _batch(rows: list[tuple[Any, ...]], fields: tuple[str, ...] = ITEM_FIELDS) -> Batch:
    index = {f: i for i, f in enumerate(fields)}
    return Batch(rows, index, "up", "default", 1, Tuple.bound(index, "up", "default", 1))


class _BatchWriter(Sink):
    """Records what arrives through ``write`` and through ``write_batch``."""

    def __init__(self) -> None:
        self.batches: list[tuple[tuple[str, ...], int]] = []
        self.records: list[dict[str, Any]] = []

    def begin(self, checkpoint_id: int) -> None:
        pass

    def write(self, tup: Tuple) -> None:
        self.records.append(tup.as_dict())

    def write_batch(self, batch: Batch) -> None:
        self.batches.append((batch.fields, len(batch)))
        assert batch.source == "up" and batch.task == 1
        self.records.extend(t.as_dict() for t in batch)


def test_a_sink_with_a_batch_write_gets_runs_of_one_record_shape_as_batches() -> None:
    sink = dataflow_sink(_BatchWriter(), ITEM)
    rows = [({"a": 1, "b": "x"},), ({"a": 2, "b": "y"},), ({"b": "z", "a": 3},), (7,), (8,),
            (Pair("k", 1),)]
    sink.execute_batch(_batch(rows))
    assert sink.records == [as_record(r[0]) for r in rows]
    assert sink.batches == [(("a", "b"), 2), (("b", "a"), 1), (("value",), 2),
                            (("key", "value"), 1)]


def test_keyed_items_reach_the_batch_write_too() -> None:
    sink = dataflow_sink(_BatchWriter(), {("up", "default"): Wire.KEYED})
    sink.execute_batch(_batch([("k", {"n": 1}), ("k", {"n": 2})], KEYED_FIELDS))
    assert sink.records == [{"n": 1}, {"n": 2}] and sink.batches == [(("n",), 2)]


def _file_sink(directory: Path) -> Any:
    return started(FileSink(directory), lambda sink: dataflow_sink(sink, ITEM))


values = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=4),
                   st.none(), st.booleans(), st.lists(st.integers(), max_size=2))
records = st.one_of(
    st.dictionaries(st.sampled_from(["auction", "price", "é", 'q"', "%s", 1, None]), values, max_size=3),
    st.fixed_dictionaries({"auction": st.integers(), "price": values}),
    st.builds(Pair, st.text(max_size=3), st.integers()),
    values)


@settings(max_examples=40, deadline=None)
@given(st.lists(records, max_size=40), st.integers(1, 9))
def test_a_dataflow_file_sink_writes_the_same_bytes_batched_as_record_by_record(
        tmp_path_factory: Any, items: list[Any], size: int) -> None:
    by_record = _file_sink(tmp_path_factory.mktemp("r"))
    batched = _file_sink(tmp_path_factory.mktemp("b"))
    index = {"_item": 0}
    for item in items:
        by_record.execute(Tuple((item,), index, "up", "default", 1))
    for i in range(0, len(items), size):
        batched.execute_batch(_batch([(it,) for it in items[i:i + size]]))
    if not items:
        return
    assert committed(batched) == committed(by_record)
