"""The broker example runs end to end (own redis-server, a SIGKILL, verification)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jstormpy.testing.redis_server import find_redis_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_redis_streams_pipeline_example_is_exactly_once(tmp_path: Path) -> None:
    if find_redis_server() is None:
        pytest.skip("redis-server is not installed")
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "redis_streams_pipeline.py")],
                         check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "exactly-once: OK" in res.stdout
    assert "fault point fired: sink_before_commit@1" in res.stdout
