"""Savepoint a running topology, then restart it from the savepoint with new code
(migrate_state) and another parallelism: every key's sequence stays exactly-once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster, SequenceSpout, TopologyBuilder, read_committed
from jstormpy.api.errors import JStormError
from jstormpy.connectors.sinks import committed_files
from jstormpy.operations.savepoints import read_manifest
from jstormpy.testing.semantics import check_sequences
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
    from jstormpy.cli.main import main

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


@pytest.mark.slow
def test_from_savepoint_into_a_used_file_sink_directory_never_drops_output(
        tmp_path: Path) -> None:
    """Issue 23, hole 4: savepoint a running topology, let it commit more output, stop it,
    then restore the savepoint into the same FileSink directory. The restored run's
    checkpoint ids continue from the savepoint's, so they name part files the first run
    wrote after the savepoint. Either the submit is refused with an error naming the
    directory (and nothing is touched), or every record the restored run produces is
    committed -- it is never silently dropped."""
    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    uri = f"file://{tmp_path / 'sp'}"
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 2, rate=1000), conf)
        wait_until(lambda: committed_count(out) > 1500, 60, "some committed output")
        handle.savepoint(uri)  # the topology keeps running
        at_savepoint = read_manifest(uri)["checkpoint_id"]
        wait_until(lambda: committed_count(out) > 4000, 60, "more output after the savepoint")
        handle.kill()
    parts = sorted(p.name for p in out.iterdir() if p.name.startswith("part-"))
    assert any(int(p.split("-")[1]) > at_savepoint for p in parts), "nothing after the savepoint"
    assert len(read_committed(out)) < KEYS * PER_KEY, "the run ended before it was stopped"
    with LocalCluster() as cluster:
        try:
            handle = cluster.submit(linear(out, 2), conf, from_savepoint=uri)
        except JStormError as exc:
            assert str(out) in str(exc) and f"checkpoint {at_savepoint}" in str(exc), exc
            assert sorted(p.name for p in out.iterdir() if p.name.startswith("part-")) == parts
            refused = True
        else:
            handle.wait(timeout=120)
            refused = False
    if refused:
        # what the error says to do: restore into an empty directory. The output up to the
        # savepoint plus the restored run's is every record exactly once, in order
        fresh_out = tmp_path / "restored"
        with LocalCluster() as cluster:
            cluster.submit(linear(fresh_out, 2), conf, from_savepoint=uri).wait(timeout=120)
        records = [json.loads(line) for f in committed_files(out)
                   if int(f.name.split("-")[1]) <= at_savepoint
                   for line in f.read_text().splitlines()] + read_committed(fresh_out)
        report = check_sequences(records, "key", "seq", {f"k{i}": PER_KEY for i in range(KEYS)})
        assert report.ok, report.summary()
        return
    counts: dict[str, set[int]] = {}
    for r in read_committed(out):
        counts.setdefault(r["key"], set()).add(r["count"])
    missing = {k: PER_KEY - len(c & set(range(1, PER_KEY + 1))) for k, c in counts.items()}
    assert len(counts) == KEYS and not any(missing.values()), (
        f"restored output silently dropped (records missing per key): {missing}")
