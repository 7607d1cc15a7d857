"""MkDocs hooks for the docs site (mkdocs.yml ``hooks:``).

The API reference (docs/reference/) is rendered by mkdocstrings from the source, by static
analysis (griffe), without importing jstormpy. The package's layout defeats that analysis:
``setup.py`` installs top-level folders (``deploy/``, ``window/``, ...) as subpackages of
``jstormpy`` (DESIGN §1), so ``jstormpy.LocalCluster`` -> ``jstormpy.deploy.local`` has no
``jstormpy/deploy/`` to be found in. Before mkdocstrings starts, this hook copies the sources
into a temporary tree laid out as they are installed, and points the Python handler there.
"""

from __future__ import annotations

import ast
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
_tree: list[Path] = []


def package_roots() -> dict[str, str]:
    """setup.py's ``ROOTS`` (import name -> folder), read without running setup.py."""
    module = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in module.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets):
            roots = ast.literal_eval(node.value)
            assert isinstance(roots, dict)
            return {str(k): str(v) for k, v in roots.items()}
    raise RuntimeError("setup.py defines no ROOTS")


def installed_layout(dest: Path) -> Path:
    """Copy the package sources into ``dest`` as installed; returns the search path."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name, folder in sorted(package_roots().items(), key=lambda kv: kv[0].count(".")):
        shutil.copytree(ROOT / folder, dest.joinpath(*name.split(".")), ignore=ignore,
                        dirs_exist_ok=True)
    return dest


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config: Any) -> Any:
    tree = Path(tempfile.mkdtemp(prefix="jstormpy-docs-src-"))
    _tree.append(tree)
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    handlers.setdefault("python", {})["paths"] = [str(installed_layout(tree))]
    return config


def on_shutdown() -> None:
    while _tree:
        shutil.rmtree(_tree.pop(), ignore_errors=True)
