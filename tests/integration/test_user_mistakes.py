"""A new user's mistakes on real processes (issue 28): each gets a clear answer naming the
component and what to do, instead of silence, wrong output or a hundred restarts."""

from __future__ import annotations

import json

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import TopologyError

from .components import LockedCount, LockInState, NumberSpout, ShortSquare
from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(150)


def test_wrong_number_of_emitted_values_is_reported_and_nothing_wrong_is_written(tmp_path):
    out = tmp_path / "out"
    b = TopologyBuilder("arity")
    b.set_spout("numbers", NumberSpout(20), parallelism=1)
    b.set_bolt("square", ShortSquare, parallelism=1).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("square")
    with LocalCluster() as cluster:
        status = cluster.submit(b.build(), fast_config(guarantee="at_most_once")).wait(60)
    rows = read_committed(out) if out.exists() else []
    assert rows == []  # before: {'n': 0}, {'n': 1}, ... written as if nothing was wrong
    messages = [e["message"] for e in status["errors"] if e["component"] == "square"]
    assert messages, status["errors"]
    assert "emitted 1 value(s)" in messages[0], messages[0]
    assert "stream 'default'" in messages[0] and "('n', 'sq')" in messages[0], messages[0]


def test_component_that_cannot_be_pickled_is_named_at_submit(tmp_path):
    b = TopologyBuilder("locked")
    b.set_spout("numbers", NumberSpout(20), parallelism=1)
    b.set_bolt("count", LockedCount(), parallelism=1).shuffle_grouping("numbers")
    with LocalCluster(home=tmp_path / "home") as cluster, \
            pytest.raises(TopologyError) as err:
        cluster.submit(b.build(), fast_config())
    msg = str(err.value)
    assert "component 'count'" in msg and "attribute 'guard'" in msg, msg
    assert "_thread.lock" in msg and "prepare()" in msg, msg
    assert not (tmp_path / "home" / "runs" / "locked").exists()  # nothing half-written


def test_state_that_cannot_be_pickled_is_named_at_the_first_snapshot(tmp_path):
    b = TopologyBuilder("lockstate")
    b.set_spout("numbers", NumberSpout(400, per_call=2, pause_s=0.002), parallelism=1)
    b.set_bolt("count", LockInState, parallelism=1).shuffle_grouping("numbers")
    with LocalCluster(home=tmp_path / "home") as cluster:
        h = cluster.submit(b.build(), fast_config(workers=1))
        errors = wait_until(lambda: [e for e in h.status()["errors"]
                                     if e["component"] == "count"], timeout=60,
                            what="the snapshot error of 'count'")
    msg = errors[0]["message"]
    assert msg.startswith("CheckpointError: component 'count'"), msg
    assert "state 'seen'" in msg and "_thread.lock" in msg and "['lock']" in msg, msg
    assert "prepare()" in msg, msg


def test_a_new_submit_does_not_inherit_an_old_upgrade_assignment(tmp_path):
    """An earlier run's gray upgrade left ``runs/NAME/code/assignment.json`` (workers 0..5
    on v2); a new submit (here a resume, which restores) must start from its own code."""
    home = tmp_path / "home"
    out = tmp_path / "out"
    b = TopologyBuilder("stale")
    b.set_spout("numbers", NumberSpout(50), parallelism=1)
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("numbers")
    with LocalCluster(home=home) as cluster:
        assert cluster.submit(b.build(), fast_config(workers=1)).wait(60)["state"] == "drained"
    code = home / "runs" / "stale" / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "assignment.json").write_text(json.dumps(
        {"stable": "v2", "target": None, "assigned": {str(w): "v2" for w in range(6)}}))
    with LocalCluster(home=home) as cluster:
        status = cluster.submit(b.build(), fast_config(workers=1), resume=True).wait(60)
    # the code this submit gave, not the old upgrade's v2
    assert status["upgrade"]["stable_version"] == "v1", status["upgrade"]
    assert status["upgrade"]["versions"] == {"0": "v1"}, status["upgrade"]
    assert status["state"] == "drained", status.get("errors")
    assert sorted(r["seq"] for r in read_committed(out)) == list(range(50))
