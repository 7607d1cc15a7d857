"""The CI's sweep of the simulator over every fault, run beside the rest of the suite.

The sweep is pure CPU in one process; most of the suite waits on real processes, sockets
and servers, and leaves a core idle much of the time. So when the sweep's test is
selected, ``start_if_selected`` (called once collection has chosen the tests) starts ``jstorm
simulate`` niced in a child process, and the test later waits for its result. Run alone
(``sweep_result`` without a background sweep), the test starts the same sweep itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import pytest

SWEEP_TEST = "tests/simulation/test_simulation.py::test_every_fault_for_the_ci_budget"
CI_SEEDS = 70_000
"""The seeds the CI sweep takes, in order, until they or its budget end."""
BUDGET_S = float(os.environ.get("JSTORM_SIMULATE_BUDGET", "900"))
"""Wall-clock seconds the sweep may take (niced beside the suite, it gets the idle CPU;
alone on two idle cores, the 70,000 seeds take about 5 minutes)."""


@dataclass(frozen=True)
class SweepResult:
    returncode: int
    seeds: int
    output: str


class Sweep:
    """One ``jstorm simulate`` over every fault in a child process, output in a file."""

    def __init__(self, budget_s: float = BUDGET_S, nice: int = 19) -> None:
        self._out = tempfile.TemporaryFile(mode="w+")
        cmd = ["nice", "-n", str(nice), sys.executable, "-m", "jstormpy.cli.main", "simulate",
               "--seeds", str(CI_SEEDS), "--budget", str(budget_s), "--show", "5"]
        self._proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT)
        self._budget_s = budget_s

    def result(self) -> SweepResult:
        rc = self._proc.wait(timeout=self._budget_s + 300)
        self._out.seek(0)
        output = self._out.read()
        self._out.close()
        ran = re.search(r"simulate: (\d+) seeds in", output)
        return SweepResult(rc, int(ran.group(1)) if ran else 0, output)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


_background: Sweep | None = None


def start_if_selected(items: list[pytest.Item]) -> None:
    """Start the sweep niced in the background if its test will run."""
    global _background
    for item in items:
        if item.nodeid.endswith(SWEEP_TEST) and not item.get_closest_marker("skip"):
            _background = Sweep()
            return


def stop_background() -> None:
    if _background is not None:
        _background.stop()


def sweep_result() -> SweepResult:
    """The background sweep's result, or that of a sweep run now in the foreground."""
    global _background
    sweep, _background = _background, None
    if sweep is None:
        sweep = Sweep()
    return sweep.result()
