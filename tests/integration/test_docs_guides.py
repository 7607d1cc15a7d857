"""Every code block of the tutorial and the how-to guides runs, as a reader would run it.

Each page runs in an empty directory of its own, its blocks in the page's order:

- a ``python`` block whose first line is ``# NAME.py`` is the file the page tells the reader
  to save: it is written as NAME.py (a ``test_*.py`` file is then run by a later
  ``pytest`` command of the page, as the reader would);
- any other ``python`` block is a script: it runs with ``python`` and must exit 0; if its
  last line is a comment (``# 20 garage``), that is what its output must end with;
- a ``bash`` block runs with ``bash -e`` (the environment's ``jstorm``, ``python`` and
  ``pytest`` first on the PATH) and must exit 0;
- a block right after ``<!-- docs-test: skip (why) -->`` is not run (installing), and
  ``text`` blocks are output, not code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "tutorial.md", *sorted((ROOT / "docs" / "how-to").glob("*.md"))]
BLOCK = re.compile(r"(<!-- docs-test: skip[^>]*-->\s*\n)?```(\w+)\n(.*?)```", re.S)
SAVED_AS = re.compile(r"# ([\w./-]+\.py)\s*$")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int
    skip: bool


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(m.group(2), m.group(3), text.count("\n", 0, m.start(2)) + 1,
                  bool(m.group(1)))
            for m in BLOCK.finditer(text)]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)  # the page's own files only, as a reader has them
    return env


def run_page(page: Path, workdir: Path, root: Path = ROOT) -> int:
    """Run the page's blocks in order in ``workdir``; returns how many ran."""
    ran = 0
    env = _env()
    for n, block in enumerate(blocks(page)):
        where = f"{page.relative_to(root)}:{block.line}"
        if block.skip or block.lang not in ("python", "bash"):
            continue
        if block.lang == "bash":
            args = ["bash", "-e", "-c", block.code]
        else:
            first = block.code.splitlines()[0]
            saved = SAVED_AS.fullmatch(first)
            if saved:
                (workdir / saved.group(1)).write_text(block.code, encoding="utf-8")
                ran += 1
                continue
            script = workdir / f"_block_{n}.py"
            script.write_text(block.code, encoding="utf-8")
            args = [sys.executable, script.name]
        res = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True,
                             timeout=180, check=False)
        assert res.returncode == 0, f"{where} failed:\n{block.code}\n{res.stdout}{res.stderr}"
        last = block.code.rstrip().splitlines()[-1]
        if block.lang == "python" and last.startswith("# "):
            assert res.stdout.rstrip().endswith(last[2:]), (where, res.stdout)
        ran += 1
    return ran


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_code_block_of_the_page_runs(page, tmp_path):
    assert run_page(page, tmp_path) >= 2


def test_the_pages_are_there_and_the_tutorial_runs_a_tested_pipeline():
    names = {p.name for p in PAGES}
    assert {"tutorial.md", "join-late-data.md", "large-state-rocksdb.md",
            "test-a-pipeline.md"} <= names
    code = "\n".join(b.code for b in blocks(ROOT / "docs" / "tutorial.md"))
    for step in ("pip install", "run_inline(", "pytest ", "jstorm run ", ".window(",
                 ".aggregate("):
        assert step in code, step


def test_a_failing_block_fails_the_run(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\n# x.py\nX = 1\n```\n\n```bash\npython -c 'import x; "
                    "assert x.X == 2'\n```\n")
    with pytest.raises(AssertionError, match="page.md:6 failed"):
        run_page(page, tmp_path, root=tmp_path)
