"""A new user's mistakes on real processes (issue 28): each gets a clear answer naming the
component and what to do, instead of silence, wrong output or a hundred restarts."""

from __future__ import annotations

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed

from .components import NumberSpout, ShortSquare
from .helpers import fast_config

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
