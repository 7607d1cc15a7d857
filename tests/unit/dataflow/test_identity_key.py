"""A ``key_by`` whose function returns the item (``key_by(lambda w: w)``) sends ``(item,)``
rows instead of ``(key, item)``: the same output as a key function that is not the
identity, through reduce, windows and joins, across ``run_inline``'s crash."""

from __future__ import annotations

import functools
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.dataflow import Dataflow
from jstormpy.dataflow.fusion import ChainBolt, is_identity
from jstormpy.dataflow.records import KEYED_FIELDS, SELF_KEYED_FIELDS
from jstormpy.testing import TestingSink, TestingSource, run_inline
from jstormpy.window import Count, TumblingWindows

from .drive import prepare, raw_tuple

IDENTITY = lambda v: v  # noqa: E731 - as users write it
NOT_IDENTITY = lambda v: v + 0  # noqa: E731 - the same keys for ints, a real call


def _returns_arg(x):
    """A def with a docstring is still the identity."""
    return x


class _Holder:
    def me(self):
        return self


def test_only_a_plain_function_returning_its_argument_is_the_identity():
    assert is_identity(IDENTITY) and is_identity(_returns_arg)
    for other in (NOT_IDENTITY, lambda v: v.lower(), str, _Holder().me,
                  functools.partial(_returns_arg), lambda *a: a, lambda a, b=1: a, "v", None):
        assert not is_identity(other), other


def test_an_identity_key_sends_the_item_alone_and_routes_on_it():
    flow = Dataflow("f")
    words = flow.source("lines", TestingSource(["a b"])).flat_map(lambda r: r["value"].split())
    words.key_by(IDENTITY).reduce(max).sink("out", TestingSink())
    flow2 = Dataflow("g")
    words2 = flow2.source("lines", TestingSource(["a b"])).flat_map(lambda r: r["value"].split())
    words2.key_by(str.lower).reduce(max).sink("out", TestingSink())
    bolt, other = (f.build().components["flat_map-2-lambda"].obj for f in (flow, flow2))
    assert isinstance(bolt, ChainBolt) and bolt.outputs == SELF_KEYED_FIELDS == ("_key",)
    assert other.outputs == KEYED_FIELDS
    rows = []
    for b in (bolt, other):
        col = prepare(b, component="flat_map-2-lambda")
        b.execute(raw_tuple(("x Y",), fields=("value",), source="lines"))
        rows.append(col.stream())
    assert rows == [[("x",), ("Y",)], [("x", "x"), ("y", "Y")]]  # (item,) vs (key, item)


def _flow(key, ints, side_ints):
    flow = Dataflow("ints")
    nums = flow.source("nums", TestingSource(ints, batch_size=2)).map(lambda r: r["value"])
    keyed = nums.key_by(key)
    keyed.reduce(lambda a, b: a + b).map(lambda kv: {"op": "reduce", "k": kv.key,
                                                     "v": kv.value}).sink("reduce", TestingSink())
    (keyed.window(TumblingWindows(size_ms=10), timestamp=lambda v: v, out_of_orderness_ms=40)
          .aggregate(Count())
          .map(lambda w: {"op": "window", "k": w.key, "start": w.start, "v": w.value})
          .sink("window", TestingSink()))
    other = flow.source("side", TestingSource(side_ints, batch_size=2)) \
        .map(lambda r: r["value"]).key_by(key)
    (keyed.join(other, window=TumblingWindows(size_ms=10), timestamp=(lambda v: v, lambda v: v),
                out_of_orderness_ms=40)
          .map(lambda j: {"op": "join", "k": j.key, "l": j.left, "r": j.right})
          .sink("join", TestingSink()))
    return flow


ints = st.lists(st.integers(0, 40), min_size=1, max_size=25)


@settings(max_examples=8, deadline=None)
@given(ints, ints)
def test_an_identity_key_gives_the_output_of_a_key_function_that_calls(left, right):
    for sink in ("reduce", "window", "join"):
        got = [Counter(repr(sorted(r.items())) for r in run_inline(_flow(key, left, right),
                                                                   sink=sink))
               for key in (IDENTITY, NOT_IDENTITY)]
        assert got[0] == got[1], sink
    joined = run_inline(_flow(IDENTITY, left, right), sink="join")
    assert Counter((r["l"], r["r"]) for r in joined) == Counter(
        (a, b) for a in left for b in right if a == b)
