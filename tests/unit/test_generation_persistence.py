"""A generation is used only once it is durable (issue 23, hole 7).

A Topology Master that failed to persist a new generation used to go on with it (the
failure was only logged): a TM restarted after that read the older value and handed the
same generation out again, so live workers accepted frames of the old timeline and sink
fence tokens did not advance. Now the recovery waits, retrying, until the generation is
stored; a restarted TM then always starts above every generation ever used."""

from __future__ import annotations

import time
from pathlib import Path

from jstormpy import Config
from jstormpy.api.errors import BackendError
from jstormpy.master.core import MasterCore
from jstormpy.state_backends import open_backend
from tests.unit.test_launch_attempts import DESCRIPTOR, next_message, register


class MetaOutage:
    """A file backend whose small-object writes (the generation counter) fail until healed."""

    def __init__(self, root: Path) -> None:
        self.backend = open_backend(f"file://{root}")
        self.broken = True

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def put_meta(self, name: str, data: bytes) -> None:
        if self.broken:
            raise BackendError("meta/generation: connection refused")
        self.backend.put_meta(name, data)


def test_no_prepare_goes_out_under_a_generation_that_is_not_stored(tmp_path: Path) -> None:
    backend = MetaOutage(tmp_path)
    core = MasterCore("la", Config(workers=2), DESCRIPTOR, backend)  # type: ignore[arg-type]
    sessions = [register(core, w, 0) for w in (0, 1)]
    assert core.backend_io.wait_idle(10)
    assert all(s.outq.empty() for s in sessions), "prepared with an unstored generation"
    assert any("cannot persist generation" in e["message"] for e in core.errors) or \
        core.recovery.retry_prepare_at is not None
    backend.broken = False  # the backend comes back: the retry goes through
    deadline = time.monotonic() + 10
    while core.recovery.retry_prepare_at is not None and time.monotonic() < deadline:
        core.recovery.retry_prepare_at = 0.0  # due now, instead of waiting PREPARE_RETRY_S
        core.tick()
        core.backend_io.wait_idle(10)
    prepare = next_message(sessions[0], "prepare").prepare
    stored = int(backend.backend.get_meta("generation").decode())
    assert prepare.generation == stored == core.generation
    # a TM restarted now resumes above it
    again = MasterCore("la", Config(workers=2), DESCRIPTOR, backend.backend, resume=True)
    assert again.generation >= prepare.generation
