"""MkDocs hooks for the docs site (mkdocs.yml ``hooks:``).

The API reference (docs/reference/) is rendered by mkdocstrings from the source, by static
analysis (griffe), without importing jstormpy. The package's layout defeats that analysis:
``setup.py`` installs top-level folders (``deploy/``, ``window/``, ...) as subpackages of
``jstormpy`` (DESIGN §1), so ``jstormpy.LocalCluster`` -> ``jstormpy.deploy.local`` has no
``jstormpy/deploy/`` to be found in. Before mkdocstrings starts, this hook copies the sources
into a temporary tree laid out as they are installed, and points the Python handler there.

Two renderings are adjusted for how the docstrings are written: an ``Example:`` section
(singular, as the docstrings have it) is read as Google style's ``Examples:`` (doctest
code, not prose), and Sphinx roles (``:class:`X```) are shown as the name alone.
"""

from __future__ import annotations

import ast
import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
_tree: list[Path] = []
_log = logging.getLogger("mkdocs.hooks.jstormpy")
# what a Sphinx role leaves in the HTML of a reference page: ":class:<code>Name</code>"
_SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj|ref):(?=<code>)")


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


def read_example_sections_as_examples() -> None:
    """Let griffe's Google-style parser take ``Example:`` as ``Examples:``."""
    try:
        # griffe has no option for section names: its (private) table is the one place
        from griffe._internal.docstrings import google
        from griffe._internal.enumerations import DocstringSectionKind

        google._section_kind.setdefault("example", DocstringSectionKind.examples)
    except (ImportError, AttributeError) as exc:  # griffe changed: examples render as prose
        _log.info("Example: sections stay admonitions (%s)", exc)


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config: Any) -> Any:
    read_example_sections_as_examples()
    tree = Path(tempfile.mkdtemp(prefix="jstormpy-docs-src-"))
    _tree.append(tree)
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    handlers.setdefault("python", {})["paths"] = [str(installed_layout(tree))]
    return config


def on_page_content(html: str, page: Any, **_: Any) -> str:
    if page.file.src_uri.startswith("reference/"):
        return _SPHINX_ROLE.sub("", html)
    return html


def on_shutdown() -> None:
    while _tree:
        shutil.rmtree(_tree.pop(), ignore_errors=True)
