"""JSON-lines encoding for :class:`~jstormpy.connectors.sinks.FileSink`, a batch at a time.

``FileSink`` writes one compact JSON object per tuple (``{"field": value, ...}``, keys in
the stream's field order). Encoding a tuple at a time costs a ``Tuple``, a dict
(``as_dict``) and a JSON encoder call per record. :func:`encode_rows` produces the same
bytes for a whole channel batch with a handful of C-level passes: each column is encoded
once (strings with the C string escaper, exact ``int`` values with ``int.__repr__``, both
exactly what :mod:`json` writes for them; anything else with the JSON encoder), the
columns and the constant key texts are laid into one list by slice assignment (every
``k``-th slot, a C-level pass per column) and the lines come out of one ``str.join``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import repeat
from json import encoder as _json_encoder
from typing import Any

encode_value = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(obj, separators=(",", ":"))`` without building an encoder per call."""

_encode_str = _json_encoder.encode_basestring_ascii  # the C escaper json.dumps uses
_int_repr = int.__repr__  # what json.dumps writes for an exact int


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
    return list(map(encode_value, column))


def encode_rows(rows: Sequence[Sequence[Any]], index: Mapping[str, int]) -> str | None:
    """The jsonl text (``"\\n"``-terminated lines) of ``rows``, keys from ``index``.

    ``index`` maps field name to position, in the order the keys are written (the order
    ``Tuple.as_dict`` uses). Returns ``None`` when the batch does not have the plain shape
    (no fields, or a row whose length differs from the number of fields, as rows sent by
    an older code version during a gray release can): the caller then encodes tuple by
    tuple.

    Raises:
        TypeError: a value is not JSON serialisable.
        ValueError: a value cannot be encoded.
    """
    n = len(index)
    if not n or not rows:
        return None
    try:
        columns = list(zip(*rows, strict=True))
    except ValueError:
        return None  # rows of different lengths
    if len(columns) != n:
        return None
    rows_n = len(rows)
    keys = [encode_value(name) for name in index]
    # slots per row: "{k0:" v0 ",k1:" v1 ... v(n-1); the next row's "{k0:" closes the line
    width = 2 * n
    end = width * rows_n
    parts: list[Any] = [None] * (end + 1)
    for j, pos in enumerate(index.values()):
        sep = "}\n{" + keys[0] + ":" if j == 0 else "," + keys[j] + ":"
        parts[2 * j:end:width] = repeat(sep, rows_n)
        parts[2 * j + 1:end:width] = encode_column(columns[pos])
    parts[0] = "{" + parts[0][3:]  # the first line has no line before it to close
    parts[-1] = "}\n"
    return "".join(parts)
