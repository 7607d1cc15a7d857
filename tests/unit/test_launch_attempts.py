"""The Topology Master and a deployer that relaunches every worker at once (Spark).

On Spark a SIGKILLed worker fails the whole barrier stage; the resubmitted stage starts a
new worker for every id, while the old ones' control streams may not have closed yet. Each
worker registers with its launch attempt, and the TM drops every worker of an earlier
attempt as soon as one of the new attempt registers: one failure, one restart, one recovery
naming the worker that died.
"""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

from jstormpy import Config
from jstormpy.master.core import MasterCore, WorkerSession
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends import open_backend

DESCRIPTOR = {"name": "la", "components": [
    {"name": "spout", "kind": "spout", "tasks": [1, 2], "inputs": []},
    {"name": "count", "kind": "bolt", "tasks": [3, 4], "inputs": [{"source": "spout"}]}]}


def core_for(tmp_path: Path) -> MasterCore:
    # no back-off: these tests drive the core without its tick() loop (docs/errors.md)
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0")
    return MasterCore("la", config, DESCRIPTOR, open_backend(f"file://{tmp_path}"))


def next_message(session: WorkerSession, kind: str, timeout: float = 10.0) -> Any:
    """The next message of ``kind`` the TM queued for ``session`` (others are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = session.outq.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {kind} for worker {session.worker_id}") from None
        if msg.WhichOneof("body") == kind:
            return msg


def register(core: MasterCore, wid: int, attempt: int) -> WorkerSession:
    session = WorkerSession(wid, 1000 * attempt + wid, "127.0.0.1", 0, "v1",
                            launch_attempt=attempt)
    core.register(session, 0)
    return session


def start(core: MasterCore, sessions: list[WorkerSession]) -> None:
    for s in sessions:
        prepare = next_message(s, "prepare")
        core.on_ready(pb.Ready(worker_id=s.worker_id, generation=prepare.prepare.generation,
                               ok=True))
    assert core.state == "running"


def test_a_relaunched_stage_is_one_failure(tmp_path: Path) -> None:
    core = core_for(tmp_path)
    old = [register(core, w, 1) for w in (0, 1)]
    start(core, old)
    core.worker_lost(old[1], "control stream closed")  # worker 1 SIGKILLed
    assert core.state == "recovering" and core.restarts == 1
    new1 = register(core, 1, 2)
    # old worker 0 (attempt 1) is still connected, but the stage it ran in failed
    assert not old[0].alive
    assert next_message(old[0], "shutdown").shutdown.reason == \
        "superseded by launch attempt 2"
    assert core.state == "recovering" and core.restarts == 1
    new0 = register(core, 0, 2)
    start(core, [new1, new0])
    assert core.restarts == 1
    assert [r["reason"] for r in core.recoveries] == \
        ["worker 1 lost: control stream closed"]
    core.worker_lost(old[0], "control stream closed")  # its stream closes at last
    assert core.state == "running" and core.restarts == 1


def test_without_launch_attempts_a_late_replacement_is_a_second_failure(tmp_path: Path) -> None:
    """The local launcher restarts one worker at a time (attempt 0): a worker replaced after
    the recovery completed did fail again, and that costs a restart."""
    core = core_for(tmp_path)
    old = [register(core, w, 0) for w in (0, 1)]
    start(core, old)
    core.worker_lost(old[1], "control stream closed")
    new1 = register(core, 1, 0)
    assert old[0].alive
    start(core, [old[0], new1])
    register(core, 0, 0)
    assert core.restarts == 2 and core.state == "recovering"


def test_a_worker_registering_again_after_its_prepare_was_sent_is_prepared_again(
        tmp_path: Path) -> None:
    # a worker whose control stream broke after the recovery's Prepare went out on it
    # registers on a new stream: the TM prepares every worker again in a new generation.
    # It used to prepare them again in the same one, so a Ready of the first Prepares
    # could start the job while a worker was rebuilding its tasks for the second, and
    # frames sent to it in between were lost (found by the deterministic simulator)
    core = core_for(tmp_path)
    w0, w1 = (register(core, w, 0) for w in (0, 1))
    start(core, [w0, w1])
    core.worker_lost(w1, "control stream closed")
    w1b = register(core, 1, 0)
    next_message(w0, "prepare")
    next_message(w1b, "prepare")  # the recovery's Prepares are out
    w1c = register(core, 1, 0)  # w1b's stream broke before its Ready: a new stream
    p1 = next_message(w1c, "prepare").prepare
    p0 = next_message(w0, "prepare").prepare
    assert p0.generation == p1.generation == 3  # 1: start, 2: the first recovery
    for s, p in ((w0, p0), (w1c, p1)):
        core.on_ready(pb.Ready(worker_id=s.worker_id, generation=p.generation, ok=True))
    assert core.state == "running"
