"""The dataflow layer sits on top: no module of the engine, window or model imports it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[3]


def test_nothing_below_the_dataflow_layer_imports_it():
    pattern = re.compile(r"^\s*(from|import)\s+jstormpy\.dataflow\b", re.MULTILINE)
    offenders = []
    for folder in ("jstormpy", "master", "barrier", "window", "state_backends", "deploy"):
        for path in (ROOT / folder).rglob("*.py"):
            if "dataflow" in path.relative_to(ROOT).parts:
                continue
            if pattern.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
