"""The compiled chain bolts take whole channel batches (``execute_batch``): the same
items out, in the same order, as tuple by tuple, for every input layout."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch, failed_input
from jstormpy.api.component import Tuple
from jstormpy.barrier.twophase import Sink
from jstormpy.dataflow.fusion import ChainBolt, Step, StepKind, raw_items
from jstormpy.dataflow.records import ITEM_FIELDS, KEYED_FIELDS, Wire, as_record
from jstormpy.dataflow.sink_adapter import dataflow_sink

from .drive import prepare

SPLIT = [Step(StepKind.FLAT_MAP, lambda r: r["s"].split())]
STEPS = [Step(StepKind.FLAT_MAP, lambda r: r["s"].split()),
         Step(StepKind.FILTER, lambda w: w != "a"), Step(StepKind.MAP, str.upper)]
sentences = st.lists(st.lists(st.sampled_from(["a", "b", "cc", "d"]), max_size=5)
                     .map(" ".join), max_size=30)


def _batch(rows, fields):
    index = {f: i for i, f in enumerate(fields)}
    return Batch(list(rows), index, "up", "default", 1, Tuple.bound(index, "up", "default", 1))


def _both(make, rows, fields, size):
    by_tuple, batched = make(), make()
    col_t, col_b = prepare(by_tuple), prepare(batched)
    index = {f: i for i, f in enumerate(fields)}
    for row in rows:
        by_tuple.execute(Tuple(row, index, "up", "default", 1))
    for i in range(0, len(rows), size):
        batched.execute_batch(_batch(rows[i:i + size], fields))
    return col_t.stream(), col_b.stream()


@settings(max_examples=40, deadline=None)
@given(sentences, st.integers(1, 6))
def test_a_source_chain_gives_the_same_items_per_batch(lines, size):
    rows = [(s, i) for i, s in enumerate(lines)]
    raw = {("up", "default"): Wire.RAW}
    for steps, key_fn in ((SPLIT, len), (STEPS, len), (STEPS, None), (SPLIT, None)):
        by_tuple, batched = _both(lambda s=steps, k=key_fn: ChainBolt(raw, s, key_fn=k),
                                  rows, ("s", "n"), size)
        assert batched == by_tuple
        if steps is SPLIT:
            words = [w for s in lines for w in s.split()]
            assert by_tuple == [(len(w), w) if key_fn else (w,) for w in words]


@settings(max_examples=30, deadline=None)
@given(sentences, st.integers(1, 6))
def test_item_and_keyed_chains_give_the_same_items_per_batch(lines, size):
    steps = [Step(StepKind.MAP, lambda s: s + "!")]
    item = {("up", "default"): Wire.ITEM}
    keyed = {("up", "default"): Wire.KEYED}
    by_tuple, batched = _both(lambda: ChainBolt(item, steps), [(s,) for s in lines],
                              ITEM_FIELDS, size)
    assert batched == by_tuple == [(s + "!",) for s in lines]
    by_tuple, batched = _both(lambda: ChainBolt(keyed, steps, key_fn=len),
                              [(0, s) for s in lines], KEYED_FIELDS, size)
    assert batched == by_tuple == [(len(s) + 1, s + "!") for s in lines]


def test_raw_items_match_as_dict_for_short_rows_and_any_field_order():
    short = _batch([("x", 1), ("y",)], ("s", "n"))  # an older version's shorter tuple
    assert list(raw_items(short)) == [{"s": "x", "n": 1}, {"s": "y"}]
    index = {"n": 1, "s": 0}  # positions not in insertion order: the Tuple's own dicts
    odd = Batch([("x", 1)], index, "up", "default", 1, Tuple.bound(index, "up", "default", 1))
    got = list(raw_items(odd))
    assert got == [{"n": 1, "s": "x"}] and list(got[0]) == ["n", "s"]
    for fields, rows in [(("line",), [("a",), ("b",)]), (("line",), [("a",), ()]),
                         (("s", "n", "t"), [("x", 1, 2.0), ("y", 2)])]:
        batch = _batch(rows, fields)
        assert list(raw_items(batch)) == [t.as_dict() for t in batch], (fields, rows)


class _Keeper(Sink):
    """A sink that keeps every Tuple it is given (and one that only reads them)."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.kept: list = []
        self.read: list = []

    def begin(self, checkpoint_id):
        pass

    def write(self, tup):
        if self.keep:
            self.kept.append(tup)
        self.read.append(tup.as_dict())

    def pre_commit(self, checkpoint_id):
        pass

    def commit(self, checkpoint_id):
        pass


items = st.lists(st.one_of(st.integers(), st.text(max_size=3),
                           st.tuples(st.text(max_size=2), st.integers()),
                           st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=2)),
                 max_size=40)


@settings(max_examples=40, deadline=None)
@given(items, st.integers(1, 7), st.booleans())
def test_the_sink_adapter_writes_the_same_records_batched_as_tuple_by_tuple(rows, size, keep):
    """Plain items share one reused record Tuple while the sink keeps none: a sink that
    keeps them still gets a Tuple of its own per record, and every record is right."""
    inputs = {("up", "default"): Wire.ITEM}
    by_tuple = dataflow_sink(_Keeper(keep), inputs)
    batched = dataflow_sink(_Keeper(keep), inputs)
    index = {f: i for i, f in enumerate(ITEM_FIELDS)}
    for item in rows:
        by_tuple.execute(Tuple((item,), index, "up", "default", 1))
    for i in range(0, len(rows), size):
        batched.execute_batch(_batch([(it,) for it in rows[i:i + size]], ITEM_FIELDS))
    assert batched.read == by_tuple.read == [as_record(it) for it in rows]
    if keep:
        assert [t.as_dict() for t in batched.kept] == batched.read
        assert len({id(t) for t in batched.kept}) == len(rows)


class _Filtering(_Keeper):
    """A sink that overrides ``execute``: the batched adapter must still go through it."""

    def execute(self, tup):
        if tup.as_dict().get("value") != 0:
            super().execute(tup)


def test_the_sink_adapter_keeps_a_sinks_own_execute():
    inputs = {("up", "default"): Wire.ITEM}
    sink = dataflow_sink(_Filtering(False), inputs)
    sink.execute_batch(_batch([(0,), (1,), ({"value": 0},), (2,)], ITEM_FIELDS))
    assert sink.read == [{"value": 1}, {"value": 2}]


def test_a_failing_step_of_a_batch_names_the_item_it_failed_on():
    """The failure report of a batch shows the record the user's function raised on."""
    def bad(w):
        if w == "boom":
            raise ValueError(w)
        return w

    split = Step(StepKind.FLAT_MAP, lambda r: r["s"].split())
    for step in (Step(StepKind.MAP, bad), Step(StepKind.FILTER, bad),
                 Step(StepKind.FLAT_MAP, lambda w: [bad(w)])):
        bolt = ChainBolt({("up", "default"): Wire.RAW}, [split, step], key_fn=len)
        col = prepare(bolt)
        bolt.execute_batch(_batch([("a b",), ("c",)], ("s",)))
        assert col.stream() == [(1, "a"), (1, "b"), (1, "c")]
        batch = _batch([("a b",), ("x boom y",)], ("s",))
        try:
            bolt.execute_batch(batch)
        except ValueError as exc:
            assert failed_input(exc, batch).record == "boom"
        else:
            raise AssertionError("no error")
