"""JSON-lines encoding for :class:`~jstormpy.connectors.sinks.FileSink`, a batch at a time.

``FileSink`` writes one compact JSON object per tuple (``{"field": value, ...}``, keys in
the stream's field order). Encoding a tuple at a time costs a ``Tuple``, a dict
(``as_dict``) and a JSON encoder call per record. :func:`encode_rows` produces the same
bytes for a whole channel batch with a handful of C-level passes: each column is encoded
once (strings with the C string escaper, exact ``int`` values with ``int.__repr__``, both
exactly what :mod:`json` writes for them; anything else with the JSON encoder), and the
lines are assembled by one ``str.join`` over the interleaved keys and values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from json import encoder as _json_encoder
from typing import Any

encode_value = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(obj, separators=(",", ":"))`` without building an encoder per call."""

_encode_str = _json_encoder.encode_basestring_ascii  # the C escaper json.dumps uses
_int_repr = int.__repr__  # what json.dumps writes for an exact int


def encode_column(column: Sequence[Any]) -> list[str]:
    """Each value of ``column`` as JSON text, as ``json.dumps`` would write it.

    Raises:
        TypeError: a value is not JSON serialisable.
        ValueError: a value cannot be encoded (e.g. a circular reference).
    """
    kinds = set(map(type, column))
    if kinds == {str}:
        return list(map(_encode_str, column))
    if kinds == {int}:
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
    if not n or not rows or set(map(len, rows)) != {n}:
        return None
    columns = list(zip(*rows, strict=True))
    parts: list[Any] = []
    sep = "{"
    for name, pos in index.items():
        parts.append(repeat(f"{sep}{encode_value(name)}:"))
        parts.append(encode_column(columns[pos]))
        sep = ","
    parts.append(repeat("}\n"))
    return "".join(chain.from_iterable(zip(*parts, strict=False)))  # repeat() is endless
