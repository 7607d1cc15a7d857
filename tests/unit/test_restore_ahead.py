"""The first generation's restore is resolved while the workers start (issue 36).

A Topology Master used to store the restore plan's records (the generation counter, the
ids record, the epoch's restore: a write and two fsyncs each) only after the last worker
registered, back to back before any Prepare. It now stores them as soon as it took the
run over (``MasterCore.resolve_ahead``), and holds the outcome: no Prepare goes out before
every worker registered, and the one that goes out names the stored generation and the
restore the listing shows after the last registration."""

from __future__ import annotations

from pathlib import Path

from jstormpy import Config
from jstormpy.master.core import MasterCore
from jstormpy.master.topology_state import TopologyState
from jstormpy.run_identity import take_over_run
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.base import CHECKPOINT_IDS_META
from tests.unit.test_launch_attempts import DESCRIPTOR, next_message, register


class Recorded:
    """A file backend that notes every small-object write."""

    def __init__(self, root: Path) -> None:
        self.backend = open_backend(f"file://{root}")
        self.writes: list[str] = []

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def put_meta(self, name: str, data: bytes) -> None:
        self.writes.append(name)
        self.backend.put_meta(name, data)


def taken_over(root: Path, resume: bool = False) -> tuple[MasterCore, Recorded]:
    backend = Recorded(root)
    core = MasterCore("la", Config(workers=2), DESCRIPTOR, backend,  # type: ignore[arg-type]
                      resume=resume)
    core.run = take_over_run(backend.backend, resume)
    backend.writes.clear()
    core.resolve_ahead()
    assert core.backend_io.wait_idle(10)
    return core, backend


def test_a_fresh_start_stores_its_restore_before_any_worker_registers(tmp_path: Path) -> None:
    core, backend = taken_over(tmp_path)
    # before any registration: the generation, the ids record naming the epoch's restore
    assert backend.writes == ["generation", CHECKPOINT_IDS_META, CHECKPOINT_IDS_META]
    assert int(backend.backend.get_meta("generation").decode()) == 1
    assert core.state == TopologyState.STARTING and core.generation == 0
    first = register(core, 0, 0)
    assert core.backend_io.wait_idle(10)
    assert first.outq.empty(), "a Prepare went out before every worker registered"
    second = register(core, 1, 0)
    assert core.backend_io.wait_idle(10)
    prepares = [next_message(s, "prepare").prepare for s in (first, second)]
    assert [p.generation for p in prepares] == [1, 1] == [core.generation] * 2
    assert backend.writes == ["generation", CHECKPOINT_IDS_META, CHECKPOINT_IDS_META], \
        "the registrations waited for stores"


def test_a_resumed_run_restores_what_the_listing_shows_after_the_last_registration(
        tmp_path: Path) -> None:
    first_run, _ = taken_over(tmp_path)  # generation 1 stored; checkpoint 1 completes
    first_run.backend.create_metadata(1, {"tasks": {str(t): {"handle": f"h{t}"}
                                                    for t in (1, 2, 3, 4)}})
    core, backend = taken_over(tmp_path, resume=True)
    assert "generation" in backend.writes  # generation 2, ahead of the registrations
    first = register(core, 0, 0)
    assert core.backend_io.wait_idle(10)
    # a checkpoint completes between the early resolution and the last registration (as
    # one whose commit point a restarted TM waits for would): the Prepares restore it
    core.backend.create_metadata(2, {"tasks": {str(t): {"handle": f"g{t}"}
                                               for t in (1, 2, 3, 4)}})
    second = register(core, 1, 0)
    assert core.backend_io.wait_idle(10)
    assert first.outq.qsize() == 1  # one Prepare: none went out before the registration
    prepares = [next_message(s, "prepare").prepare for s in (first, second)]
    assert {p.generation for p in prepares} == {2}
    assert {p.restored_checkpoint_id for p in prepares} == {2}
    assert {r.handle for p in prepares for r in p.restores} == {"g1", "g2", "g3", "g4"}
