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


FIRST_AND_LATER = """
import gc, weakref
from jstormpy.runtime.collector import apply_collector_policy

class Node:
    pass

def frozen_garbage():
    '''A cycle that is frozen while alive, then dropped: only a scan of the frozen
    objects (after gc.unfreeze) can reclaim it.'''
    node = Node()
    node.self = node
    gc.collect()
    gc.freeze()
    return weakref.ref(node)

inherited = frozen_garbage()  # what the zygote froze before it forked this worker
apply_collector_policy("tuned")  # the worker built its first generation's tasks
first = inherited() is not None
later = frozen_garbage()
apply_collector_policy("tuned")  # a recovery: the next generation's tasks
print(first, inherited() is None and later() is None)
"""


def test_a_workers_first_policy_leaves_the_zygotes_frozen_heap_unscanned() -> None:
    """The zygote freezes its start-up heap before it forks; a worker's first collection
    (between building its tasks and Ready, so before the run starts) scans only what the
    worker made since. A later generation's policy scans everything once more."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FIRST_AND_LATER], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    assert out == ["True", "True"], f"(zygote's heap left frozen, later rescanned): {out}"
