"""The DATA frame codec: ``(dst_task, item)`` to bytes and back.

A payload starts with one tag byte naming its codec:

* ``M`` — :mod:`marshal`, used when the item holds nothing but ``str``, ``int``,
  ``float``, ``bool``, ``None`` and ``bytes`` inside plain ``tuple``/``list`` containers
  (the common case: a batch of rows of scalar fields, a barrier, a credit grant).
  :mod:`marshal` is about twice as fast as :mod:`pickle` on such batches, both ways
  (``docs/performance.md``), and round-trips exactly these types unchanged.
* ``P`` — :mod:`pickle` protocol 5, for everything else (user objects, dicts,
  namedtuples, sets, buffers such as ``bytearray`` or arrays, which :mod:`marshal` would
  silently turn into ``bytes``).

Frames are decoded only after the peer authenticated (mutual TLS and the HMAC handshake,
``docs/security.md``): neither codec is safe on untrusted input, and :mod:`marshal` is the
narrower of the two (it builds values, it never calls constructors or code).
"""

from __future__ import annotations

import marshal
import pickle
from itertools import chain
from typing import Any

try:
    import cython
except ImportError:  # Cython builds the extension; running the source needs none of it
    from jstormpy.pure_mode import cython  # type: ignore[assignment]

MARSHAL = b"M"
PICKLE = b"P"

_PLAIN = frozenset({str, int, float, bool, type(None), bytes})
_SEQ = frozenset({tuple, list})
_PLAIN_OR_SEQ = _PLAIN | _SEQ
_MAX_DEPTH = 6


def _plain(values: list[Any], depth: int = 0) -> bool:
    """Whether ``values`` hold only :data:`_PLAIN` scalars in exact tuples/lists.

    Siblings that are all containers (the rows of a batch) are checked together with one
    flattening pass, so a batch costs a few C-level passes, not a Python call per row.
    """
    kinds = set(map(type, values))
    if kinds <= _PLAIN:
        return True
    if depth >= _MAX_DEPTH or not kinds <= _PLAIN_OR_SEQ:
        return False
    if kinds <= _SEQ:
        return _plain(list(chain.from_iterable(values)), depth + 1)
    return all(_plain(v, depth + 1) for v in values if type(v) in _SEQ)


COMPILED_CHECK: bool = bool(cython.compiled)
"""Whether this module runs compiled: :func:`encode_item` then checks with
:func:`_plain_each`, a C loop, instead of :func:`_plain`'s passes (cheaper in pure Python)."""


@cython.cfunc
@cython.locals(depth=cython.Py_ssize_t)
@cython.returns(cython.bint)
def _plain_each(values: Any, depth: int) -> bool:
    """:func:`_plain` value by value: a type compared by pointer per value (compiled), one
    call per nested container. The same answer as ``_plain(values, depth)``."""
    for v in values:
        t = type(v)
        if t is str or t is int or t is float or t is bool or t is bytes or v is None:
            continue
        if (t is tuple or t is list) and depth < _MAX_DEPTH and _plain_each(v, depth + 1):
            continue
        return False
    return True


def encode_item(dst_task: int, item: Any) -> bytes:
    """The DATA payload (after the SEQ prefix) carrying ``item`` for ``dst_task``.

    Raises:
        Exception: whatever :func:`pickle.dumps` raises for an unpicklable item.
    """
    msg = (dst_task, item)
    if _plain_each(msg, 0) if COMPILED_CHECK else _plain([dst_task, item]):
        return MARSHAL + marshal.dumps(msg)
    return PICKLE + pickle.dumps(msg, protocol=5)


def decode_item(payload: memoryview) -> tuple[int, Any]:
    """``(dst_task, item)`` from a payload written by :func:`encode_item`.

    Raises:
        ValueError: unknown codec tag or a payload of the wrong shape.
        Exception: whatever the codec raises on malformed bytes.
    """
    tag = bytes(payload[:1])
    if tag == MARSHAL:
        msg = marshal.loads(payload[1:])
    elif tag == PICKLE:
        msg = pickle.loads(payload[1:])
    else:
        raise ValueError(f"unknown DATA codec tag {tag!r}")
    if type(msg) is not tuple or len(msg) != 2:
        raise ValueError(f"DATA payload decodes to {type(msg).__name__}, not (task, item)")
    return msg
