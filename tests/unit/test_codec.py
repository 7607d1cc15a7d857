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


class Word(str):
    pass


def _nest(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = [value]
    return value


_loop: list[Any] = [1]
_loop.append(_loop)

EDGE_ITEMS: list[Any] = [
    (4, 0, "default", [("w", 1), ("x", 2.5, None, b"b", True)]), (4, 0, "default", []),
    _nest("x", 4), _nest("x", 5), _nest("x", 6), _nest([], 5), _nest((), 6),
    (4, 0, "default", [(Word("w"),)]), (4, 0, "default", [(Point(1, 2),)]),
    (4, 0, "default", [("w", bytearray(b"x"))]), (4, 0, "default", [({"k": 1},)]),
    [1, [2, (3, "x")], ("y", [None])], _loop]


@pytest.mark.parametrize("compiled_check", [True, False], ids=["value loop", "passes"])
@pytest.mark.parametrize("item", EDGE_ITEMS, ids=repr)
def test_both_checks_pick_the_same_codec(compiled_check: bool, item: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The value-by-value check (what runs compiled) and the C-level passes (what runs as
    source) send the same items by marshal: nested to the same depth, exact types only."""
    from jstormpy.runtime import codec
    expected = MARSHAL if codec._plain([7, item]) else PICKLE
    monkeypatch.setattr(codec, "COMPILED_CHECK", compiled_check)
    assert encode_item(7, item)[:1] == expected


@given(st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.tuples(inner, inner)), max_leaves=12))
def test_both_checks_agree_on_any_nesting(item: Any) -> None:
    from jstormpy.runtime import codec
    expected = MARSHAL if codec._plain([7, item]) else PICKLE
    was = codec.COMPILED_CHECK
    try:
        for flag in (True, False):
            codec.COMPILED_CHECK = flag
            assert encode_item(7, item)[:1] == expected
    finally:
        codec.COMPILED_CHECK = was
