"""Config mistakes a new user makes (issue 28 item 7) get a clear, early answer."""

from __future__ import annotations

import pytest

from jstormpy import Config, LocalCluster, TopologyBuilder
from jstormpy.api.errors import ConfigError
from tests.integration.components import NumberSpout


def test_setting_an_unknown_attribute_is_refused_with_a_suggestion():
    config = Config()
    with pytest.raises(ConfigError, match=r"'checkpoint_interval'.*did you mean "
                                          r"'checkpoint_interval_ms'"):
        config.checkpoint_interval = 100  # type: ignore[attr-defined]
    config.checkpoint_interval_ms = 100  # known settings can still be changed
    assert config.checkpoint_interval_ms == 100


def test_a_keyword_typo_gets_did_you_mean():
    with pytest.raises(ConfigError, match=r"'worker'.*did you mean 'workers'"):
        Config(worker=2)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"'garantee'.*did you mean 'guarantee'"):
        Config.from_dict({"garantee": "exactly_once"})


def test_a_dict_is_accepted_as_config_at_submit(tmp_path):
    b = TopologyBuilder("dictconf")
    b.set_spout("numbers", NumberSpout(10), parallelism=1)
    with LocalCluster(home=tmp_path / "home") as cluster:
        h = cluster.submit(b.build(), {"workers": 1, "checkpoint_interval_ms": 200})
        status = h.wait(60)
    assert status["state"] == "drained"
    assert len(status["workers"]) == 1


def test_a_dict_with_a_typo_is_refused_at_submit(tmp_path):
    b = TopologyBuilder("dictconf")
    b.set_spout("numbers", NumberSpout(10), parallelism=1)
    with LocalCluster(home=tmp_path / "home") as cluster, \
            pytest.raises(ConfigError, match=r"'chekpoint_interval_ms'.*did you mean"):
        cluster.submit(b.build(), {"chekpoint_interval_ms": 200})
    with LocalCluster(home=tmp_path / "home") as cluster, \
            pytest.raises(ConfigError, match=r"config must be a jstormpy.Config or a dict"):
        cluster.submit(b.build(), ["workers", 1])  # type: ignore[arg-type]
