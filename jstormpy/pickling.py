"""cloudpickle that keeps source file names: cloudpickle 3 ships a function's code with
``co_filename = "<dynamic-code>"``, so a traceback from user code shipped by value (a
``jstorm run`` file, a test module) named no file and showed no source line. Here every code
object travels with its file name, and tracebacks point at the user's file and line."""

from __future__ import annotations

import io
import types
from typing import Any

import cloudpickle


def _code_at(code: types.CodeType, filename: str) -> types.CodeType:
    """Unpickling side: the shipped code object with its original file name back."""
    return code.replace(co_filename=filename)


class _FilenamePickler(cloudpickle.Pickler):
    def __init__(self, file: io.BytesIO, protocol: int | None = None) -> None:
        super().__init__(file, protocol=protocol)
        self._plain: set[int] = set()
        self._keep: list[types.CodeType] = []  # the copies, alive while their ids are used

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.CodeType and id(obj) not in self._plain:
            copy = obj.replace()  # a distinct object, pickled the plain cloudpickle way
            self._keep.append(copy)
            self._plain.add(id(copy))
            return _code_at, (copy, obj.co_filename)
        return super().reducer_override(obj)


def dumps(obj: Any, protocol: int | None = None) -> bytes:
    """``cloudpickle.dumps`` keeping the file names of shipped code (loads with
    ``cloudpickle.loads``)."""
    buf = io.BytesIO()
    _FilenamePickler(buf, protocol=protocol).dump(obj)
    return buf.getvalue()
