"""Two launchers that submit the same topology name under one JSTORM_HOME at the same
instant: one runs it, the other is refused (deploy/launch_lock.py). Before the submit
lock both passed ``refuse_if_running`` (the registration is written only once a Topology
Master is up) and overwrote each other's run directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jstormpy import read_committed

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

LAUNCHER = """
import sys, time
from pathlib import Path
from jstormpy import FileSink, LocalCluster, TopologyBuilder
from jstormpy.api.errors import JStormError
from tests.integration.components import NumberSpout
from tests.integration.helpers import fast_config

home, out, go = map(Path, sys.argv[1:4])
b = TopologyBuilder("same-name")
b.set_spout("numbers", NumberSpout(n=200, pause_s=0.01), parallelism=1)
b.set_bolt("sink", FileSink(str(out)), parallelism=1).global_grouping("numbers")
topology = b.build()
with LocalCluster(home=home) as cluster:
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:  # the common start signal
        time.sleep(0.001)
    try:
        handle = cluster.submit(topology, fast_config(workers=1))
    except JStormError as exc:
        print("REFUSED", exc, flush=True)
        sys.exit(0)
    handle.wait(timeout=60)
    print("DRAINED", flush=True)
"""


def test_simultaneous_submits_of_one_name_run_it_once(tmp_path: Path) -> None:
    home, go = tmp_path / "home", tmp_path / "go"
    outs = [tmp_path / "out-a", tmp_path / "out-b"]
    procs = [subprocess.Popen([sys.executable, "-c", LAUNCHER, str(home), str(out), str(go)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for out in outs]
    try:
        for p in procs:  # both launchers have a cluster up: the submits start together
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "READY", p.stderr.read() if p.stderr else ""
        go.touch()
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    said = [stdout.strip().splitlines()[-1] if stdout.strip() else f"(nothing; {stderr[-500:]})"
            for stdout, stderr in results]
    assert sorted(s.split()[0] for s in said) == ["DRAINED", "REFUSED"], said
    refused = next(s for s in said if s.startswith("REFUSED"))
    assert "a topology named 'same-name' is already running" in refused
    winner = outs[[s.startswith("DRAINED") for s in said].index(True)]
    assert sorted(r["seq"] for r in read_committed(winner)) == list(range(200))
    assert all(p.returncode == 0 for p in procs)
