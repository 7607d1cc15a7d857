"""Which modules run compiled, the forced fallback and the notice (``jstormpy/compiled.py``)."""

from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jstormpy import compiled

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import jstormpy.runtime.combine, jstormpy.runtime.routing, jstormpy.connectors.jsonl_rows
import jstormpy.runtime.codec, jstormpy.key_filter
from jstormpy import compiled
print(json.dumps({"files": [sys.modules[m].__file__ for m in compiled.COMPILED],
                  "describe": compiled.describe(), "notice": compiled.notice()}))
"""


def _probe(**env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    proc = subprocess.run([sys.executable, "-c", PROBE], env={**full, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(proc.stdout)


def test_setup_compiles_the_modules_compiled_lists() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text())
    listed = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", None) == "COMPILED" for t in node.targets))
    assert ast.literal_eval(listed) == compiled.COMPILED


def test_the_environment_variable_runs_the_sources() -> None:
    got = _probe(**{compiled.PURE_ENV: "1"})
    assert all(f.endswith(".py") for f in got["files"]), got
    assert got["describe"] == "record path pure Python (JSTORM_PURE_PYTHON=1)"
    assert got["notice"] is None  # asked for: nothing to tell


def test_without_it_the_installed_extensions_run() -> None:
    if not all(compiled.status().values()):
        pytest.skip("this install could not compile the record path (or runs it pure)")
    got = _probe()
    assert not any(f.endswith(".py") for f in got["files"]), got
    assert got["describe"] == "record path compiled (Cython): routing, combine, jsonl_rows, codec, key_filter"
    assert got["notice"] is None


def test_a_missing_extension_is_noticed_once(monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    monkeypatch.setattr(compiled, "status", lambda: dict.fromkeys(compiled.COMPILED, False)
                        | {"jstormpy.runtime.combine": True,
                           "jstormpy.connectors.jsonl_rows": True,
                           "jstormpy.runtime.codec": True,
                           "jstormpy.key_filter": True})
    monkeypatch.setattr(compiled, "_announced", False)
    with caplog.at_level(logging.WARNING, logger="jstormpy"):
        compiled.announce()
        compiled.announce()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "pure Python (routing not compiled" in lines[0] and "\n" not in lines[0]
    assert compiled.describe() == "record path pure Python (not compiled, or edited since)"
