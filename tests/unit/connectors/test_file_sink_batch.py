"""FileSink's batch path writes byte for byte what the per-tuple path writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.api.errors import SinkError
from jstormpy.connectors.jsonl import encode_rows
from jstormpy.connectors.sinks import FileSink, read_committed
from tests.file_sink_txn import committed, started

FIELDS = {"word": 0, "count": 1}

ODD_VALUES: list[Any] = ["plain", "", "quote\"back\\slash", "new\nline\ttab", "é ünïcode ✓",
                         "\U0001f600 emoji", "},{\"x\":1", 0, -5, 2 ** 70, 1.5, float("nan"),
                         float("inf"), True, False, None, [1, "a"], {"k": [None]}]


def start(directory: Path, sink_cls: type[FileSink] = FileSink) -> FileSink:
    return started(sink_cls(directory, format="jsonl"))  # type: ignore[no-any-return]


commit = committed


def per_tuple_bytes(directory: Path, rows: list[tuple[Any, ...]],
                    index: dict[str, int] = FIELDS) -> bytes:
    sink = start(directory)
    for r in rows:
        sink.execute(Tuple(r, index, "count"))
    return commit(sink)


def batch_bytes(directory: Path, batches: list[list[tuple[Any, ...]]],
                index: dict[str, int] = FIELDS) -> bytes:
    sink = start(directory)
    for rows in batches:
        sink.execute_batch(Batch(rows, index, "count", "default", 7))
    return commit(sink)


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_batch_lines_equal_per_tuple_lines_for_any_json_value(tmp_path: Path, value: Any) -> None:
    rows = [("w", value), (value, 3), ("x", value)] if isinstance(value, str) else \
        [("w", value), ("x", value)]
    assert batch_bytes(tmp_path / "b", [rows]) == per_tuple_bytes(tmp_path / "t", rows)


def test_mixed_column_types_and_many_batches(tmp_path: Path) -> None:
    batches = [[(f"w{i}", i) for i in range(b * 100, b * 100 + 100)] for b in range(5)]
    batches.append([("mixed", 1), ("mixed", 2.5), ("mixed", None), (7, "seven")])
    rows = [r for b in batches for r in b]
    got = batch_bytes(tmp_path / "b", batches)
    assert got == per_tuple_bytes(tmp_path / "t", rows)
    assert [json.loads(line) for line in got.decode().splitlines()][-1] == \
        {"word": 7, "count": "seven"}


def test_batch_and_single_writes_interleave_in_arrival_order(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.execute(Tuple(("a", 1), FIELDS, "count"))
    sink.execute_batch(Batch([("b", 2), ("c", 3)], FIELDS, "count"))
    sink.execute(Tuple(("d", 4), FIELDS, "count"))
    commit(sink)
    assert [r["word"] for r in read_committed(tmp_path)] == ["a", "b", "c", "d"]


def test_short_rows_from_an_older_version_keep_the_per_tuple_shape(tmp_path: Path) -> None:
    rows = [("a", 1), ("b",)]  # a gray release: the older version sent one field
    assert encode_rows(rows, FIELDS) is None
    assert batch_bytes(tmp_path / "b", [rows]) == per_tuple_bytes(tmp_path / "t", rows)
    assert read_committed(tmp_path / "b") == [{"word": "a", "count": 1}, {"word": "b"}]


def test_key_order_follows_the_index(tmp_path: Path) -> None:
    index = {"count": 1, "word": 0}
    rows = [("a", 1), ("b", 2)]
    got = batch_bytes(tmp_path / "b", [rows], index)
    assert got == per_tuple_bytes(tmp_path / "t", rows, index)
    assert got.splitlines()[0] == b'{"count":1,"word":"a"}'


def test_unencodable_record_is_skipped_and_reported_after_the_rest(tmp_path: Path) -> None:
    sink = start(tmp_path)
    rows = [("a", 1), ("bad", object()), ("c", 3), ("worse", {1, 2})]
    with pytest.raises(SinkError, match=r"cannot encode .*bad.*\(and 1 more record"):
        sink.execute_batch(Batch(rows, FIELDS, "count"))
    commit(sink)
    assert read_committed(tmp_path) == [{"word": "a", "count": 1}, {"word": "c", "count": 3}]


def test_batch_outside_a_transaction_is_refused(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.pre_commit(1)
    with pytest.raises(SinkError, match="no open transaction"):
        sink.execute_batch(Batch([("a", 1)], FIELDS, "count"))


def test_subclass_overriding_write_still_sees_every_tuple(tmp_path: Path) -> None:
    class Upper(FileSink):
        def write(self, tup: Tuple) -> None:
            super().write(Tuple((tup["word"].upper(), tup["count"]), FIELDS, "count"))

    sink = start(tmp_path, Upper)
    sink.execute_batch(Batch([("a", 1), ("b", 2)], FIELDS, "count"))
    commit(sink)
    assert [r["word"] for r in read_committed(tmp_path)] == ["A", "B"]


def test_percent_in_field_names_and_bools_among_ints(tmp_path: Path) -> None:
    index = {"p%s": 0, "n%d": 1}
    rows = [("a%s", 1), ("b", True), ("c", 2.0)]
    got = batch_bytes(tmp_path / "b", [rows], index)
    assert got == per_tuple_bytes(tmp_path / "t", rows, index)
    assert got.splitlines()[1] == b'{"p%s":"b","n%d":true}'


def test_percent_in_names_and_values_beside_an_all_int_column(tmp_path: Path) -> None:
    """Exact-int columns go into the batch's one format as numbers (``%d``): a ``%`` in a
    field name or a string value must still come out as itself."""
    index = {"100%": 0, "n%d": 1}
    rows = [("50%s", 3), ("%d%%", -5), ("x", 2 ** 70)]
    got = batch_bytes(tmp_path / "b", [rows], index)
    assert got == per_tuple_bytes(tmp_path / "t", rows, index)
    assert got.splitlines()[1] == b'{"100%":"%d%%","n%d":-5}'


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(), min_size=1, max_size=20))
def test_float_columns_encode_as_json_dumps_writes_them(prices: list[float]) -> None:
    """A column of floats (finite ones through ``repr``, NaN and infinities not) gives
    the lines json.dumps gives per record."""
    rows = [("w", p) for p in prices]
    text = encode_rows(rows, FIELDS)
    assert text == "".join(json.dumps({"word": w, "count": p}, separators=(",", ":")) + "\n"
                           for w, p in rows)


class Shouting(str):
    """A str subclass whose ``str()`` differs from its text (json.dumps writes the text)."""

    def __str__(self) -> str:
        return self.upper()


EDGE_TEXTS: list[Any] = ["cat", "", " ", "a b", "~", "\x7f", "\x1f", "tab\there", 'q"uote',
                         "back\\slash", "50%", "%s%d", "é", "✓", "\U0001f600", "\ud800",
                         Shouting("quiet")]


@pytest.mark.parametrize("odd", EDGE_TEXTS, ids=repr)
def test_text_columns_encode_as_json_dumps_writes_them(odd: str) -> None:
    """A str column, all plain or with one value that needs escaping (or is a str
    subclass) among plain ones, gives the bytes json.dumps gives per record."""
    for words in (["cat", "dog", "a b"], ["cat", odd, "dog"], [odd]):
        rows = [(w, i) for i, w in enumerate(words)]
        assert encode_rows(rows, FIELDS) == "".join(
            json.dumps({"word": w, "count": c}, separators=(",", ":")) + "\n" for w, c in rows)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(), st.integers(), st.text(alphabet=st.characters(
    min_codepoint=0, max_codepoint=0x80))), min_size=1, max_size=20))
def test_any_text_and_int_rows_encode_as_json_dumps_writes_them(
        rows: list[tuple[str, int, str]]) -> None:
    index = {"word": 0, "count": 1, "note": 2}
    assert encode_rows(rows, index) == "".join(
        json.dumps({"word": w, "count": c, "note": t}, separators=(",", ":")) + "\n"
        for w, c, t in rows)
