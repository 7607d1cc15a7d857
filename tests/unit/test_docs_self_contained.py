"""The docs stand on their own in a clone (issue 28 item 14): no links or paths outside the
repository, no references to a design document readers do not have, and the license
pyproject.toml declares is in the repository."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
               *(ROOT / "examples").glob("*.md")])
OUTSIDE = re.compile(r"\.\./shared|/tmp/peerbench|\bDESIGN(\.md| §)|/work/")
LINK = re.compile(r"\]\(([^)#\s]+)")


def test_docs_do_not_point_outside_the_repository():
    bad = [f"{doc.relative_to(ROOT)}:{n}: {line.strip()}"
           for doc in DOCS for n, line in enumerate(doc.read_text().splitlines(), 1)
           if OUTSIDE.search(line)]
    assert bad == []


def test_relative_links_in_docs_resolve_inside_the_repository():
    bad = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (doc.parent / target).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                bad.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert bad == []


def test_the_declared_license_is_in_the_repository():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer to it
