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

The pages name each other by path, ``docs/state-stores.md``, as code and comments do (they
read well on GitHub and in an editor). On the site such a mention, in prose or as a code
span of its own, becomes a link to that page, so --strict checks that the page exists.
"""

from __future__ import annotations

import ast
import logging
import posixpath
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


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# not a word's tail (mydocs/), a longer path (a/docs/) or a Markdown link's target
_DOCS_PATH = re.compile(r"(?<![\w/.-])(?<!\]\()docs/((?:[\w-]+/)*[\w-]+\.md)\b")


def link_docs_paths(markdown: str, page_uri: str) -> str:
    """``docs/NAME.md`` in prose, or as a whole code span, as a link to that page."""
    here = posixpath.dirname(page_uri)

    def target(path: str) -> str:
        return posixpath.relpath(path, here or ".")

    def prose(text: str) -> str:
        return _DOCS_PATH.sub(lambda m: f"[docs/{m.group(1)}]({target(m.group(1))})", text)

    def line_with_spans(line: str) -> str:
        out, pos = [], 0
        for m in _CODE_SPAN.finditer(line):
            out.append(prose(line[pos:m.start()]))
            whole = _DOCS_PATH.fullmatch(m.group(2))
            out.append(f"[{m.group(0)}]({target(whole.group(1))})" if whole else m.group(0))
            pos = m.end()
        out.append(prose(line[pos:]))
        return "".join(out)

    lines, fence = [], ""  # the open fence's marker, "" outside code blocks
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if not fence:
            fence = m.group(1) if m else ""
            lines.append(line if m else line_with_spans(line))
            continue
        if m and m.group(1).startswith(fence) and not m.group(2).strip():
            fence = ""  # closed by the same character, at least as many, nothing after
        lines.append(line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return link_docs_paths(markdown, page.file.src_uri)


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
