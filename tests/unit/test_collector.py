"""The worker's garbage-collector policy (jstormpy/runtime/collector.py, Config.worker_gc)."""

from __future__ import annotations

import gc

import pytest

from jstormpy import Config
from jstormpy.api.errors import ConfigError
from jstormpy.runtime.collector import YOUNG_THRESHOLD, apply_collector_policy


@pytest.fixture(autouse=True)
def restore_collector():
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_tuned_freezes_the_heap_and_collects_the_young_generation_less_often() -> None:
    held = [object() for _ in range(100)]  # something alive to freeze
    apply_collector_policy("tuned")
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_freeze_count() > len(held)


def test_default_gives_cpythons_settings_back() -> None:
    before = gc.get_threshold()
    apply_collector_policy("tuned")
    apply_collector_policy("default")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_an_unknown_policy_is_refused_by_config_and_by_the_worker() -> None:
    with pytest.raises(ConfigError, match="worker_gc"):
        Config(worker_gc="off")
    with pytest.raises(ValueError, match="unknown collector policy 'off'"):
        apply_collector_policy("off")
