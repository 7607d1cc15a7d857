"""The DATA frame codec round-trips every item exactly, with marshal only where safe."""

from __future__ import annotations

import array
import collections
import marshal
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jstormpy.api.component import Tuple
from jstormpy.runtime.codec import MARSHAL, PICKLE, decode_item, encode_item

Point = collections.namedtuple("Point", "x y")

scalars = st.one_of(st.text(), st.integers(), st.floats(allow_nan=False), st.booleans(),
                    st.none(), st.binary())
rows = st.lists(st.one_of(st.tuples(scalars), st.tuples(scalars, scalars),
                          st.lists(scalars, max_size=3)), max_size=20)


def roundtrip(dst: int, item: Any) -> tuple[bytes, Any]:
    data = encode_item(dst, item)
    got_dst, got = decode_item(memoryview(data))
    assert got_dst == dst
    return data[:1], got


@given(rows)
def test_scalar_batches_go_by_marshal_and_come_back_equal_with_the_same_types(
        batch: list[Any]) -> None:
    item = (4, 0, "default", batch)
    tag, got = roundtrip(7, item)
    assert tag == MARSHAL
    assert got == item
    assert [type(v) for r in got[3] for v in r] == [type(v) for r in batch for v in r]
    assert [type(r) for r in got[3]] == [type(r) for r in batch]


@pytest.mark.parametrize("value", [
    {"a": 1}, {1, 2}, bytearray(b"xy"), array.array("i", [1, 2]), Point(1, 2),
    Tuple(("w",), {"word": 0}, "split"), 1 + 2j, frozenset({1}), ValueError("boom"),
], ids=lambda v: type(v).__name__)
def test_anything_else_goes_by_pickle_and_keeps_its_type(value: Any) -> None:
    item = (4, 0, "default", [("w", value)])
    tag, got = roundtrip(7, item)
    assert tag == PICKLE
    assert type(got[3][0][1]) is type(value)
    if not isinstance(value, (Exception, Tuple)):  # no value equality for these
        assert got == item


def test_nested_values_deeper_than_the_marshal_limit_still_round_trip() -> None:
    deep: Any = "x"
    for _ in range(10):
        deep = (deep,)
    tag, got = roundtrip(1, (2, 0, "default", [(deep,)]))
    assert tag == PICKLE and got[3][0][0] == deep


def test_markers_and_credit_grants_go_by_marshal() -> None:
    for item in [(3, 1, "", 17), (3, 2, "", 1.5e12), (3, 3, "", None),
                 ("credit", 3, 4, 99)]:
        assert roundtrip(-1, item) == (MARSHAL, item)


@pytest.mark.parametrize("payload", [b"", b"X123", MARSHAL + marshal.dumps([1, 2]),
                                     PICKLE + pickle.dumps("just a string"),
                                     MARSHAL + b"\xff\x00garbage"])
def test_malformed_payloads_raise(payload: bytes) -> None:
    with pytest.raises((ValueError, EOFError, TypeError)):
        decode_item(memoryview(payload))
