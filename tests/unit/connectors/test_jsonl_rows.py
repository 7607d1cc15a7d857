"""The jsonl encoder's row loop (``connectors/jsonl_rows.py``) writes what json.dumps writes,
compiled or not, and hands every batch it does not cover back to the column encoder."""

from __future__ import annotations

import enum
import importlib.util
import json
import os
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.connectors import jsonl, jsonl_rows
from jstormpy.connectors.jsonl import encode_rows, encode_value
from jstormpy.connectors.jsonl_rows import encode_plain_rows, separators

# printable ASCII without the two characters json.dumps escapes there
PLAIN = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126,
                                       blacklist_characters='"\\'))


def dumps_lines(rows: list[Any], index: dict[str, int]) -> str:
    return "".join(json.dumps({name: row[pos] for name, pos in index.items()},
                              separators=(",", ":")) + "\n" for row in rows)


def plain_rows(rows: list[Any], index: dict[str, int]) -> str | None:
    return encode_plain_rows(rows, list(index.values()), separators(list(index), encode_value))


class Level(enum.IntEnum):
    LOW = 1


INDEXES = [{"word": 0, "count": 1}, {"count": 1, "word": 0}, {"n": 0},
           {"a": 2, "b": 0, "c": 1}, {"50%": 0, 'q"k': 1}]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_plain_rows_give_the_lines_json_dumps_gives(data: st.DataObject) -> None:
    """Exact ints (any size, any sign) and any text, in any key order and row position,
    as tuples or lists."""
    index = data.draw(st.sampled_from(INDEXES))
    value = st.one_of(PLAIN, st.text(), st.integers())
    rows = data.draw(st.lists(st.tuples(*[value] * len(index)), min_size=1, max_size=30))
    if data.draw(st.booleans()):
        rows = [list(r) for r in rows]  # type: ignore[misc]
    assert plain_rows(rows, index) == dumps_lines(rows, index)


@pytest.mark.parametrize("number", [0, -1, 255, 257, 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1,
                                    10 ** 30, -(10 ** 30)])
def test_ints_on_both_sides_of_64_bits_are_written_whole(number: int) -> None:
    """Compiled, ints that fit 64 bits are written from a C integer, the rest as Python
    writes them: the same digits."""
    index = {"word": 0, "count": 1}
    rows = [("w", number), ("x", -number)]
    assert plain_rows(rows, index) == dumps_lines(rows, index)


class Shouting(str):
    def __str__(self) -> str:
        return self.upper()


ESCAPED: list[str] = ['q"uote', "back\\slash", "\x7f", "\x1f", "tab\t", "new\nline", "é",
                     "\U0001f600", "\ud800", "50%s"]


@pytest.mark.parametrize("odd", ESCAPED, ids=repr)
def test_text_that_needs_escaping_is_escaped_as_json_dumps_escapes_it(odd: str) -> None:
    for index in ({"word": 0, "count": 1}, {"count": 1, "word": 0}):
        rows = [("cat", 1), (odd, 2), ("dog", 3), (odd + "x", 4)]
        assert plain_rows(rows, index) == dumps_lines(rows, index)


NOT_COVERED: list[Any] = [Shouting("quiet"), True, None, 1.5, Level.LOW, b"bytes", ["list"]]


@pytest.mark.parametrize("odd", NOT_COVERED, ids=repr)
def test_a_batch_with_one_value_it_does_not_cover_goes_back_to_the_columns(odd: Any) -> None:
    """The loop gives up on the whole batch (None); encode_rows then writes it through the
    column encoder, as json.dumps writes it."""
    index = {"word": 0, "count": 1}
    rows = [("cat", 1), (odd, 2), ("dog", 3)]
    assert plain_rows(rows, index) is None
    if isinstance(odd, bytes):  # not JSON: refused as json.dumps refuses it
        with pytest.raises(TypeError):
            encode_rows(rows, index)
    else:
        assert encode_rows(rows, index) == dumps_lines(rows, index)


def test_rows_of_another_length_are_not_covered() -> None:
    assert plain_rows([("cat", 1), ("dog",)], {"word": 0, "count": 1}) is None
    assert plain_rows([("cat", 1, 2)], {"word": 0, "count": 1}) is None
    assert encode_rows([("cat", 1), ("dog",)], {"word": 0, "count": 1}) is None


@pytest.mark.parametrize("loop", [True, False], ids=["row loop", "columns"])
@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.one_of(PLAIN, st.text(), st.integers(), st.booleans(),
                                         st.none(), st.floats(allow_nan=False)),
                               st.integers()), min_size=1, max_size=20))
def test_encode_rows_writes_the_same_with_or_without_the_row_loop(
        loop: bool, rows: list[tuple[Any, int]]) -> None:
    """Whether encode_rows takes the row loop (where it runs compiled) or not, the text is
    json.dumps's, plain batches and mixed ones alike."""
    was = jsonl.COMPILED_LOOP
    jsonl.COMPILED_LOOP = loop  # the row loop runs (slowly) as source too
    try:
        text = encode_rows(rows, {"word": 0, "count": 1})
    finally:
        jsonl.COMPILED_LOOP = was
    assert text == dumps_lines(rows, {"word": 0, "count": 1})


def test_the_flag_says_whether_the_module_runs_compiled() -> None:
    assert jsonl_rows.COMPILED_LOOP == (not jsonl_rows.__file__.endswith(".py"))
    assert jsonl.COMPILED_LOOP is jsonl_rows.COMPILED_LOOP


def test_the_source_runs_without_cython_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cython is needed to build the extension, not to run: without it the source's
    decorators are no-ops and the loop gives the same text."""
    monkeypatch.setitem(sys.modules, "cython", None)  # ``import cython`` raises ImportError
    source = os.path.join(os.path.dirname(jsonl_rows.__file__), "jsonl_rows.py")
    spec = importlib.util.spec_from_file_location("jsonl_rows_without_cython", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.COMPILED_LOOP is False
    rows = [("cat", 1), ("a b", -2 ** 70)]
    index = {"word": 0, "count": 1}
    assert module.encode_plain_rows(rows, [0, 1], module.separators(list(index), encode_value)) \
        == dumps_lines(rows, index)
    assert module.encode_plain_rows([(None, 1)], [0, 1], separators(list(index), encode_value)) \
        is None
