"""Code packages are unpacked once per digest under the run dir, or into a temp dir that
is removed when the process exits: restarts and inspections leave nothing in /tmp."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jstormpy.operations.codepkg import build_package

TOPO = '''
from jstormpy import FileSink, SequenceSpout, TopologyBuilder
b = TopologyBuilder("unpack")
b.set_spout("s", SequenceSpout(keys=1, per_key=1))
b.set_bolt("out", FileSink("/nonexistent/out")).shuffle_grouping("s")
topology = b
'''

LOAD = ("import sys; from pathlib import Path; from jstormpy.operations.codepkg import "
        "load_package_topology as load; data = Path(sys.argv[1]).read_bytes(); "
        "print(load(data, 'topo.py', '', 'v2').name)")


def _package(tmp_path: Path) -> Path:
    src = tmp_path / "topo.py"
    src.write_text(TOPO)
    data, _entry = build_package(src)
    pkg = tmp_path / "pkg.zip"
    pkg.write_bytes(data)
    return pkg


def _run(args: list[str], tmpdir: Path, run_dir: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "JSTORM_RUN_DIR"}
    env["TMPDIR"] = str(tmpdir)
    if run_dir is not None:
        env["JSTORM_RUN_DIR"] = str(run_dir)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout


def test_worker_starts_share_one_unpacked_copy_in_the_run_dir(tmp_path):
    pkg, tmpdir, run_dir = _package(tmp_path), tmp_path / "tmp", tmp_path / "run"
    tmpdir.mkdir()
    for _ in range(3):  # a crash-looping worker loads the same package again and again
        assert _run(["-c", LOAD, str(pkg)], tmpdir, run_dir).strip() == "unpack"
    unpacked = list((run_dir / "code" / "unpacked").iterdir())
    assert len(unpacked) == 1 and (unpacked[0] / "topo.py").exists(), unpacked
    assert list(tmpdir.iterdir()) == []


def test_inspect_and_loads_outside_a_run_dir_leave_no_temp_dirs(tmp_path):
    pkg, tmpdir = _package(tmp_path), tmp_path / "tmp"
    tmpdir.mkdir()
    out = _run(["-m", "jstormpy.operations.codepkg", "inspect", "--package", str(pkg), "--entry",
                "topo.py"], tmpdir)
    assert '"descriptor"' in out
    assert _run(["-c", LOAD, str(pkg)], tmpdir).strip() == "unpack"
    assert list(tmpdir.iterdir()) == []
