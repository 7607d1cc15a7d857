"""The docs site (mkdocs.yml) builds with ``mkdocs build --strict``: no warning at all.

A broken link, a link to a missing anchor, a page left out of the nav or an API reference
(``::: jstormpy.Name``) that does not resolve is a warning, and --strict makes it fail
the build; the second test makes sure that stays so.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(config), "-d", str(site)], capture_output=True, text=True,
                          timeout=150, check=False, cwd=config.parent)


def test_the_site_builds_strictly_with_tutorial_guides_and_api_reference(tmp_path):
    res = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert res.returncode == 0, res.stderr
    assert "WARNING" not in res.stderr, res.stderr
    site = tmp_path / "site"
    tutorial = (site / "tutorial" / "index.html").read_text(encoding="utf-8")
    assert "run_inline" in tutorial and "jstorm run pipeline.py" in tutorial
    # the reference is rendered from the docstrings, not left as a ::: directive
    reference = (site / "reference" / "testing" / "index.html").read_text(encoding="utf-8")
    assert 'id="jstormpy.testing.run_inline"' in reference
    assert ":::" not in reference
    # pages name each other by path (docs/windows.md); on the site those are links
    dataflow = (site / "dataflow" / "index.html").read_text(encoding="utf-8")
    assert '<a href="../windows/"><code>docs/windows.md</code></a>' in dataflow
    for page in ("how-to/join-late-data", "reference/config", "checkpointing"):
        assert (site / page / "index.html").exists(), page


def _copy_of_the_site(tmp_path: Path) -> tuple[Path, Path]:
    """mkdocs.yml and docs/ copied, so a test can break a page; returns (config, docs)."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["hooks"] = [str(ROOT / h) for h in config["hooks"]]
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, docs


@pytest.mark.parametrize(("page", "broken", "reported"), [
    ("tutorial.md", "See [this](no-such-page.md), [that](windows.md#no-such-section) and "
     "docs/gone.md (a page named by its path, as the pages do).",
     ["no-such-page.md", "no-such-section", "gone.md"]),
    ("reference/config.md", "::: jstormpy.NoSuchName", ["NoSuchName"]),
], ids=["link-and-anchor", "api-reference"])
def test_a_broken_link_anchor_or_reference_fails_the_build(tmp_path, page, broken, reported):
    config, docs = _copy_of_the_site(tmp_path)
    with (docs / page).open("a", encoding="utf-8") as f:
        f.write(f"\n\n{broken}\n")
    res = mkdocs_build(config, tmp_path / "site")
    assert res.returncode != 0
    problems = [line for line in res.stderr.splitlines()
                if line.startswith(("WARNING", "ERROR"))]
    for name in reported:  # each is a warning of its own (an INFO would not fail --strict)
        assert any(name in line for line in problems), res.stderr


def _hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_paths_become_links_in_prose_but_not_in_code_blocks():
    page = "\n".join([
        "See docs/windows.md, `docs/kafka.md` and (docs/state-stores.md).",
        "```",
        "Traceback: docs/windows.md",
        "    ~~~^^^^",            # a traceback marker inside the block closes nothing
        "docs/windows.md",
        "```",
        "Not [a link](docs/x.md), not `docs/a.md b`, not mydocs/y.md; docs/how-to/z.md is.",
    ])
    out = _hooks().link_docs_paths(page, "how-to/page.md").split("\n")
    assert out[0] == ("See [docs/windows.md](../windows.md), [`docs/kafka.md`](../kafka.md) "
                      "and ([docs/state-stores.md](../state-stores.md)).")
    assert out[1:6] == page.split("\n")[1:6]
    assert out[6] == ("Not [a link](docs/x.md), not `docs/a.md b`, not mydocs/y.md; "
                      "[docs/how-to/z.md](z.md) is.")
