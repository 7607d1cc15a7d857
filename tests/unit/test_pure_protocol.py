"""The checkpoint protocol's pure objects do no I/O: no clock, threads, sockets, os or time.

Every ordering decision of the protocol lives in objects that take events and return
actions (docs/architecture.md, "The protocol's pure objects"); the executor, the inline
runner and the simulator perform those actions through their own ports. A pure object
that read the clock, started a thread or touched a file would behave differently in each
of them, and the simulator would no longer run what production runs. This test reads
each module's imports (and those of every project module it imports, transitively) and
fails on any of the forbidden ones.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "barrier").glob("*.py")) + [
    "master/coordinator.py", "master/coordinator_driver.py", "master/restore_plan.py",
    "master/commit_point.py", "master/rescale_steps.py", "master/upgrade_steps.py",
    "master/recovery_steps.py", "master/retention_steps.py", "master/quiescent_cut.py",
    "master/ids_record_steps.py", "master/generation_steps.py",
    "state_backends/retention.py", "jstormpy/runtime/prepare_steps.py"]
"""Every module of ``barrier/``, the TM's coordinator and restore plan, the commit path's
steps and driver, and retention's decision."""
FORBIDDEN = frozenset({"time", "datetime", "threading", "_thread", "multiprocessing",
                       "concurrent", "asyncio", "socket", "ssl", "selectors", "select",
                       "os", "subprocess", "signal", "shutil", "tempfile", "pathlib",
                       "io", "queue"})
"""Clocks, threads and executors, sockets, the OS and files."""
SHALLOW = frozenset({"barrier/twophase.py"})
"""The two-phase-commit sink base a user subclasses (``TwoPhaseCommitSink``): its own
imports are checked, not those of the component API it extends (user components do I/O)."""


def _imports(path: Path) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, node.lineno))
    return out


def _project_file(module: str) -> Path | None:
    if not module.startswith("jstormpy."):
        return None
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def forbidden_imports(path: Path, transitive: bool = True) -> list[str]:
    """``file:line imports X`` for every forbidden import reached from ``path``."""
    found, seen, todo = [], {path}, [path]
    while todo:
        here = todo.pop()
        for module, line in _imports(here):
            top = module.split(".")[0]
            if top in FORBIDDEN:
                found.append(f"{here.relative_to(ROOT) if here.is_relative_to(ROOT) else here}"
                             f":{line} imports {module}")
            nxt = _project_file(module) if transitive else None
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return found


@pytest.mark.parametrize("module", PURE)
def test_a_pure_protocol_module_imports_no_clock_threads_sockets_or_os(module: str) -> None:
    assert not forbidden_imports(ROOT / module, transitive=module not in SHALLOW)


def test_the_check_finds_a_clock(tmp_path: Path) -> None:
    impure = tmp_path / "impure.py"
    impure.write_text("from jstormpy.barrier.aligner import BarrierAligner\n"
                      "import time as clock\n")
    assert forbidden_imports(impure) == [f"{impure}:2 imports time"]
    assert [m for m in PURE if m.endswith("aligner.py")]  # the aligner is checked
