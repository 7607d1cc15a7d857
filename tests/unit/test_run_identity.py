"""The run identity (jstormpy/run_identity.py): how a fresh run, a resume and a savepoint
restore relate to the run stored in a state backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from jstormpy.api.errors import JStormError
from jstormpy.run_identity import (
    RunIdentity,
    load_run_identity,
    store_run_identity,
    take_over_run,
)
from jstormpy.state_backends import open_backend


@pytest.fixture
def backend(tmp_path: Path):  # type: ignore[no-untyped-def]
    b = open_backend(f"file://{tmp_path / 'ckpt'}")
    yield b
    b.close()


def test_a_fresh_start_is_a_new_run_and_a_resume_continues_it_one_epoch_later(
        backend) -> None:  # type: ignore[no-untyped-def]
    first = take_over_run(backend, resume=False)
    assert first is not None and first.epoch == 1 and load_run_identity(backend) == first
    resumed = take_over_run(backend, resume=True)  # a TM restarted with --resume
    assert first is not None and resumed is not None
    assert (resumed.job_id, resumed.epoch) == (first.job_id, 2)
    assert load_run_identity(backend) == resumed
    fresh = take_over_run(backend, resume=False)  # the same topology submitted again
    assert fresh is not None and fresh.job_id != first.job_id and fresh.epoch == 1


def test_a_run_started_before_run_identities_resumes_without_one(
        backend) -> None:  # type: ignore[no-untyped-def]
    # its sinks keep the names it started with (bare transactional id, topology fence)
    assert take_over_run(backend, resume=True) is None
    assert load_run_identity(backend) is None


def test_a_savepoint_restore_is_a_new_run_naming_the_one_it_came_from(
        backend) -> None:  # type: ignore[no-untyped-def]
    parent = RunIdentity("parentjob", 3)
    store_run_identity(backend, RunIdentity.from_savepoint(parent, 17))
    run = take_over_run(backend, resume=True)  # the launcher submits it with resume
    assert run is not None and run.job_id != parent.job_id and run.epoch == 1
    assert (run.restored_from, run.restored_through) == ("parentjob", 17)
    assert RunIdentity.from_dict(run.to_dict()) == run
    assert RunIdentity.from_dict(None) is None


def test_a_bad_job_id_is_refused_by_name() -> None:
    with pytest.raises(JStormError, match="job_id 'a/b'"):
        RunIdentity("a/b")


def test_every_commit_point_names_the_run_and_the_epoch_that_wrote_it(tmp_path: Path) -> None:
    """A checkpoint's ``_metadata`` carries ``"run"`` (job id and TM epoch): what tells a
    commit of a deposed leader's epoch from its successor's in the store (real MasterCore,
    file backend; the workers' control streams driven by hand)."""
    from tests.unit.test_rescale_commit import ack_all, setup

    core, backend, _sessions = setup(tmp_path)  # its gate is never set: a plain backend
    take_over_run(backend, resume=False)
    core.run = take_over_run(backend, resume=True)  # a TM that took the run over: epoch 2
    assert core.run is not None and core.run.epoch == 2
    with core.lock:
        cid, _started = core.start_checkpoint()
    ack_all(core, cid)
    assert core.backend_io.wait_idle(10)
    assert cid in backend.list_completed()
    assert backend.read_metadata(cid)["run"] == core.run.to_dict()
