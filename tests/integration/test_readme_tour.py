"""The README's five-minute tour, run as a reader would (issue 28 item 11)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).parent / "jstorm"
JSTORM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jstormpy.cli.main"]


def tour_code() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### 1. Write a topology"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=180, check=False,
                          cwd=cwd, env=dict(os.environ))


def test_tour_runs_twice_says_where_its_output_is_and_works_with_jstorm_run(tmp_path):
    (tmp_path / "tour.py").write_text(tour_code())
    for _ in range(2):  # the second run finds out/ non-empty
        res = run([sys.executable, "tour.py"], tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "out/ holds the running counts; final: {'a': 2000, 'b': 2000, 'c': 1000}" \
            in res.stdout, res.stdout
        assert "verify: OK" in res.stdout
    # section 2: `jstorm run` needs `topology`; into a used out/ it says what to do
    res = run([*JSTORM, "run", "tour.py"], tmp_path)
    assert res.returncode != 0
    assert "already holds" in res.stderr and "--resume" in res.stderr, res.stderr
    import shutil

    shutil.rmtree(tmp_path / "out")
    res = run([*JSTORM, "run", "tour.py"], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify: OK" in res.stdout
