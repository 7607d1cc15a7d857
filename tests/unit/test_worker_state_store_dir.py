"""A worker with no run directory and no ``state_store_dir`` (a Spark task's) keeps its task
databases in a temporary directory of its own: removed when the worker exits, and when it
was killed, by the next worker to start on the host. Before, every such worker left its
databases in the temp directory for good (docs/state-stores.md, "Layout on disk").

A real ``Worker`` in a subprocess, its topology set as ``fetch_topology`` sets it, its
tasks built by ``prepare`` as the control thread calls it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WORKER = """
import os, sys
os.environ.pop("JSTORM_RUN_DIR", None)
from jstormpy import Config, TopologyBuilder, pickling
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.runtime.transport import Transport
from jstormpy.runtime.worker import Worker
from jstormpy.state_backends import open_backend
from tests.integration.components import NumberSpout, PassThrough

b = TopologyBuilder("own-dir")
b.set_spout("numbers", NumberSpout(n=10), parallelism=1)
b.set_bolt("pass", PassThrough(), parallelism=2).shuffle_grouping("numbers")
w = Worker("127.0.0.1:9", 1, b"secret")  # never connects to a TM
w.topology = b.build()
w.config = Config(state_store="rocksdb", state_backend="file://" + sys.argv[1])
w.component_blobs = {s.name: pickling.dumps(s.obj) for s in w.topology.components.values()}
w.backend = open_backend(w.config.state_backend)
w.transport = Transport(1, b"secret", lambda *a: None)
w.transport.start()
ready = w.prepare(pb.Prepare(generation=1, checkpoint_id=3, task_ids=[1, 2, 3],
                             task_workers={1: 1, 2: 1, 3: 1}, restored_checkpoint_id=3))
assert ready is not None and ready.ok, ready
print(w.own_state_store_dir, flush=True)
sys.stdin.readline()  # until the test closes stdin (or kills this process)
w.stop_tasks()
w.transport.close()
w.channel.close()
"""


def start_worker(backend: Path) -> tuple[subprocess.Popen[str], Path]:
    env = {k: v for k, v in os.environ.items() if k != "JSTORM_RUN_DIR"}
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(backend)], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, f"the worker exited with {proc.wait()}"
    return proc, Path(line)


def test_its_databases_directory_goes_when_the_worker_exits(tmp_path: Path) -> None:
    proc, own = start_worker(tmp_path / "ckpt")
    assert own.is_dir() and own.name.startswith("jstorm-state-store-")
    assert (own / "worker-1").is_dir()  # where its tasks' databases go
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert not own.exists()


def test_a_killed_workers_directory_goes_when_the_next_worker_starts(tmp_path: Path) -> None:
    killed, left = start_worker(tmp_path / "ckpt")
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    assert left.is_dir(), "a killed worker removed its directory"
    proc, own = start_worker(tmp_path / "ckpt")
    try:
        assert not left.exists(), left
        assert own.is_dir() and own != left
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
    assert not own.exists()
