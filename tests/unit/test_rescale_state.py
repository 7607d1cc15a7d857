"""Rescaling a checkpoint (jstormpy/operations/rescale_state.py), the split contract's hook, the
FileSpout keeping only the files it owns, the CLI's COMPONENT=N parsing, and a Topology
Master adopting (or dropping) a pending rescale at start-up."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, FileSink, FileSpout, Spout, TopologyBuilder
from jstormpy.api.component import TopologyContext
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Topology
from jstormpy.cli.rescale import parse_changes
from jstormpy.keygroups import key_group, key_group_range
from jstormpy.operations.rescale_state import job_max_parallelism, plan_rescale, rescale_checkpoint
from jstormpy.state_backends import open_backend
from master.rescale import PENDING, finish_pending_rescale


class Src(Spout):
    outputs = ("word",)
    redistribute_state = Spout.redistribute_splits

    def snapshot(self) -> dict[str, Any]:
        return {"offsets": {}}

    def restore(self, snap: dict[str, Any]) -> None:
        pass


class Count(Bolt):
    outputs = ("word", "n")


class Tally(Bolt):
    """Non-keyed state without a hook: cannot be rescaled."""

    def snapshot(self) -> int:
        return 0

    def restore(self, snap: int) -> None:
        pass


class Summed(Tally):
    """Non-keyed state with a hook: old totals summed into new task 0."""

    @staticmethod
    def redistribute_state(old: list[Any], n: int) -> list[Any]:
        return [sum(old)] + [0] * (n - 1)


def topo(count: int = 2, splits: int = 1, custom: type = Summed) -> Topology:
    b = TopologyBuilder("wc")
    b.set_spout("src", Src, parallelism=splits)
    b.set_bolt("count", Count, parallelism=count).fields_grouping("src", ["word"])
    b.set_bolt("tally", custom, parallelism=2).shuffle_grouping("count")
    b.set_bolt("sink", FileSink("/tmp/unused"), parallelism=1).global_grouping("count")
    return b.build()


def test_plan_rescale_applies_changes_and_refuses_naming_the_component() -> None:
    new = plan_rescale(topo(), {"count": 4, "tally": 3}, 128)
    assert new.task_ids() == {"src": (1,), "count": (2, 3, 4, 5), "tally": (6, 7, 8),
                              "sink": (9,)}
    assert topo().components["count"].parallelism == 2  # the running one is untouched
    with pytest.raises(JStormError, match=r"'tally' \(Tally\) keeps non-keyed state"):
        plan_rescale(topo(custom=Tally), {"tally": 3}, 128)
    assert plan_rescale(topo(), {"sink": 2}, 128).task_ids()["sink"] == (6, 7)  # sinks too
    with pytest.raises(JStormError, match="'count': parallelism 9 exceeds the job's "
                                          "max_parallelism 8"):
        plan_rescale(topo(), {"count": 9}, 8)
    with pytest.raises(JStormError, match="no component 'counts'"):
        plan_rescale(topo(), {"counts": 2}, 128)
    with pytest.raises(JStormError, match="int >= 1, got 0"):
        plan_rescale(topo(), {"count": 0}, 128)
    assert plan_rescale(topo(custom=Tally), {"tally": 2}, 128).task_ids()["tally"] == (4, 5)


def test_job_max_parallelism_is_the_configured_or_flink_default() -> None:
    assert job_max_parallelism(topo(), 0) == 128
    assert job_max_parallelism(topo(), 16) == 16


def _write_checkpoint(backend: Any, old: Topology, words: list[str], max_p: int) -> None:
    tasks: dict[str, Any] = {}
    ids = old.task_ids()
    for name, task_ids in ids.items():
        n = len(task_ids)
        for index, task_id in enumerate(task_ids):
            snap: dict[str, Any] = {"max_parallelism": max_p, "states": {},
                                    "eos_channels": [1], "channel_wm": {1: 5.0},
                                    "sink_pending": [3], "finished": True}
            if name == "count":
                owned = key_group_range(max_p, n, index)
                snap["states"] = {"counts": {w: len(w) for w in words
                                             if key_group(w, max_p) in owned}}
            if name == "tally":
                snap["custom"] = 10 + index
            if name == "src":
                snap["custom"] = {"offsets": {f"part-{index}": 100 + index}}
            handle = backend.put_snapshot(3, task_id, pickle.dumps(snap))
            tasks[str(task_id)] = {"handle": handle, "size": 1}
    backend.create_metadata(3, {"generation": 1, "tasks": tasks})


def test_rescale_checkpoint_moves_key_groups_hooks_and_resets_channels(tmp_path: Path) -> None:
    backend = open_backend(f"file://{tmp_path}")
    words = [f"w{i}" for i in range(300)]
    old = topo(count=2, splits=2)
    _write_checkpoint(backend, old, words, 16)
    new = plan_rescale(old, {"count": 3, "tally": 1, "src": 3}, 16)
    meta = rescale_checkpoint(backend, 3, old, new, 16, 4)
    assert meta["rescaled_from"] == 3 and meta["parallelism"]["count"] == 3
    snaps = {int(t): pickle.loads(backend.get_snapshot(e["handle"]))
             for t, e in meta["tasks"].items()}
    ids = new.task_ids()
    seen: dict[str, int] = {}
    for index, task_id in enumerate(ids["count"]):
        counts = snaps[task_id]["states"]["counts"]
        assert all(key_group(w, 16) in key_group_range(16, 3, index) for w in counts)
        seen.update(counts)
    assert seen == {w: len(w) for w in words}  # every key once, value kept
    assert [snaps[t]["custom"] for t in ids["tally"]] == [21]
    assert [snaps[t]["custom"] for t in ids["src"]] == \
        [{"offsets": {"part-0": 100, "part-1": 101}}] * 3
    for task_id, snap in snaps.items():
        if task_id in ids["src"]:
            assert snap["finished"] is False and snap["eos_sent"] is False
        else:  # input channel ids shifted with the layout: progress by channel is reset
            assert snap["eos_channels"] == [] and snap["channel_wm"] == {}
            assert snap["sink_pending"] == []


class Broken(Tally):
    """A hook that fails on the state it is given."""

    @staticmethod
    def redistribute_state(old: list[Any], n: int) -> list[Any]:
        raise KeyError("totals")


def test_a_failing_redistribute_hook_refuses_the_rescale_naming_the_component(
        tmp_path: Path) -> None:
    """A component's own ``redistribute_state`` that raises refuses the rescale with a
    ``JStormError`` naming the component and what the hook raised (the rescale aborts and
    the old layout runs on), not with the hook's bare exception."""
    backend = open_backend(f"file://{tmp_path}")
    old = topo(custom=Broken)
    _write_checkpoint(backend, old, ["w1", "w2"], 16)
    new = plan_rescale(old, {"tally": 1}, 16)
    with pytest.raises(JStormError, match="tally.redistribute_state failed: KeyError"):
        rescale_checkpoint(backend, 3, old, new, 16, 4)


def test_spout_split_contract_hook_and_file_spout_keep_their_own_files(tmp_path: Path) -> None:
    merged = Spout.redistribute_splits([{"offsets": {"a": 1}}, {"offsets": {"b": 2}}, None], 2)
    assert merged == [{"offsets": {"a": 1, "b": 2}}] * 2
    files = []
    for i in range(3):
        path = tmp_path / f"f{i}.txt"
        path.write_text("x\ny\n")
        files.append(str(path))
    spout = FileSpout(str(tmp_path / "*.txt"))
    assert FileSpout.redistribute_state is Spout.redistribute_splits
    spout.restore(merged[0] | {"offsets": {files[0]: 4, files[1]: 2, files[2]: 0}})
    spout.open({}, TopologyContext(topology="t", component="c", task_id=1, task_index=1,
                                   worker_id=0, component_tasks={"c": (0, 1)}))
    assert spout.snapshot()["offsets"] == {files[1]: 2}


def test_parse_changes() -> None:
    assert parse_changes(["count=4", "split=1"]) == {"count": 4, "split": 1}
    for bad in (["count"], ["count=0"], ["=3"], ["count=x"]):
        with pytest.raises(JStormError, match="COMPONENT=PARALLELISM"):
            parse_changes(bad)


@pytest.mark.parametrize("committed", [True, False])
def test_master_start_adopts_only_a_committed_rescale(tmp_path: Path, committed: bool) -> None:
    run = tmp_path / "run"
    run.mkdir()
    backend = open_backend(f"file://{tmp_path / 'ckpt'}")
    (run / "topology.pkl").write_bytes(b"old")
    (run / "topology.pkl.rescale").write_bytes(b"new")
    (run / PENDING).write_text(json.dumps({"checkpoint": 7, "layout_generation": 3}))
    if committed:
        backend.create_metadata(7, {"generation": 2, "tasks": {}})
    assert finish_pending_rescale(run, backend) is committed
    assert (run / "topology.pkl").read_bytes() == (b"new" if committed else b"old")
    assert not (run / PENDING).exists() and not (run / "topology.pkl.rescale").exists()
    assert (run / "rescale.json").exists() is committed


def test_a_dropped_rescale_whose_commit_point_lands_late_is_never_restored(
        tmp_path: Path) -> None:
    """Simulator seed 12604 (issue 37): a deposed TM's rescale commit point was still being
    written when its successor started and dropped the staged layout; the write landed
    after, and the next recovery restored the new layout's checkpoint into the old layout
    (state split over tasks that no longer own it). Dropping the rescale stores its
    checkpoint as bad first, so a resumed TM never restores it."""
    from jstormpy.master.coordinator import CheckpointCoordinator
    from jstormpy.master.restore_plan import LATEST, ReadMetadata, RestorePlan
    from jstormpy.state_backends.base import CHECKPOINT_IDS_META

    run = tmp_path / "run"
    run.mkdir()
    backend = open_backend(f"file://{tmp_path / 'ckpt'}")
    backend.create_metadata(5, {"generation": 2, "tasks": {}})
    (run / "topology.pkl.rescale").write_bytes(b"new")
    (run / PENDING).write_text(json.dumps({"checkpoint": 7, "layout_generation": 3}))
    assert finish_pending_rescale(run, backend) is False
    backend.create_metadata(7, {"generation": 2, "tasks": {}})  # the late write lands

    ids = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                tolerable_timeouts=0)
    record = backend.get_meta(CHECKPOINT_IDS_META)
    assert record is not None, "no ids record stored: the late commit point is restorable"
    ids.adopt_ids_record(record)
    plan = RestorePlan(3, LATEST, stateful=True, persisted_generation=3,
                       completed_floor=5, bad=ids.bad)
    assert plan.listed(backend.list_completed()) == [ReadMetadata(5)]
