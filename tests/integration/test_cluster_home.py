"""``LocalCluster(home=...)`` keeps everything under that home, the registry included."""

from __future__ import annotations

import os

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder
from jstormpy.cli.client import Registration, jstorm_home

from .components import NumberSpout
from .helpers import fast_config

pytestmark = pytest.mark.timeout(120)


def test_home_moves_the_registry(tmp_path):
    home = tmp_path / "elsewhere"
    b = TopologyBuilder("home-moved")
    b.set_spout("n", NumberSpout(20))
    b.set_bolt("out", FileSink(str(tmp_path / "out"))).shuffle_grouping("n")
    with LocalCluster(home=home) as cluster:
        handle = cluster.submit(b.build(), fast_config())
        assert (home / "topologies" / "home-moved.json").exists()
        assert not (jstorm_home() / "topologies").exists(), os.listdir(jstorm_home())
        reg = Registration.load("home-moved", home)
        assert reg.run_dir == str(home / "runs" / "home-moved")
        assert handle.wait(timeout=60)["state"] == "drained"
    assert not (home / "topologies" / "home-moved.json").exists()  # removed at shutdown
