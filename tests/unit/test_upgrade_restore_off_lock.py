"""A gray release reads its quiescent checkpoint's metadata off the TM's lock.

When the switched batch of workers registered again, the upgrade read checkpoint ``n``'s
metadata (the batch's snapshot handles) while holding ``core.lock``: a state backend that
hung there hung ``jstorm status``, heartbeats and control messages (the rescale's commit had
the same fault, issue 23 hole 8). Real MasterCore, file backend, code packages loaded in a
child process; workers are control-stream sessions driven by hand.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from jstormpy import Config, pickling
from jstormpy.cli.main import load_topology_file
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.operations.codepkg import build_package
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends.file import FileBackend
from tests.unit.test_launch_attempts import next_message
from tests.unit.test_rescale_commit import ack_all, start, wait_until

CODE = '''
from jstormpy import Bolt, Spout, TopologyBuilder


class Src(Spout):
    outputs = ("word",)


class Count(Bolt):
    outputs = ("word", "n")
    VERSION = {version!r}


b = TopologyBuilder("gray")
b.set_spout("src", Src, parallelism=2)
b.set_bolt("count", Count, parallelism=2).fields_grouping("src", ["word"])
topology = b.build()
'''


class GatedReads(FileBackend):
    """A file backend whose metadata reads of one checkpoint wait for ``release``."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.gate_id: int | None = None
        self.entered = threading.Event()
        self.release = threading.Event()

    def read_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        if checkpoint_id == self.gate_id:
            self.entered.set()
            assert self.release.wait(30), "the test never released the backend"
        return super().read_metadata(checkpoint_id)


def register(core: MasterCore, wid: int, version: str, generation: int = 0) -> WorkerSession:
    session = WorkerSession(wid, 100 + wid, "127.0.0.1", 0, version)
    core.register(session, generation)
    return session


def test_status_answers_while_the_backend_hangs_in_the_switchs_restore(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    v1, v2 = tmp_path / "v1" / "topo.py", tmp_path / "v2" / "topo.py"
    for path, version in ((v1, "v1"), (v2, "v2")):
        path.parent.mkdir()
        path.write_text(CODE.format(version=version))
    topology = load_topology_file(str(v1)).topology
    (run / "topology.pkl").write_bytes(pickling.dumps(topology))
    backend = GatedReads(f"file://{tmp_path / 'ckpt'}")
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000)
    core = MasterCore("gray", config, topology.descriptor(), backend)
    core.upgrade.attach_run_dir(run)
    core.rescale.attach_run_dir(run)
    sessions = [register(core, w, "v1") for w in (0, 1)]
    start(core, sessions)

    package, entry = build_package(v2)
    core.upgrade.request("start", package, entry, workers=[1])
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "quiescing", "quiescing")
    quiescent = core.upgrade.checkpoint_id
    assert quiescent is not None
    backend.gate_id = quiescent
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    wait_until(lambda: (core.tick(), core.upgrade.phase)[1] == "stopping", "stopping")
    assert next_message(sessions[1], "shutdown").shutdown.exit_code == 75
    label = core.upgrade.version_of(1)
    assert label != "v1"

    # the batch worker comes back on the new code: the upgrade reads n's metadata
    registered = threading.Thread(target=lambda: register(core, 1, label, core.generation),
                                  daemon=True)
    registered.start()
    assert backend.entered.wait(15), "the switch never read its quiescent checkpoint"
    answered: list[dict[str, Any]] = []
    asker = threading.Thread(target=lambda: answered.append(core.status()), daemon=True)
    asker.start()
    asker.join(3)
    hung = not answered
    backend.release.set()
    asker.join(10)
    registered.join(10)
    assert not hung, "jstorm status hung while the backend read the quiescent checkpoint"

    # the switch goes on as before: the batch restores n, then everyone resumes
    batch = core.sessions[1]
    prepare = next_message(batch, "prepare").prepare
    assert prepare.partial and prepare.checkpoint_id == quiescent
    assert {r.task_id for r in prepare.restores} == set(prepare.task_ids) and all(
        f"chk-{quiescent:010d}" in r.handle for r in prepare.restores)
    core.on_ready(pb.Ready(worker_id=1, generation=core.generation, ok=True))
    assert core.upgrade.phase == "upgrading"
    assert next_message(sessions[0], "resume").resume.generation == core.generation
