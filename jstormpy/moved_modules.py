"""Old module paths of the modules that moved into rooms (issue 24), still importable.

Snapshots, savepoints and the pickled topology of a run are pickled *by class path*: a
class is found again by importing the module path it was pickled under. The move put
the topology module under ``api``, the savepoints module under ``operations``, and so
on; this finder makes each old path import the *same module object* as its new path (so
a class is the same class and ``isinstance`` holds), for pickles written before the move
and for code that imported the old paths. Nothing in the repository imports an old path.

:data:`MOVED` is the whole map, old -> new. Its entries are written without the package
prefix on purpose: the move's rewrite script (which rewrites every old dotted path in the
repository) must not rewrite this map.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

PACKAGE = "jstormpy"

MOVED: dict[str, str] = {
    f"{PACKAGE}.{old}": f"{PACKAGE}.{new}" for old, new in (
        ("component", "api.component"),
        ("topology", "api.topology"),
        ("config", "api.config"),
        ("errors", "api.errors"),
        ("batch", "api.batch"),
        ("failure", "api.failure"),
        ("restart", "api.restart"),
        ("cli_ops", "cli.ops"),
        ("cli_rescale", "cli.rescale"),
        ("cli_savepoint", "cli.savepoint"),
        ("cli_status", "cli.status"),
        ("client", "cli.client"),
        ("savepoints", "operations.savepoints"),
        ("rescale_state", "operations.rescale_state"),
        ("codepkg", "operations.codepkg"),
        ("package_archive", "operations.package_archive"),
        ("tls", "security.tls"),
    )
}
"""Old module path -> new module path. The old ``cli`` and ``security`` modules became
the ``main`` and ``tokens`` modules of packages of the same names (the rooms); their old
paths now name those packages, and they held no class that is ever pickled."""


SPLIT: dict[str, tuple[str, ...]] = {
    f"{PACKAGE}.dataflow.bolts": tuple(f"{PACKAGE}.dataflow.{new}" for new in (
        "fusion", "keyed", "event_time", "window_aggregate", "joins", "window_join",
        "interval_join", "sink_adapter")),
}
"""Old module path -> the modules it was split into (issue 36 split the dataflow's
compiled bolts by concern). The old path imports as a module holding every name of
those modules, so a class pickled under it is found again (the same class object)."""

RENAMED: dict[str, dict[str, str]] = {
    f"{PACKAGE}.dataflow.bolts": {"_JoinBolt": "JoinBolt", "_check_ms": "check_ms",
                                  "_check_timestamps": "check_timestamps"},
}
"""Names that changed in a split: old name -> the name in the new modules."""


class _SplitLoader(importlib.abc.Loader):
    """Loads an old path as a module gathering the names of the modules it became."""

    def __init__(self, old: str, parts: tuple[str, ...]) -> None:
        self.old = old
        self.parts = parts

    def exec_module(self, module: ModuleType) -> None:
        for part in self.parts:
            new = importlib.import_module(part)
            module.__dict__.update({k: v for k, v in vars(new).items()
                                    if not k.startswith("__")})
        for old_name, name in RENAMED.get(self.old, {}).items():
            module.__dict__[old_name] = module.__dict__[name]


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.real_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set the alias's spec on the real module: give it its own back
        module.__spec__ = self.real_spec


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths in :data:`MOVED` and :data:`SPLIT` (consulted after the normal
    finders)."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is not None:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))
        parts = SPLIT.get(fullname)
        if parts is not None:
            return importlib.machinery.ModuleSpec(fullname, _SplitLoader(fullname, parts))
        return None


def install() -> None:
    """Add the finder to ``sys.meta_path`` once (``import jstormpy`` does it)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
