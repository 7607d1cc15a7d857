"""``key_by("field")``: the same output as ``key_by(lambda r: r["field"])`` (run through
``run_inline``, with its simulated crash), the key read inline, and a field the stream's
items lack refused at ``build()`` naming the stream."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.errors import TopologyError
from jstormpy.dataflow import Dataflow
from jstormpy.dataflow.fusion import ChainBolt
from jstormpy.testing import TestingSink, TestingSource, run_inline

from .drive import prepare, raw_tuple

records = st.lists(st.builds(lambda user, n: {"user": user, "n": n},
                             st.sampled_from(["u1", "u2", "u3", "", "ü"]) | st.integers(-3, 3),
                             st.integers(-100, 100)), min_size=1, max_size=40)


def _per_key(out: list[dict]) -> dict[str, list[int]]:
    """The running sums per key, sorted (the map after the reduce runs on two tasks, so
    the sink may get one key's sums out of order)."""
    got: dict[str, list[int]] = defaultdict(list)
    for r in out:
        got[repr(r["key"])].append(r["sum"])
    return {k: sorted(v) for k, v in got.items()}


def _running_sums(key: object, recs: list[dict], *, after_map: bool) -> list[dict]:
    flow = Dataflow("by-field")
    src = flow.source("events", TestingSource(recs, batch_size=3))  # one task: in order
    if after_map:  # the fields of a map's items are not known at build: read at run time
        src = src.map(lambda r: {**r, "twice": 2 * r["n"]})
    (src.filter(lambda r: r["n"] != 0)
        .key_by(key)
        .reduce(lambda a, b: {**b, "n": a["n"] + b["n"]}, parallelism=2)
        .map(lambda kv: {"key": kv.key, "sum": kv.value["n"]})
        .sink("out", TestingSink()))
    return run_inline(flow)


@settings(max_examples=15, deadline=None)
@given(records, st.booleans())
def test_key_by_field_equals_key_by_a_function_of_the_field(recs, after_map):
    by_field = _running_sums("user", recs, after_map=after_map)
    by_function = _running_sums(lambda r: r["user"], recs, after_map=after_map)
    assert _per_key(by_field) == _per_key(by_function)
    # and both are the plain-Python running sums per key
    want: dict[object, list[dict]] = defaultdict(list)
    sums: dict[object, int] = {}
    for r in recs:
        if r["n"] != 0:
            sums[r["user"]] = sums.get(r["user"], 0) + r["n"]
            want[repr(r["user"])].append({"key": r["user"], "sum": sums[r["user"]]})
    assert _per_key(by_field) == _per_key([r for rs in want.values() for r in rs])


def test_key_by_field_reads_the_key_inline_and_names_the_operator_after_it():
    flow = Dataflow("f")
    (flow.source("events", TestingSource([{"user": "a", "n": 1}]))
         .key_by("user").reduce(lambda a, b: b).sink("out", TestingSink()))
    topo = flow.build()
    assert list(topo.components) == ["events", "key_by-2-user", "reduce-3-lambda", "out"]
    bolt = topo.components["key_by-2-user"].obj
    assert isinstance(bolt, ChainBolt) and bolt.key_fn == "user"
    col = prepare(bolt, component="key_by-2-user")
    bolt.execute(raw_tuple(("u7", 3), fields=("user", "n")))
    assert col.stream() == [("u7", {"user": "u7", "n": 3})]  # (key, item)


def test_an_unknown_field_of_a_source_is_refused_at_build_naming_the_stream():
    flow = Dataflow("f")
    (flow.source("events", TestingSource([{"user": "a", "n": 1}]))
         .filter(lambda r: r["n"] > 0, name="positive")
         .key_by("usr").reduce(lambda a, b: b).sink("out", TestingSink()))
    with pytest.raises(TopologyError) as err:
        flow.build()
    msg = str(err.value)
    assert "'usr'" in msg and "'positive'" in msg and "user, n" in msg


def test_a_union_has_the_fields_all_its_inputs_have():
    flow = Dataflow("f")
    a = flow.source("a", TestingSource([{"user": "x", "n": 1}]))
    b = flow.source("b", TestingSource([{"user": "y", "m": 2}]))
    a.union(b).key_by("n").reduce(lambda x, y: y).sink("out", TestingSink())
    with pytest.raises(TopologyError, match=r"union of 'a', 'b' have no field 'n' "
                                            r"\(their fields: user\)"):
        flow.build()
    flow2 = Dataflow("g")
    a2 = flow2.source("a", TestingSource([{"user": "x", "n": 1}]))
    b2 = flow2.source("b", TestingSource([{"user": "y", "m": 2}]))
    a2.union(b2).key_by("user").reduce(lambda x, y: y).sink("out", TestingSink())
    assert "out" in flow2.build().components


def test_key_by_needs_a_function_or_a_non_empty_field_name():
    flow = Dataflow("f")
    src = flow.source("events", TestingSource([{"user": "a"}]))
    for bad in ("", 3, None):
        with pytest.raises(TopologyError, match="a function or a field name"):
            src.key_by(bad)  # type: ignore[arg-type]
