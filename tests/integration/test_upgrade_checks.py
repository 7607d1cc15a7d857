"""Gray-release input checks on a real UpgradeController (real packages, real inspection
child processes): a refused upload leaves nothing cached, `-n` larger than the workers is
refused with the count."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import cloudpickle
import pytest

from jstormpy import Config
from jstormpy.api.errors import JStormError
from jstormpy.cli.main import load_topology_file
from jstormpy.master.upgrade import UpgradeController
from jstormpy.operations.codepkg import build_package

TOPOLOGY = '''
from jstormpy import Bolt, FileSink, SequenceSpout, TopologyBuilder


class Pass(Bolt):
    outputs = {outputs!r}

    def execute(self, tup):
        self.emit(tuple(tup[f] for f in {outputs!r}))


b = TopologyBuilder("upgrade-checks")
b.set_spout("events", SequenceSpout(keys=3, per_key=10), parallelism=3)
b.set_bolt("pass", Pass, parallelism=3).fields_grouping("events", ["key"])
b.set_bolt("out", FileSink({out!r}), parallelism=3).fields_grouping("pass", ["key"])
topology = b.build()
'''


class _Core:
    """The parts of MasterCore the controller reads before it switches anything."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.state = "running"
        self.config = Config(workers=3)
        self.resume = False
        self.component_tasks: dict[str, list[int]] = {}
        self.plan: dict[int, int] = {}
        # no rescale running (master/rescale.py)
        self.rescale = SimpleNamespace(phase="idle", is_idle=lambda: True)


def _write(path: Path, out: Path, outputs: tuple[str, ...]) -> Path:
    path.write_text(TOPOLOGY.format(outputs=outputs, out=str(out)))
    return path


def _controller(tmp_path: Path) -> UpgradeController:
    ctl = UpgradeController(_Core())  # type: ignore[arg-type]
    (tmp_path / "run").mkdir()
    ctl.attach_run_dir(tmp_path / "run")
    return ctl


def test_refused_upload_leaves_no_stale_description(tmp_path):
    out = tmp_path / "out"
    stable = _write(tmp_path / "v1.py", out, ("key", "seq", "value"))
    compatible = _write(tmp_path / "ok.py", out, ("key", "seq", "value"))
    compatible.write_text(compatible.read_text() + "\n# a harmless change\n")
    incompatible = _write(tmp_path / "bad.py", out, ("key", "value"))
    ctl = _controller(tmp_path)
    # the stable version cannot be inspected yet (no topology.pkl): the upload is refused
    with pytest.raises(JStormError):
        ctl.request("start", *build_package(compatible), count=1)
    (tmp_path / "run" / "topology.pkl").write_bytes(
        cloudpickle.dumps(load_topology_file(str(stable)).topology))
    # the next upload reuses the label; it must be checked as itself, not as the refused one
    with pytest.raises(JStormError, match="not compatible"):
        ctl.request("start", *build_package(incompatible), count=1)


def test_n_larger_than_the_workers_is_refused(tmp_path):
    out = tmp_path / "out"
    ctl = _controller(tmp_path)
    (tmp_path / "run" / "topology.pkl").write_bytes(cloudpickle.dumps(
        load_topology_file(str(_write(tmp_path / "v1.py", out, ("key", "seq")))).topology))
    new = _write(tmp_path / "v2.py", out, ("key", "seq"))
    with pytest.raises(JStormError, match=r"-n 5: the topology has 3 workers"):
        ctl.request("start", *build_package(new), count=5)
