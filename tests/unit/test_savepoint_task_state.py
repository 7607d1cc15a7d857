"""Managed state that is not partitioned by the routing key (a shuffle-fed bolt keeps a
partial value per task, with the same keys in several tasks) survives a savepoint at the
same parallelism exactly, and a parallelism change refuses it with an error naming the
component and state, on both paths: savepoints and a live rescale (issue 23, hole 5)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, Spout, TopologyBuilder
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Topology
from jstormpy.keygroups import redistribute
from jstormpy.operations.savepoints import import_savepoint, read_manifest, write_savepoint
from jstormpy.state_backends import open_backend


class Src(Spout):
    outputs = ("word",)


class PartialCount(Bolt):
    """Counts what reaches this task; fed by shuffle, so every task sees every word."""


def topo(parallelism: int) -> Topology:
    b = TopologyBuilder("partial")
    b.set_spout("src", Src)
    b.set_bolt("count", PartialCount, parallelism=parallelism).shuffle_grouping("src")
    return b.build()


# task index -> its partial counts: the same words in both tasks, and one word in only one
PARTIAL = [{"w0": 3, "w1": 5, "only0": 1}, {"w0": 4, "w1": 6, "only1": 2}]


def checkpoint(root: Path, t: Topology) -> int:
    backend = open_backend(f"file://{root}")
    tasks = t.task_ids()
    entries = {}
    snaps = {tasks["src"][0]: {"states": {}, "max_parallelism": 128}}
    for i, task_id in enumerate(tasks["count"]):
        snaps[task_id] = {"states": {"counts": dict(PARTIAL[i]), "seen": {"x": i}},
                          "max_parallelism": 128}
    for task_id, snap in snaps.items():
        entries[str(task_id)] = {"handle": backend.put_snapshot(3, task_id, pickle.dumps(snap)),
                                 "size": 1}
    backend.create_metadata(3, {"generation": 1, "tasks": entries})
    return 3


def restored_states(root: Path, t: Topology, cid: int) -> list[dict[str, Any]]:
    backend = open_backend(f"file://{root}")
    meta = backend.read_metadata(cid)
    return [pickle.loads(backend.get_snapshot(meta["tasks"][str(task)]["handle"]))["states"]
            for task in t.task_ids()["count"]]


def test_a_savepoint_at_the_same_parallelism_restores_every_tasks_own_state(
        tmp_path: Path) -> None:
    t = topo(2)
    cid = checkpoint(tmp_path / "run1", t)
    uri = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, t,
                          f"file://{tmp_path / 'sp'}")
    new_cid = import_savepoint(uri, t, open_backend(f"file://{tmp_path / 'run2'}"))
    states = restored_states(tmp_path / "run2", t, new_cid)
    assert [s["counts"] for s in states] == PARTIAL  # nothing lost, nothing overwritten
    assert [s["seen"] for s in states] == [{"x": 0}, {"x": 1}]
    assert read_manifest(uri)["components"]["count"]["state_layout"] == "task"


def test_a_savepoint_of_task_partitioned_state_refuses_another_parallelism(
        tmp_path: Path) -> None:
    cid = checkpoint(tmp_path / "run1", topo(2))
    uri = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, topo(2),
                          f"file://{tmp_path / 'sp'}")
    with pytest.raises(JStormError, match=r"component 'count'.*state 'counts'.*not "
                                          r"partitioned by its fields grouping"):
        import_savepoint(uri, topo(3), open_backend(f"file://{tmp_path / 'run2'}"))


def test_rescale_refuses_task_partitioned_state_instead_of_overwriting_it() -> None:
    snaps = [{"states": {"counts": dict(p)}, "max_parallelism": 128} for p in PARTIAL]
    with pytest.raises(JStormError, match=r"component 'count'.*state 'counts' holds key 'w[01]'"):
        redistribute("count", snaps, 3, 128)
    same = redistribute("count", snaps, 2, 128)  # same parallelism: each task keeps its own
    assert [s["states"]["counts"] for s in same] == PARTIAL
