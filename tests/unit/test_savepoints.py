"""Savepoints on file:// backends: write, relocate (copy), inspect, import at a new parallelism."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, Spout, TopologyBuilder
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Topology
from jstormpy.keygroups import key_group, key_group_range, task_index_for_key_group
from jstormpy.operations.savepoints import (
    describe,
    import_savepoint,
    read_manifest,
    write_savepoint,
)
from jstormpy.state_backends import open_backend


class Src(Spout):
    outputs = ("word",)


class Count(Bolt):
    state_version = 1


class Count2(Bolt):
    state_version = 2


def topo(parallelism: int, cls: type = Count, extra: bool = False) -> Topology:
    b = TopologyBuilder("wc")
    b.set_spout("src", Src)
    b.set_bolt("count", cls, parallelism=parallelism).fields_grouping("src", ["word"])
    if extra:
        b.set_bolt("audit", Count).shuffle_grouping("src")
    return b.build()


COUNTS = {f"w{i}": i for i in range(1000)}


def completed_checkpoint(root: Path, t: Topology) -> int:
    """A completed checkpoint as the runtime writes it: keyed state at each key's owner."""
    backend = open_backend(f"file://{root}")
    tasks = t.task_ids()
    n = len(tasks["count"])
    per_task: list[dict[str, int]] = [{} for _ in range(n)]
    for k, v in COUNTS.items():
        per_task[task_index_for_key_group(128, n, key_group(k, 128))][k] = v
    entries = {}
    snaps: dict[int, dict[str, Any]] = {tasks["src"][0]: {"states": {}, "custom": 42,
                                                         "max_parallelism": 128}}
    for i, task_id in enumerate(tasks["count"]):
        snaps[task_id] = {"states": {"counts": per_task[i]}, "state_version": 1,
                          "max_parallelism": 128}
    for task_id, snap in snaps.items():
        handle = backend.put_snapshot(7, task_id, pickle.dumps(snap))
        entries[str(task_id)] = {"handle": handle, "size": 1}
    backend.create_metadata(7, {"generation": 1, "tasks": entries})
    return 7


def restored(root: Path, t: Topology, cid: int) -> dict[int, dict[str, Any]]:
    backend = open_backend(f"file://{root}")
    meta = backend.read_metadata(cid)
    return {int(k): pickle.loads(backend.get_snapshot(v["handle"]))
            for k, v in meta["tasks"].items()}


@pytest.mark.parametrize("new_p", [4, 1, 2])
def test_savepoint_is_relocatable_and_restores_at_another_parallelism(tmp_path: Path,
                                                                       new_p: int) -> None:
    t1 = topo(2)
    cid = completed_checkpoint(tmp_path / "run1", t1)
    uri = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, t1,
                          f"file://{tmp_path / 'sp'}")
    shutil.copytree(tmp_path / "sp", tmp_path / "moved")
    shutil.rmtree(tmp_path / "sp")
    moved = f"file://{tmp_path / 'moved'}"
    assert uri.endswith("/sp")
    m = read_manifest(moved)
    assert m["components"]["count"]["parallelism"] == 2
    assert m["components"]["count"]["state_version"] == 1
    assert m["topology"]["name"] == "wc" and m["engine_version"]
    assert "count: parallelism 2, state_version 1" in describe(moved)

    t2 = topo(new_p, Count2)
    new_cid = import_savepoint(moved, t2, open_backend(f"file://{tmp_path / 'run2'}"))
    assert new_cid == cid + 1
    snaps = restored(tmp_path / "run2", t2, new_cid)
    merged: dict[str, int] = {}
    for i, task_id in enumerate(t2.task_ids()["count"]):
        part = snaps[task_id]["states"].get("counts", {})
        assert all(key_group(k, 128) in key_group_range(128, new_p, i) for k in part)
        assert snaps[task_id]["state_version"] == 1  # the worker migrates to 2 on restore
        merged.update(part)
    assert merged == COUNTS
    assert snaps[t2.task_ids()["src"][0]]["custom"] == 42


def test_state_of_a_removed_component_is_refused_unless_allowed(tmp_path: Path) -> None:
    t1 = topo(2, extra=True)
    backend = open_backend(f"file://{tmp_path / 'run1'}")
    tasks = t1.task_ids()
    entries = {}
    for task_id in [t for ts in tasks.values() for t in ts]:
        h = backend.put_snapshot(3, task_id, pickle.dumps({"states": {}, "max_parallelism": 128}))
        entries[str(task_id)] = {"handle": h}
    backend.create_metadata(3, {"tasks": entries})
    sp = write_savepoint(backend, 3, t1, f"file://{tmp_path / 'sp'}")
    with pytest.raises(JStormError, match="'audit'.*--allow-non-restored-state"):
        import_savepoint(sp, topo(2), open_backend(f"file://{tmp_path / 'run2'}"))
    assert import_savepoint(sp, topo(2), open_backend(f"file://{tmp_path / 'run2'}"),
                            allow_non_restored_state=True) == 4


def test_other_max_parallelism_and_missing_savepoint_are_refused(tmp_path: Path) -> None:
    t1 = topo(2)
    cid = completed_checkpoint(tmp_path / "run1", t1)
    sp = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, t1,
                         f"file://{tmp_path / 'sp'}")
    with pytest.raises(JStormError, match="max_parallelism=128 but this run has "
                                          "max_parallelism=64"):
        import_savepoint(sp, t1, open_backend(f"file://{tmp_path / 'r'}"), max_parallelism=64)
    with pytest.raises(JStormError, match="holds no complete savepoint"):
        read_manifest(f"file://{tmp_path / 'nothing'}")


@pytest.mark.slow
def test_savepoint_copies_across_file_hdfs_and_hbase(tmp_path: Path, webhdfs_server: Any,
                                                     hbase_server: Any) -> None:
    from jstormpy.operations.savepoints import copy_savepoint

    t1 = topo(2)
    cid = completed_checkpoint(tmp_path / "run1", t1)
    sp = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, t1,
                         f"file://{tmp_path / 'sp'}")
    on_hdfs = copy_savepoint(sp, f"hdfs://127.0.0.1:{webhdfs_server.port}/sp1")
    on_hbase = copy_savepoint(on_hdfs, f"hbase://127.0.0.1:{hbase_server.port}/sp1")
    back = copy_savepoint(on_hbase, f"file://{tmp_path / 'back'}")
    assert read_manifest(back) == read_manifest(sp)
    t3 = topo(3)
    new_cid = import_savepoint(back, t3, open_backend(f"file://{tmp_path / 'run3'}"))
    snaps = restored(tmp_path / "run3", t3, new_cid)
    merged: dict[str, int] = {}
    for task_id in t3.task_ids()["count"]:
        merged.update(snaps[task_id]["states"].get("counts", {}))
    assert merged == COUNTS


def test_a_savepoint_restore_never_restores_below_the_savepoint(tmp_path: Path) -> None:
    # found by the deterministic simulator (jstorm simulate): the restore dropped the
    # earlier run's completed-checkpoint floor without setting its own, so a listing that
    # missed the imported checkpoint in the restored run's first recovery restored nothing
    # and replayed the input from offset 0 into outputs the savepoint's run had written
    from types import SimpleNamespace

    from jstormpy.operations.savepoints import prepare_restore
    from jstormpy.state_backends.base import COMPLETED_META

    t = topo(2)
    cid = completed_checkpoint(tmp_path / "run1", t)
    sp = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, t,
                         f"file://{tmp_path / 'sp'}")
    target = tmp_path / "run2"
    old = open_backend(f"file://{target}")
    old.put_meta(COMPLETED_META, b"90")  # an earlier run of this backend got further
    config = SimpleNamespace(state_backend=f"file://{target}", state_backend_options={},
                             max_parallelism=128)
    new_cid = prepare_restore(sp, t, config)
    floor = open_backend(f"file://{target}").get_meta(COMPLETED_META)
    assert floor == str(new_cid).encode()  # the restored run's own floor: the savepoint


def test_a_savepoint_that_does_not_fit_changes_nothing_in_the_state_backend(
        tmp_path: Path) -> None:
    """``--from-savepoint`` of a savepoint the topology cannot take (state of a removed
    component) is refused before the state backend's checkpoints, ids record or run
    identity are touched: the run can still be resumed."""
    from types import SimpleNamespace

    from jstormpy.operations.savepoints import prepare_restore
    from jstormpy.run_identity import RunIdentity, load_run_identity, store_run_identity

    t1 = topo(2, extra=True)
    source = open_backend(f"file://{tmp_path / 'run1'}")
    entries = {}
    for task_id in [t for ts in t1.task_ids().values() for t in ts]:
        h = source.put_snapshot(3, task_id, pickle.dumps({"states": {}, "max_parallelism": 128}))
        entries[str(task_id)] = {"handle": h}
    source.create_metadata(3, {"tasks": entries})
    sp = write_savepoint(source, 3, t1, f"file://{tmp_path / 'sp'}")
    target = open_backend(f"file://{tmp_path / 'run2'}")
    target.create_metadata(5, {"tasks": {}})
    running = RunIdentity("running", 2)
    store_run_identity(target, running)
    config = SimpleNamespace(state_backend=f"file://{tmp_path / 'run2'}",
                             state_backend_options={}, max_parallelism=128)
    with pytest.raises(JStormError, match="'audit'.*--allow-non-restored-state"):
        prepare_restore(sp, topo(2), config)
    assert target.list_completed() == [5], "the refused restore deleted the checkpoints"
    assert load_run_identity(target) == running


def test_a_half_written_pin_hides_no_other_pin_from_retention(tmp_path: Path) -> None:
    """A savepoint pins the checkpoint it copies. A pin left half-written by a process
    that died (unreadable) is skipped, and every other live pin still keeps its
    checkpoint out of retention."""
    from jstormpy.state_backends.base import PINS_PREFIX

    backend = open_backend(f"memory://{tmp_path}")  # lists in the order written
    for cid in (1, 2, 3):
        handle = backend.put_snapshot(cid, 1, b"s", generation=1)
        backend.create_metadata(cid, {"tasks": {"1": {"handle": handle}}})
    backend.put_object(f"{PINS_PREFIX}0000000001-dead", b"\x00half")  # listed first
    backend.pin_checkpoint(2)
    assert backend.pinned_checkpoints() == {2}
    backend.garbage_collect(keep=1)
    assert backend.list_completed() == [2, 3]


def test_an_expired_pin_keeps_nothing_from_retention(tmp_path: Path) -> None:
    """A pin whose time ran out (its savepoint's process died without unpinning) is
    deleted at the next read of the pins and keeps its checkpoint no longer: retention
    deletes it like any older checkpoint."""
    from jstormpy.state_backends.base import PINS_PREFIX

    backend = open_backend(f"file://{tmp_path}")
    for cid in (1, 2, 3):
        handle = backend.put_snapshot(cid, 1, b"s", generation=1)
        backend.create_metadata(cid, {"tasks": {"1": {"handle": handle}}})
    backend.pin_checkpoint(2, ttl_s=-1.0)
    assert backend.pinned_checkpoints() == set()
    assert backend.list_objects(PINS_PREFIX) == []
    backend.garbage_collect(keep=1)
    assert backend.list_completed() == [3]


def test_a_savepoint_with_stop_copies_the_last_completed_checkpoint(tmp_path: Path) -> None:
    """``jstorm savepoint --stop``: the topology is stopped after the forced checkpoint,
    and the savepoint is the newest checkpoint completed by then, not an older one the
    backend still retains."""
    import json

    import cloudpickle

    from jstormpy import Config
    from jstormpy.operations.savepoints import savepoint_run

    t1 = topo(2)
    cid = completed_checkpoint(tmp_path / "state", t1)
    backend = open_backend(f"file://{tmp_path / 'state'}")
    backend.create_metadata(cid - 2, {k: v for k, v in backend.read_metadata(cid).items()
                                      if k != "checkpoint_id"})
    assert backend.list_completed() == [cid - 2, cid]
    run = tmp_path / "run"
    run.mkdir()
    (run / "topology.pkl").write_bytes(cloudpickle.dumps(t1))
    config = Config(state_backend=f"file://{tmp_path / 'state'}")
    (run / "config.json").write_text(json.dumps(config.to_dict()))
    stopped: list[bool] = []
    uri = savepoint_run(run, lambda: cid, None, tmp_path / "home",
                        stop=lambda: stopped.append(True))
    assert stopped == [True]
    assert read_manifest(uri)["checkpoint_id"] == cid


def test_a_copied_savepoint_restores_like_the_original(tmp_path: Path) -> None:
    """``jstorm savepoint copy`` between two file:// places (the fast sibling of the
    hdfs/hbase test): the copy has the same manifest and restores the same state."""
    from jstormpy.operations.savepoints import copy_savepoint

    t1 = topo(2)
    cid = completed_checkpoint(tmp_path / "run1", t1)
    sp = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), cid, t1,
                         f"file://{tmp_path / 'sp'}")
    copy = copy_savepoint(sp, f"file://{tmp_path / 'copy'}")
    assert read_manifest(copy) == read_manifest(sp)
    t3 = topo(3)
    new_cid = import_savepoint(copy, t3, open_backend(f"file://{tmp_path / 'run3'}"))
    snaps = restored(tmp_path / "run3", t3, new_cid)
    merged: dict[str, int] = {}
    for task_id in t3.task_ids()["count"]:
        merged.update(snaps[task_id]["states"].get("counts", {}))
    assert merged == COUNTS


def test_a_savepoint_of_a_running_topology_copies_its_forced_checkpoint(
        tmp_path: Path) -> None:
    """``handle.savepoint()`` / ``jstorm savepoint``: the run directory's topology and
    config name the state backend; the checkpoint the force returned is written out."""
    import json

    import cloudpickle

    from jstormpy import Config
    from jstormpy.operations.savepoints import savepoint_run

    t1 = topo(2)
    cid = completed_checkpoint(tmp_path / "state", t1)
    run = tmp_path / "run"
    run.mkdir()
    (run / "topology.pkl").write_bytes(cloudpickle.dumps(t1))
    config = Config(state_backend=f"file://{tmp_path / 'state'}")
    (run / "config.json").write_text(json.dumps(config.to_dict()))
    uri = savepoint_run(run, lambda: cid, None, tmp_path / "home")
    assert uri.startswith(f"file://{tmp_path / 'home'}/savepoints/wc/sp-000007-")
    assert read_manifest(uri)["checkpoint_id"] == cid
