"""DESIGN §1: imports point one way, checked over the whole package by import-linter.

``deploy`` and the CLI → the Topology Master and the worker runtime (which never import
each other: they share only the ``.proto`` contract) → ``window`` → ``barrier`` →
``state_backends`` and the API model. A module that imports upward fails this test with
the import chain that does it.

The top-level folders become subpackages of ``jstormpy`` only through the install's
package mapping (pyproject.toml), which an import-graph builder that walks one folder
cannot see in an editable install; the test lays the package out as the wheel does, with
symbolic links, and checks that tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAPPED = ("barrier", "master", "window", "state_backends", "deploy")

CONTRACT = """
[importlinter]
root_package = jstormpy

[importlinter:contract:design-1]
name = DESIGN 1: imports point one way
type = layers
layers =
    jstormpy.deploy : jstormpy.cli : jstormpy.dataflow
    jstormpy.master | jstormpy.runtime
    jstormpy.operations : jstormpy.security : jstormpy.connectors : jstormpy.multilang : jstormpy.heron
    jstormpy.window
    jstormpy.barrier
    jstormpy.state_backends
    jstormpy.api : jstormpy.keygroups : jstormpy.state_store : jstormpy.run_identity : jstormpy.leader_lease : jstormpy.ha_view : jstormpy.metrics : jstormpy.pickling : jstormpy.picklecheck : jstormpy.faults : jstormpy.proctitle : jstormpy.temp_dirs : jstormpy.version : jstormpy.compiled
ignore_imports =
    jstormpy.operations.savepoints -> jstormpy.master.coordinator
"""
"""The layers of docs/architecture.md ("The rooms, and which way imports point"); ``|``
separates rooms that never import each other, ``:`` rooms of one layer. The one import
let through is the savepoint import's id reservation, which allocates its checkpoint id
with the coordinator's own (pure) id record, as the Topology Master does."""


def _wheel_layout(into: Path) -> Path:
    """``into/jstormpy``: the package as the wheel installs it, made of links to the
    checkout's files."""
    pkg = into / "jstormpy"
    shutil.copytree(ROOT / "jstormpy", pkg, copy_function=os.symlink,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for folder in MAPPED:
        shutil.copytree(ROOT / folder, pkg / folder, copy_function=os.symlink,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return into


def _lint(tmp_path: Path, planted: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    """Run the contract over the wheel layout, with ``planted`` modules (path under the
    package -> source) added to it."""
    tree = _wheel_layout(tmp_path / "tree")
    for rel, source in (planted or {}).items():
        (tree / "jstormpy" / rel).write_text(source)
    config = tmp_path / ".importlinter"
    config.write_text(CONTRACT)
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail("lint-imports not installed: run scripts/setup.sh (the test extra)")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(lint), str(config), "--no-cache"], check=False, cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_imports_point_one_way(tmp_path: Path) -> None:
    run = _lint(tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "1 kept, 0 broken" in run.stdout, run.stdout[-2000:]


def test_an_upward_import_is_reported_with_its_chain(tmp_path: Path) -> None:
    """The check is live: a state backend that imports the worker runtime breaks it, and
    the report names the importing module."""
    run = _lint(tmp_path, {"state_backends/planted.py": "import jstormpy.runtime.codec\n"})
    assert run.returncode != 0, run.stdout[-2000:]
    assert "BROKEN" in run.stdout, run.stdout[-2000:]
    assert "jstormpy.state_backends.planted -> jstormpy.runtime.codec" in run.stdout, \
        run.stdout[-2000:]
