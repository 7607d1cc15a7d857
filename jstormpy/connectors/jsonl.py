"""JSON-lines encoding for :class:`~jstormpy.connectors.sinks.FileSink`, a batch at a time.

``FileSink`` writes one compact JSON object per tuple (``{"field": value, ...}``, keys in
the stream's field order). Encoding a tuple at a time costs a ``Tuple``, a dict
(``as_dict``) and a JSON encoder call per record. :func:`encode_rows` produces the same
bytes for a whole channel batch with a handful of C-level passes: each column is encoded
once (strings with the C string escaper and finite floats with ``float.__repr__``,
exactly what :mod:`json` writes for them; anything else with the JSON encoder) except
exact ``int`` columns, which stay numbers, and columns of plain text (printable ASCII
without ``"`` or ``\\``, :func:`is_plain_text`), which go in as they are; the columns
are laid into one flat list by slice assignment (every ``k``-th slot, a C-level pass per
column) and the lines come out of one ``%`` format of a template line (the constant key
texts, ``%s`` for encoded text, ``%d`` for the exact ints, ``"%s"`` for plain text: what
``json.dumps`` writes for them) repeated once per row. Where
``connectors/jsonl_rows.py`` runs compiled, a batch whose values are all exact ints and
exact strs goes through its row loop instead (the same text, fewer instructions).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from json import encoder as _json_encoder
from math import isfinite
from typing import Any

from jstormpy.connectors.jsonl_rows import COMPILED_LOOP, encode_plain_rows, separators

encode_value = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(obj, separators=(",", ":"))`` without building an encoder per call."""

_encode_str = _json_encoder.encode_basestring_ascii  # the C escaper json.dumps uses
_int_repr = int.__repr__  # what json.dumps writes for an exact int
_INT_ONLY = {int}
_float_repr = float.__repr__  # what json.dumps writes for a finite exact float
_FLOAT_ONLY = {float}
_STR_ONLY = {str}


def encode_column(column: Sequence[Any]) -> list[str]:
    """Each value of ``column`` as the JSON text ``json.dumps`` writes for it.

    Raises:
        TypeError: a value is not JSON serialisable.
        ValueError: a value cannot be encoded (e.g. a circular reference).
    """
    first = type(column[0]) if column else str
    if first is str:
        try:
            return list(map(_encode_str, column))
        except TypeError:
            pass  # not all strings: the generic encoder below
    elif first is int and set(map(type, column)) == {int}:
        return list(map(_int_repr, column))
    elif first is float and set(map(type, column)) == _FLOAT_ONLY and \
            all(map(isfinite, column)):
        return list(map(_float_repr, column))  # json.dumps: repr, unless NaN or +-inf
    return list(map(encode_value, column))


def is_plain_text(column: Sequence[Any]) -> bool:
    """Whether every value of ``column`` is an exact ``str`` of printable ASCII without a quote or
    a backslash: the strings ``json.dumps`` writes as themselves between quotes (its ASCII
    escaper changes only ``"``, ``\\``, control characters, DEL and non-ASCII). C-level
    checks of the column's joined text, no call per value.

    Example:
        >>> is_plain_text(["cat", "a b", ""]), is_plain_text(['say "hi"']), is_plain_text(["é"])
        (True, False, False)
    """
    if set(map(type, column)) != _STR_ONLY:
        return False  # ``%s`` writes a str subclass with its ``__str__``, not its text
    text = "".join(column)
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


@lru_cache(maxsize=64)
def _row_texts(names: tuple[str, ...]) -> list[str]:
    """The compiled row loop's constant texts for the keys ``names`` (one set per shape)."""
    return separators(names, encode_value)


def encode_rows(rows: Sequence[Sequence[Any]], index: Mapping[str, int]) -> str | None:
    """The jsonl text (``"\\n"``-terminated lines) of ``rows``, keys from ``index``.

    ``index`` maps field name to position, in the order the keys are written (the order
    ``Tuple.as_dict`` uses). Returns ``None`` when the batch does not have the plain shape
    (no fields, a field name that is not a ``str`` (``json.dumps`` writes ``1`` as the
    key ``"1"``), or a row whose length differs from the number of fields, as rows sent
    by an older code version during a gray release can): the caller then encodes tuple
    by tuple.

    Raises:
        TypeError: a value is not JSON serialisable.
        ValueError: a value cannot be encoded.
    """
    n = len(index)
    if not n or not rows or not all(type(name) is str for name in index):
        return None
    if COMPILED_LOOP:  # plain rows in one compiled loop (connectors/jsonl_rows.py)
        text = encode_plain_rows(rows, list(index.values()), _row_texts(tuple(index)))
        if text is not None:
            return text
    try:
        columns = list(zip(*rows, strict=True))
    except ValueError:
        return None  # rows of different lengths
    if len(columns) != n:
        return None
    rows_n = len(rows)
    # one template line per row ("{k0:%s,k1:%d}\n"), every value of the batch laid into
    # one flat list (every n-th slot, a C-level pass per column) and one ``%`` format:
    # exact ints go in raw (``%d`` writes what json.dumps writes), the rest as JSON text
    values: list[Any] = [None] * (n * rows_n)
    specs = []
    for j, pos in enumerate(index.values()):
        column = columns[pos]
        if type(column[0]) is int and set(map(type, column)) == _INT_ONLY:
            values[j::n] = column
            specs.append("%d")
        elif type(column[0]) is str and is_plain_text(column):
            values[j::n] = column  # as they are, between the template's quotes
            specs.append('"%s"')
        else:
            values[j::n] = encode_column(column)
            specs.append("%s")
    line = "{" + ",".join(encode_value(name).replace("%", "%%") + ":" + spec
                          for name, spec in zip(index, specs, strict=True)) + "}\n"
    return (line * rows_n) % tuple(values)
