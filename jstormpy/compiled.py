"""The compiled record path: which modules Cython compiled, the pure-Python fallback.

``setup.py`` compiles the modules of :data:`COMPILED` with Cython 3 from their ``.py``
sources; each extension module sits beside its source and Python imports it in the
source's place. They are modules a record crosses once per record: the fused ``emit``
closures and routes (``runtime/routing.py``) and the fold of combining before the shuffle
(``runtime/combine.py``) in the sending task, unchanged plain Python, and the jsonl
encoder's row loop of ``FileSink`` (``connectors/jsonl_rows.py``) and the DATA codec's
check of what marshal may carry (``runtime/codec.py``), and the key filter a RocksDB
state's reads ask before RocksDB (``key_filter.py``), written in Cython's pure-Python
mode (decorators declare C types; they are no-ops when it runs as source, and it runs
without Cython installed: ``jstormpy/pure_mode.py``); docs/performance.md ("A compiled
record path", "The sink's row loop and the codec's check, compiled") has what each
bought. Compiled or not, they behave the same; an install
that could not compile them (no C compiler) runs the sources, slower.

``JSTORM_PURE_PYTHON=1`` in the environment runs the sources even where the extensions
are installed (:func:`install_fallback`, called by ``jstormpy/__init__.py`` before
anything imports those modules; the environment is inherited by every worker): CI runs
part of the suite that way, so the fallback stays tested. A source edited after its
compile (an editable install) also runs as source until ``scripts/setup.sh`` or
``pip install -e .`` compiles it again.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

COMPILED = ("jstormpy.runtime.routing", "jstormpy.runtime.combine",
            "jstormpy.connectors.jsonl_rows", "jstormpy.runtime.codec",
            "jstormpy.key_filter")
"""The modules ``setup.py`` compiles (the same list there; a unit test keeps them equal).
A module added here that reuses an object when ``sys.getrefcount`` says only a local holds
it (``runtime/executor.py``, ``window/sliced.py``, ``dataflow/sink_adapter.py`` do) must
compare with a count measured in its own module, as ``runtime/combine.py``'s ``_SOLE``
does: compiled, a local's reference is not counted, and ``> 2`` overwrites what a user
kept."""

PURE_ENV = "JSTORM_PURE_PYTHON"
"""``=1``: import the sources of :data:`COMPILED`, not their extension modules."""

log = logging.getLogger("jstormpy")
_announced = False


def forced_pure() -> bool:
    """Whether the environment asks for the pure-Python record path."""
    return os.environ.get(PURE_ENV) == "1"


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the ``.py`` source of a compiled module instead of its extension module when
    pure Python is asked for, or when the source changed after it was compiled (an
    editable install: an edited ``routing.py`` runs as edited, not as last compiled)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or spec.origin.endswith(".py"):
            return spec
        source = os.path.join(os.path.dirname(spec.origin),
                              fullname.rpartition(".")[2] + ".py")
        if not forced_pure() and not _newer(source, spec.origin):
            return spec
        return importlib.util.spec_from_file_location(fullname, source)


_SLACK_S = 2.0
"""An install writes a module's extension and source within this time, in either order
(a wheel is unpacked file by file); an edit comes later."""


def _newer(source: str, extension: str) -> bool:
    """Whether ``source`` was changed after ``extension`` was built from it."""
    try:
        return os.stat(source).st_mtime > os.stat(extension).st_mtime + _SLACK_S
    except OSError:  # a wheel may ship the extension alone
        return False


def install_fallback() -> None:
    """Put the finder of the sources first (once; before anything imports the compiled
    modules): ``JSTORM_PURE_PYTHON=1`` or a source edited since its compile runs the
    source."""
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())


def status() -> dict[str, bool]:
    """Module -> whether it runs compiled (an extension module), without importing it."""
    out = {}
    for name in COMPILED:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if origin is None:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
        out[name] = origin is not None and not origin.endswith(".py")
    return out


def describe() -> str:
    """One line: how the record path runs (``jstorm version``)."""
    state = status()
    if all(state.values()):
        return "record path compiled (Cython): " + ", ".join(
            n.rpartition(".")[2] for n in COMPILED)
    why = f"{PURE_ENV}=1" if forced_pure() else "not compiled, or edited since"
    return f"record path pure Python ({why})"


def notice() -> str | None:
    """The one-line notice for an install without the compiled modules (None: compiled,
    or pure Python asked for with :data:`PURE_ENV`)."""
    if forced_pure():
        return None
    missing = [n.rpartition(".")[2] for n, ok in status().items() if not ok]
    if not missing:
        return None
    return (f"jstormpy runs its record path as pure Python ({', '.join(missing)} not "
            f"compiled, or edited since); the same results, more CPU per record "
            f"(docs/performance.md, \"A compiled record path\")")


def announce() -> None:
    """Log :func:`notice` once per process (a cluster's start: ``LocalCluster``)."""
    global _announced
    if _announced:
        return
    _announced = True
    text = notice()
    if text is not None:
        log.warning(text)
