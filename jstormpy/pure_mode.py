"""Stand-ins for Cython's pure-Python-mode names, where Cython is not installed.

A compiled module written in Cython's pure-Python mode (``connectors/jsonl_rows.py``,
``runtime/codec.py``, ``key_filter.py``; ``jstormpy/compiled.py`` lists the compiled
modules) declares C types with ``cython`` decorators. Compiled, Cython reads them; run
as source they are Cython's own no-op shadow module, and where Cython is not installed
(it is needed to build, not to run) these stand-ins. Each such module imports them
itself, because Cython reads only a plain ``import cython``::

    try:
        import cython
    except ImportError:
        from jstormpy.pure_mode import cython
"""

from __future__ import annotations

from typing import Any


class cython:  # noqa: N801 - stands in for the module of that name
    """The names of Cython's shadow module the compiled modules use, as no-ops."""

    compiled = False
    Py_UCS4 = str
    Py_ssize_t = int
    bint = bool
    longlong = int
    ulonglong = int
    int = int  # noqa: A003 - Cython's name for a C int

    @staticmethod
    def cast(_: Any, value: Any) -> Any:
        return value

    @staticmethod
    def declare(_: Any, value: Any = None) -> Any:
        return value

    @staticmethod
    def cclass(kind: Any) -> Any:
        return kind

    @staticmethod
    def cfunc(f: Any) -> Any:
        return f

    inline = ccall = cfunc

    @staticmethod
    def locals(**_: Any) -> Any:
        return lambda f: f

    @staticmethod
    def returns(_: Any) -> Any:
        return lambda f: f
