"""In-place rescale of a running topology (docs/rescaling.md): keyed state follows its key
groups to the new tasks, spout splits to the new spout tasks, and every key's committed
output stays exactly-once, through the Python API and the CLI."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster
from jstormpy.api.errors import JStormError
from jstormpy.cli.status import format_status
from tests.chaos.topologies import check_keyed_sums
from tests.integration.helpers import committed_count, kill_now, wait_until
from tests.integration.paced_spout import release
from tests.integration.savepoint_components import linear

KEYS, PER_KEY = 12, 1500


def parallelism(handle, component: str) -> int:
    return next(c["parallelism"] for c in handle.status()["components"]
                if c["name"] == component)


@pytest.mark.slow
def test_rescale_up_then_down_under_load_keeps_every_key_exactly_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(linear(out, 2, rate=700, release_file=tmp_path / "go"), conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        up = handle.rescale({"sum": 4})
        assert parallelism(handle, "sum") == 4 and up["error"] == ""
        tasks = {c["name"]: c["tasks"] for c in handle.status()["components"]}
        assert len(tasks["sum"]) == 4
        assert sorted(t for w in handle.workers() for t in w.tasks) == \
            sorted(t for ts in tasks.values() for t in ts)
        before = committed_count(out)
        wait_until(lambda: committed_count(out) > before + 1500, 60, "output after the rescale up")
        down = handle.rescale({"sum": 1})
        assert parallelism(handle, "sum") == 1 and down["pause_ms"] > 0
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the rescale down"
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


def test_rescale_refusals_name_the_component_and_change_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    conf = Config(workers=1, checkpoint_interval_ms=300, max_parallelism=4)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 2, keys=4, per_key=400, rate=400), conf)
        wait_until(lambda: committed_count(out) > 0, 60, "some committed output")
        pid = handle.workers()[0].pid
        refusals = {
            "events": "'events' \\(SequenceSpout\\) keeps non-keyed state .* no "
                      "redistribute_state",
            "nope": "no component 'nope'",
        }
        for component, message in refusals.items():
            with pytest.raises(JStormError, match=message):
                handle.rescale({component: 3})
        with pytest.raises(JStormError, match="'sum': parallelism 5 exceeds the job's "
                                              "max_parallelism 4"):
            handle.rescale({"sum": 5})
        status = handle.status()
        assert status["rescale"]["requested"] == 0 and status["generation"] == 1
        assert handle.workers()[0].pid == pid
        handle.wait(timeout=120)
    assert check_keyed_sums(out, 4, 400) == ""


@pytest.mark.slow
def test_cli_rescales_spout_splits_and_keyed_state(tmp_path: Path, capsys) -> None:
    from jstormpy.cli.main import main
    from tests.integration.rescale_components import file_pipeline, write_event_files

    data, out = tmp_path / "data", tmp_path / "out"
    keys = write_event_files(data, files=6, keys_per_file=2, per_key=400)
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(file_pipeline(data, out, release_file=tmp_path / "go"), conf)
        wait_until(lambda: committed_count(out) > 600, 60, "some committed output")
        assert main(["rescale", "rs-files", "lines=3", "sum=3"]) == 0
        assert "rescaled rs-files to lines=3, sum=3: spouts paused" in capsys.readouterr().out
        assert parallelism(handle, "lines") == 3 and parallelism(handle, "sum") == 3
        assert committed_count(out) < keys * 400, "the run ended before the rescale"
        assert main(["rescale", "rs-files", "lines=1"]) == 0
        assert main(["status", "rs-files", "--json"]) == 0
        shown = capsys.readouterr().out
        assert shown.startswith("rescaled rs-files to lines=1")
        status = json.loads(shown[shown.index("{"):])
        assert [c["parallelism"] for c in status["components"]] == [1, 1, 3, 1]
        assert [r["changes"] for r in status["rescale"]["history"]] == \
            [{"lines": 3, "sum": 3}, {"lines": 1}]
        assert main(["rescale", "rs-files", "parse=2x"]) != 0
        assert "is not COMPONENT=PARALLELISM" in capsys.readouterr().err
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, keys, 400) == ""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_during_rescale_keeps_exactly_once(tmp_path: Path, seed: int) -> None:
    """SIGKILL the Topology Master or a worker at a seeded moment of the rescale (quiesce,
    redistribution, commit, restart): the rescale happens or not, never half."""
    rng = random.Random(seed)
    victim = "master" if seed % 2 else "worker"
    delay = rng.uniform(0.0, 1.0)
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 2, rate=700), conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        worker = rng.randrange(2)
        handle.rescale({"sum": 4}, wait=False)
        time.sleep(delay)  # the seeded moment of the kill, not a wait for a condition
        kill_now(handle, victim, worker)
        handle.wait(timeout=180)
        assert parallelism(handle, "sum") in (2, 4)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


@pytest.mark.slow
def test_master_killed_right_after_the_rescale_commit_adopts_the_new_layout(
        tmp_path: Path) -> None:
    """The TM dies after writing the rescaled checkpoint, before switching its files or
    telling any worker: the restarted TM adopts the layout, and the workers that survived
    with the old topology are restarted on the new one."""
    out = tmp_path / "out"
    env = {"JSTORM_FAULTS": "rescale_after_commit", "JSTORM_FAULT_DIR": str(tmp_path)}
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster(env=env) as cluster:
        handle = cluster.submit(linear(out, 2, rate=700, release_file=tmp_path / "go"), conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        old_master = handle.master_pid
        handle.rescale({"sum": 4})
        assert (tmp_path / "rescale_after_commit@0@None").exists(), "the fault did not fire"
        assert handle.master_pid != old_master
        status = handle.status()
        assert status["rescale"]["layout_generation"] >= 2
        assert parallelism(handle, "sum") == 4
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


@pytest.mark.slow
def test_savepoint_new_code_other_parallelism_then_rescale_in_place(tmp_path: Path) -> None:
    """Savepoint, restart with new code (migrate_state) at parallelism 3, then rescale the
    migrated state in place to 1: every key's sums continue exactly once."""
    from tests.integration.savepoint_components import RunningSumV2

    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        # the same spout class as the run restored from the savepoint below
        handle = cluster.submit(linear(out, 2, rate=700, release_file=tmp_path / "go"), conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 3, RunningSumV2, rate=700,
                                       release_file=tmp_path / "go"), conf,
                                from_savepoint=uri)
        before = committed_count(out)
        wait_until(lambda: committed_count(out) > before + 1000, 60, "output on the new code")
        assert handle.rescale({"sum": 1})["error"] == ""
        assert committed_count(out) < KEYS * PER_KEY, "the run ended before the rescale"
        assert "rescale    sum=1: spouts paused" in format_status(handle.status())
        release(tmp_path / "go")  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
