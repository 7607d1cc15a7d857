"""The jsonl encoder's row loop for batches of plain rows, compiled with Cython.

:func:`jstormpy.connectors.jsonl.encode_rows` encodes a batch column by column with a
handful of C-level passes and one ``%`` format; in pure Python that is the cheapest way.
Compiled (``jstormpy/compiled.py``), one loop over the rows is cheaper still for the
commonest shape, every value an exact ``str`` or an exact ``int``: the loop checks each
value's type by pointer and each string's characters in C (plain text, printable ASCII
without ``"`` or ``\\``, goes in as it is; other text through json's C escaper), and
lays the pieces out for one ``str.join``
(docs/performance.md, "The sink's row loop and the codec's check, compiled").
:data:`COMPILED_LOOP` says whether it runs compiled; ``encode_rows`` uses
:func:`encode_plain_rows` only then. The source is plain Python (Cython's pure-Python
mode: the decorators below only declare C types) and gives the same text, slower, where
it runs uncompiled.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring_ascii as _escape  # what json.dumps uses for str
from typing import Any

try:
    import cython
except ImportError:  # Cython builds the extension; running the source needs none of it
    from jstormpy.pure_mode import cython  # type: ignore[assignment]

COMPILED_LOOP: bool = bool(cython.compiled)
"""Whether this module runs compiled (then :func:`encode_plain_rows` beats the columns)."""


@cython.cfunc
@cython.inline
@cython.locals(text=str, ch=cython.Py_UCS4, code=cython.Py_UCS4)
@cython.returns(cython.bint)
def _plain(text: str) -> bool:
    """Whether ``json.dumps`` writes ``text`` as it is between quotes: printable ASCII
    without ``"`` or ``\\`` (its ASCII escaper changes exactly the other characters).
    Compiled, a C loop over the string's characters."""
    for ch in text:
        code = ord(ch)
        if code < 32 or code > 126 or code in (34, 92):  # 34 " and 92 \\
            return False
    return True


def separators(names: Sequence[str], encode_name: Any) -> list[str]:
    """The constant texts :func:`encode_plain_rows` lays between the values of a row whose
    keys are ``names``: for key ``j``, four texts at ``4 * j``: the key's ``{`` or ``,``,
    its JSON name and ``:``, after a value that was not (+0) or was (+2) a quoted string
    (whose closing quote it then carries), before a value that is not (+0) or is (+1) a
    quoted string (whose opening quote it then carries); at ``4 * len(names)`` the end of
    the line, ``}\\n``, after a value that was not (+0) or was (+1) a quoted string."""
    texts = []
    for j, name in enumerate(names):
        key = ("{" if j == 0 else ",") + encode_name(name) + ":"
        for before in ("", '"'):
            texts += [before + key, before + key + '"']
    return texts + ["}\n", '"}\n']


@cython.locals(j=cython.Py_ssize_t, n=cython.Py_ssize_t, quoted=cython.Py_ssize_t,
               pos=cython.Py_ssize_t, small=cython.longlong, out=list, texts=list,
               at=list)
def encode_plain_rows(rows: Sequence[Sequence[Any]], positions: list[int],
                      texts: list[str]) -> str | None:
    """The jsonl text of ``rows`` (``"\\n"``-terminated lines, the bytes ``json.dumps``
    writes per record with ``separators=(",", ":")``): key ``j`` takes the row's value at
    ``positions[j]``, ``texts`` are :func:`separators` of the keys. Plain text goes in
    as it is, other text through the C escaper ``json.dumps`` uses. ``None`` as soon as
    a row is not covered (a length other than ``len(positions)``, a value other than an
    exact ``int`` or an exact ``str``): the caller encodes the batch its general way.
    """
    n = len(positions)
    at = positions
    out = []
    for row in rows:
        if len(row) != n:
            return None
        quoted = 0
        for j in range(n):
            pos = at[j]
            value = row[pos]
            if type(value) is str:
                if _plain(value):  # as it is, between the quotes the texts carry
                    out.append(texts[4 * j + 2 * quoted + 1])
                    out.append(value)
                    quoted = 1
                else:  # json's own C escaper, quotes included
                    out.append(texts[4 * j + 2 * quoted])
                    out.append(_escape(value))
                    quoted = 0
            elif type(value) is int:
                out.append(texts[4 * j + 2 * quoted])
                try:
                    small = value  # compiled: a C integer, its digits written straight
                    out.append(f"{small}")
                except OverflowError:  # beyond 64 bits
                    out.append(str(value))
                quoted = 0
            else:
                return None
        out.append(texts[4 * n + quoted])
    return "".join(out)
