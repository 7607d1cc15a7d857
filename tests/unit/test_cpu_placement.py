"""The placement policy of a local cluster's workers (``jstormpy/deploy/cpu_placement.py``);
the workers on their CPUs: tests/integration/test_cpu_placement.py."""

from __future__ import annotations

import pytest

from jstormpy import Config
from jstormpy.api.errors import ConfigError
from jstormpy.deploy.cpu_placement import worker_cpus


def cpus(*ids: int):
    return lambda: set(ids)


def test_a_lone_topology_gets_a_cpu_per_worker_in_order() -> None:
    assert list(worker_cpus(Config(workers=2), True, cpus(3, 1, 2))) == [1, 2, 3]
    assert list(worker_cpus(Config(workers=3), True, cpus(0, 1, 2))) == [0, 1, 2]


@pytest.mark.parametrize(("config", "alone", "available"), [
    (Config(workers=2), False, cpus(0, 1)),  # another topology under the same home
    (Config(workers=3), True, cpus(0, 1)),  # more workers than CPUs
    (Config(workers=1), True, cpus(0)),  # one CPU
    (Config(workers=2, state_store="rocksdb"), True, cpus(0, 1)),  # compactions: every core
    (Config(workers=2, worker_cpu_affinity="off"), True, cpus(0, 1)),
])
def test_the_os_places_the_workers_where_a_core_could_be_crowded(config, alone,
                                                                 available) -> None:
    assert list(worker_cpus(config, alone, available)) == []


def test_a_bad_setting_is_named() -> None:
    with pytest.raises(ConfigError, match="worker_cpu_affinity"):
        Config(worker_cpu_affinity="on")
