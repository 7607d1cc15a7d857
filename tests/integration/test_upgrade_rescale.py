"""Gray release that changes parallelism (``jstorm upgrade NAME --code PKG --rescale``,
docs/rescaling.md): the new code declares other parallelisms, every worker switches to it
in one in-place rescale, and every key's committed output stays exactly-once, through the
Python API and the CLI.

The topology is the one of tests/integration/test_upgrade.py: SequenceSpout(3) ->
RunningSum(fields on key) -> FileSink(3); the new code appends the field ``code``.
"""

from __future__ import annotations

import pytest

from jstormpy import LocalCluster, read_committed
from jstormpy.api.errors import JStormError
from jstormpy.cli.main import load_topology_file
from tests.integration.paced_spout import release
from tests.integration.test_upgrade import (
    code_runs,
    config,
    exactly_once_problems,
    pids,
    running_with_checkpoint,
    wait_for,
    write_version,
)

KEYS, PER_KEY = 30, 3000


def sum_parallelism(handle) -> int:
    return next(c["parallelism"] for c in handle.status()["components"] if c["name"] == "sum")


def write_code(path, out, label: str, **kw):
    """A version whose RunningSum appends ``code`` = ``label`` to every record."""
    write_version(path, out, v2=True, keys=KEYS, per_key=PER_KEY, **kw)
    path.write_text(path.read_text().replace('("v2",)', f'("{label}",)'))
    return path


@pytest.mark.slow
def test_upgrade_with_rescale_under_load_python_then_cli(tmp_path, capsys) -> None:
    from jstormpy.cli.main import main

    out = tmp_path / "out"
    gate = tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, keys=KEYS,
                                              per_key=PER_KEY, release_file=gate)))
    v2 = write_code(tmp_path / "v2.py", out, "v2", sum_par=5, release_file=gate)
    v3 = write_code(tmp_path / "v3.py", out, "v3", sum_par=2, state_version=2, migrate=True,
                    release_file=gate)
    total = KEYS * PER_KEY
    with LocalCluster() as cluster:
        handle = cluster.submit(v1.topology, config())
        wait_for(lambda: running_with_checkpoint(handle)
                 and len(read_committed(out)) > 3000, 60, "committed output on v1")
        # without --rescale, a parallelism change is refused with the hint
        with pytest.raises(JStormError, match="(?s)parallelism 3 -> 5.*--rescale"):
            handle.upgrade(str(v2), workers=[1])
        before = pids(handle)
        state = handle.upgrade(str(v2), rescale=True)
        assert state["phase"] == "completed" and state["stable_version"] == "v2", state
        assert set(state["versions"].values()) == {"v2"}
        record = state["switches"][-1]
        assert record["kind"] == "rescale" and record["changes"] == {"sum": 5}
        assert record["pause_ms"] > 0 and record["error"] == ""
        assert sum_parallelism(handle) == 5
        assert {w.code_version for w in handle.workers()} == {"v2"}
        assert all(pids(handle)[w] != before[w] for w in before), "every worker restarts"
        done = len(read_committed(out))
        assert done < total, "the run ended before the first upgrade"
        # the code is a package now: parallelism changes with the code, not alone
        with pytest.raises(JStormError, match="upgrade NAME --code PKG --rescale"):
            handle.rescale({"sum": 4})
        wait_for(lambda: len(read_committed(out)) > done + 3000, 60, "output on v2")
        # second step through the CLI, with a state_version change (migrate_state)
        assert main(["upgrade", "upgrade-linear", "--code", str(v3), "--rescale"]) == 0
        shown = capsys.readouterr().out
        assert "upgraded upgrade-linear to v3 at sum=2: spouts paused" in shown, shown
        assert len(read_committed(out)) < total, "the run ended before the second upgrade"
        assert sum_parallelism(handle) == 2
        status = handle.status()
        assert status["upgrade"]["stable_version"] == "v3"
        assert [r["code"] for r in status["rescale"]["history"]] == ["v2", "v3"]
        release(gate)  # the scenario is over: the rest at full speed
        final = handle.wait(timeout=240)
        assert final["restarts"] == 0, final["recoveries"]
    assert not (problems := exactly_once_problems(out, KEYS, PER_KEY)), problems
    runs = code_runs(out)
    for key, r in runs.items():  # each key moved forward through the versions, never back
        assert r in (["v1", "v2", "v3"], ["v1", "v3"], ["v2", "v3"], ["v3"]), (key, r)
    assert any(r[:2] == ["v1", "v2"] for r in runs.values()), runs


def test_upgrade_with_rescale_refusals_change_nothing(tmp_path) -> None:
    out, gate = tmp_path / "out", tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, per_key=500,
                                              rate=500.0, release_file=gate)))
    # keys/per_key differ: wiring same
    same = write_code(tmp_path / "same.py", out, "v2", release_file=gate)
    with LocalCluster() as cluster:
        handle = cluster.submit(v1.topology, config())
        wait_for(lambda: running_with_checkpoint(handle), 60, "a first checkpoint")
        before = pids(handle)
        with pytest.raises(JStormError, match="declares the parallelism already running"):
            handle.upgrade(str(same), rescale=True)
        with pytest.raises(JStormError, match="--rescale takes no --workers"):
            handle.client.upgrade("rescale", b"x", "t.py", workers=[1])
        with pytest.raises(JStormError, match="takes the new code only"):
            handle.upgrade(str(same), rescale=True, workers=[1])
        st = handle.status()
        assert st["upgrade"]["phase"] == "idle" and st["upgrade"]["packages"] == []
        assert st["rescale"]["requested"] == 0
        assert pids(handle) == before and st["generation"] == 1
        release(gate)  # the scenario is over: the rest at full speed
        handle.wait(timeout=120)
    assert not (problems := exactly_once_problems(out, 30, 500)), problems


@pytest.mark.slow
def test_master_killed_at_the_commit_of_an_upgrade_with_rescale(tmp_path) -> None:
    """The TM dies right after writing the rescaled checkpoint, before adopting the new
    descriptor and code assignment: the restarted TM adopts both (pending files), every
    worker comes back on the new code at the new parallelism, exactly-once."""
    out = tmp_path / "out"
    env = {"JSTORM_FAULTS": "rescale_after_commit", "JSTORM_FAULT_DIR": str(tmp_path)}
    gate = tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, keys=KEYS,
                                              per_key=PER_KEY, release_file=gate)))
    v2 = write_code(tmp_path / "v2.py", out, "v2", sum_par=4, release_file=gate)
    with LocalCluster(env=env) as cluster:
        handle = cluster.submit(v1.topology, config())
        wait_for(lambda: running_with_checkpoint(handle)
                 and len(read_committed(out)) > 3000, 60, "committed output on v1")
        old_master = handle.master_pid
        state = handle.upgrade(str(v2), rescale=True)
        assert (tmp_path / "rescale_after_commit@0@None").exists(), "the fault did not fire"
        assert handle.master_pid != old_master
        assert state["stable_version"] == "v2" and set(state["versions"].values()) == {"v2"}
        assert sum_parallelism(handle) == 4
        wait_for(lambda: len([w for w in handle.workers() if w.alive]) == 3
                 and {w.code_version for w in handle.workers() if w.alive} == {"v2"}, 60,
                 "every worker on v2")
        assert len(read_committed(out)) < KEYS * PER_KEY, "the run ended before the upgrade"
        release(gate)  # the scenario is over: the rest at full speed
        handle.wait(timeout=240)
    assert not (problems := exactly_once_problems(out, KEYS, PER_KEY)), problems
    for key, r in code_runs(out).items():
        assert r in (["v1", "v2"], ["v2"]), (key, r)
