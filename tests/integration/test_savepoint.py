"""Savepoint a running topology, then restart it from the savepoint with new code
(migrate_state) and another parallelism: every key's sequence stays exactly-once."""

from __future__ import annotations

from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster, SequenceSpout, TopologyBuilder, read_committed
from jstormpy.errors import JStormError
from jstormpy.savepoints import read_manifest
from tests.chaos.topologies import check_keyed_sums
from tests.integration.helpers import committed_count, wait_until
from tests.integration.savepoint_components import RunningSumV2, linear, partial_counts

KEYS, PER_KEY = 12, 1500


@pytest.mark.slow
@pytest.mark.parametrize("new_parallelism", [4, 1])
def test_savepoint_then_new_code_at_another_parallelism(tmp_path: Path,
                                                        new_parallelism: int) -> None:
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 2), conf)
        wait_until(lambda: committed_count(out) > 2000, 60, "some committed output")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    assert uri == f"file://{tmp_path / 'sp'}"
    manifest = read_manifest(uri)
    assert manifest["components"]["sum"]["parallelism"] == 2
    assert len(read_committed(out)) < KEYS * PER_KEY, "the run ended before the savepoint"

    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, new_parallelism, RunningSumV2), conf,
                                from_savepoint=uri)
        handle.wait(timeout=120)
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""


def test_from_savepoint_refuses_state_of_a_removed_component(tmp_path: Path) -> None:
    out = tmp_path / "out"
    conf = Config(workers=1, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 1, rate=500), conf)
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    b = TopologyBuilder("sp-linear")
    b.set_spout("events", SequenceSpout(keys=2, per_key=10), parallelism=2)
    with LocalCluster() as cluster, pytest.raises(JStormError, match="'out', 'sum'"):
        cluster.submit(b.build(), conf, from_savepoint=uri)


@pytest.mark.slow
def test_cli_savepoint_inspect_and_run_from_savepoint(tmp_path: Path, capsys) -> None:
    from jstormpy.cli import main

    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    uri = f"file://{tmp_path / 'sp'}"
    with LocalCluster() as cluster:
        cluster.submit(linear(out, 2), conf)
        wait_until(lambda: committed_count(out) > 2000, 60, "some committed output")
        assert main(["savepoint", "sp-linear", "--stop", "--to", uri]) == 0
    assert f"savepoint written to {uri}; sp-linear stopped" in capsys.readouterr().out
    assert main(["savepoint", "inspect", uri]) == 0
    shown = capsys.readouterr().out
    assert "topology 'sp-linear'" in shown and "sum: parallelism 2" in shown
    topo_file = tmp_path / "topo.py"
    topo_file.write_text(
        "from pathlib import Path\n"
        "from jstormpy import Config\n"
        "from tests.integration.savepoint_components import RunningSumV2, linear, partial_counts\n"
        f"topology = linear(Path({str(out)!r}), 3, RunningSumV2)\n"
        "config = Config(workers=2, checkpoint_interval_ms=300)\n")
    assert main(["run", str(topo_file), "--from-savepoint", uri, "--timeout", "120"]) == 0
    assert check_keyed_sums(out, KEYS, PER_KEY) == ""
    assert main(["savepoint", "inspect", f"file://{tmp_path / 'none'}"]) == 2
    assert "holds no complete savepoint" in capsys.readouterr().err


@pytest.mark.slow
def test_shuffle_fed_state_survives_a_savepoint_and_refuses_another_parallelism(
        tmp_path: Path) -> None:
    """Hole 5: a shuffle-fed counter's per-task partial counts come back whole at the same
    parallelism (they were overwritten per key group), and another parallelism is refused
    by name instead of silently losing counts."""
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    keys, per_key = 6, 1500
    with LocalCluster() as cluster:
        handle = cluster.submit(partial_counts(out, 2, keys, per_key), conf)
        wait_until(lambda: committed_count(out) > 2000, 60, "some committed output")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    assert committed_count(out) < keys * per_key, "the run ended before the savepoint"
    with LocalCluster() as cluster, pytest.raises(JStormError, match=r"component 'count'.*"
                                                  r"not partitioned by its fields grouping"):
        cluster.submit(partial_counts(out, 3, keys, per_key), conf, from_savepoint=uri)
    with LocalCluster() as cluster:
        handle = cluster.submit(partial_counts(out, 2, keys, per_key, rate=None), conf,
                                from_savepoint=uri)
        handle.wait(timeout=120)
    # the last partial count of each (key, task) adds up to every event of the key, once
    final: dict[tuple[str, int], int] = {}
    for r in read_committed(out):
        key_task = (r["key"], r["task"])
        assert r["partial"] == final.get(key_task, 0) + 1, f"{key_task}: counts skip or repeat"
        final[key_task] = r["partial"]
    totals = {f"k{i}": sum(v for (k, _), v in final.items() if k == f"k{i}")
              for i in range(keys)}
    assert totals == {f"k{i}": per_key for i in range(keys)}
