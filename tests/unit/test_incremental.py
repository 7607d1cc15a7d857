"""Incremental checkpoints: dirty tracking, base/delta chains, compaction, restore by key
group, a damaged increment, and retention by reference (jstormpy/runtime/incremental.py,
state_backends/changelog.py)."""

from __future__ import annotations

import json
import pickle
import random
import uuid
from typing import Any

import pytest

from jstormpy import Config
from jstormpy.api.errors import BackendError, CheckpointError, CorruptSnapshotError
from jstormpy.keygroups import key_group
from jstormpy.runtime.incremental import TrackedState
from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.state_backends.base import open_blob
from jstormpy.state_backends.changelog import (
    SEGMENT_PREFIX,
    load_task_snapshot,
    restore_key_groups,
)
from jstormpy.testing.incremental import KeyedCounter, TaskCheckpointer

MAX_P = 128


def _config(**kw: Any) -> Config:
    return Config(incremental_checkpoints=True, **kw)


@pytest.fixture
def backend() -> StateBackend:
    return open_backend(f"memory://inc-{uuid.uuid4().hex}")


def test_tracked_state_records_every_kind_of_write() -> None:
    from jstormpy.runtime.incremental import DELETED

    d = TrackedState({"a": 1, "b": 2, "c": 3})
    assert d.dirty == {}
    d["x"] = 1
    del d["a"]
    d.pop("b")
    d.pop("absent", None)  # nothing was there: nothing changed
    d.setdefault("y", 5)
    d.setdefault("x", 9)  # present: not a write
    d.update({"z": 1}, w=2)
    d |= {"v": 3}
    d["x"] = 4  # the last write counts
    assert d.dirty == {"x": 4, "a": DELETED, "b": DELETED, "y": 5, "z": 1, "w": 2, "v": 3}
    d.dirty = {}
    d.clear()
    assert d.dirty == dict.fromkeys(["c", "x", "y", "z", "w", "v"], DELETED)
    assert pickle.loads(pickle.dumps(TrackedState({"k": 1}))).__class__ is dict


def test_delta_holds_only_changes_and_restore_equals_state(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config())
    counts = task.comp.counts
    assert isinstance(counts, TrackedState)
    counts.update({f"k{i}": i for i in range(5000)})
    base_bytes = task.checkpoint(1).bytes_written
    counts["k1"] = -1
    del counts["k2"]
    counts["new"] = 7
    r2 = task.checkpoint(2)
    h2, delta_bytes = r2.handle, r2.bytes_written
    assert r2.kind == "delta"
    assert delta_bytes < base_bytes / 20, (delta_bytes, base_bytes)
    snap = load_task_snapshot(backend, h2)
    assert snap["states"]["counts"] == dict(counts)
    assert [s["kind"] for s in snap["incremental"]["chain"]] == ["base", "delta"]


def test_compaction_after_n_increments_and_by_ratio(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config(incremental_compaction_every=3,
                                    incremental_compaction_ratio=100.0))
    counts = task.comp.counts
    kinds = []
    for cid in range(1, 9):
        counts[f"k{cid}"] = cid
        handle = task.checkpoint(cid).handle
        kinds.append(load_task_snapshot(backend, handle)["incremental"]["chain"][-1]["kind"])
    assert kinds == ["base", "delta", "delta", "delta", "base", "delta", "delta", "delta"]
    ratio = TaskCheckpointer(open_backend(f"memory://inc-{uuid.uuid4().hex}"),
                    _config(incremental_compaction_every=100,
                            incremental_compaction_ratio=0.5))
    ratio.comp.counts.update({i: i for i in range(100)})
    h = ratio.checkpoint(1).handle
    ratio.comp.counts.update({i: -i for i in range(100)})  # rewrites everything
    ratio.checkpoint(2)  # a delta as large as the base ...
    h = ratio.checkpoint(3).handle  # ... so the next one compacts
    assert [s["kind"] for s in load_task_snapshot(ratio.backend, h)["incremental"]["chain"]] \
        == ["base"]


def test_restore_continues_the_chain(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config())
    task.comp.counts.update({i: i for i in range(1000)})
    task.checkpoint(1)
    task.comp.counts[5] = 50
    h2 = task.checkpoint(2).handle
    again = TaskCheckpointer(backend, _config(), restored=load_task_snapshot(backend, h2),
                    generation=1)
    assert dict(again.comp.counts) == dict(task.comp.counts)
    assert again.comp.counts.dirty == {}
    again.comp.counts[6] = 60
    h3 = again.checkpoint(3).handle
    chain = load_task_snapshot(backend, h3)["incremental"]["chain"]
    assert [s["kind"] for s in chain] == ["base", "delta", "delta"]
    assert load_task_snapshot(backend, h3)["states"]["counts"][6] == 60


def test_restore_a_range_of_key_groups(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config())
    task.comp.counts.update({f"w{i}": i for i in range(3000)})
    task.checkpoint(1)
    for i in range(0, 3000, 7):
        task.comp.counts[f"w{i}"] = -i
    handle = task.checkpoint(2).handle
    wanted = range(32, 64)
    snap = load_task_snapshot(backend, handle, groups=wanted)
    expect = {k: v for k, v in task.comp.counts.items() if key_group(k, MAX_P) in wanted}
    assert snap["states"]["counts"] == expect
    chain = snap["incremental"]["chain"]
    assert restore_key_groups(backend, chain, range(0, 32), MAX_P)["counts"] == {
        k: v for k, v in task.comp.counts.items() if key_group(k, MAX_P) < 32}


def test_random_writes_and_deletes_of_mixed_keys_restore_exactly(backend: StateBackend) -> None:
    """Puts, deletes, re-puts and clears of str/int/tuple/bytes keys over many deltas:
    every checkpoint restores to the live state, whole and by key-group range."""
    rng = random.Random(15)
    task = TaskCheckpointer(backend, _config(incremental_compaction_every=50,
                                             incremental_compaction_ratio=100.0))
    counts = task.comp.counts
    universe: list[Any] = ([f"w{i}" for i in range(300)] + list(range(300))
                           + [("t", i) for i in range(50)] + [b"b%d" % i for i in range(50)])
    for cid in range(1, 13):
        for _ in range(rng.randrange(0, 400)):
            key = rng.choice(universe)
            op = rng.random()
            if op < 0.6:
                counts[key] = rng.randrange(1000)
            elif op < 0.8:
                counts.pop(key, None)
            elif op < 0.9 and key in counts:
                del counts[key]
            else:
                counts.setdefault(key, -1)
        if cid == 7:
            counts.clear()
            counts.update({k: 1 for k in universe[::3]})
        handle = task.checkpoint(cid).handle
        assert load_task_snapshot(backend, handle)["states"]["counts"] == dict(counts), cid
        lo = rng.randrange(MAX_P)
        part = load_task_snapshot(backend, handle, groups=range(lo, MAX_P))
        assert part["states"]["counts"] == {
            k: v for k, v in counts.items() if key_group(k, MAX_P) >= lo}, cid
    kinds = [s["kind"] for s in load_task_snapshot(backend, handle)["incremental"]["chain"]]
    assert kinds == ["base"] + ["delta"] * 11


def test_a_version_1_delta_is_still_read(backend: StateBackend,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments written before deltas held their puts as (keys, values) lists (version 1:
    a {key: value} dict) restore as before."""
    from jstormpy.state_backends import changelog

    task = TaskCheckpointer(backend, _config())
    task.comp.counts.update({f"w{i}": i for i in range(500)})
    task.checkpoint(1)
    for i in range(0, 500, 3):
        task.comp.counts[f"w{i}"] = -i
    del task.comp.counts["w1"]
    handle = task.checkpoint(2).handle
    seg = load_task_snapshot(backend, handle)["incremental"]["chain"][-1]
    header, sections = changelog.decode_segment(backend.get_segment(seg["key"]), "delta")
    v1 = [(g, pickle.dumps({name: (dict(zip(*puts, strict=True)), dels)
                            for name, (puts, dels) in payload.items()}))
          for g, payload in sections]
    monkeypatch.setattr(changelog, "_VERSION", 1)
    data = changelog.encode_segment("delta", {k: v for k, v in header.items()
                                              if k not in ("kind", "sections")}, v1)
    assert data[4] == 1
    backend.put_object(seg["key"], data)
    assert load_task_snapshot(backend, handle)["states"]["counts"] == dict(task.comp.counts)


def test_a_damaged_increment_names_checkpoint_and_key_group(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config())
    task.comp.counts.update({i: i for i in range(100)})
    task.checkpoint(1)
    task.comp.counts[42] = 4200
    handle = task.checkpoint(2).handle
    seg = load_task_snapshot(backend, handle)["incremental"]["chain"][-1]["key"]
    data = bytearray(backend.get_object(seg))
    data[-3] ^= 0xFF  # the last section: key group of key 42 (the only one)
    backend.put_object(seg, bytes(data))
    with pytest.raises(CorruptSnapshotError) as err:
        load_task_snapshot(backend, handle)
    msg = str(err.value)
    assert "checkpoint 2" in msg and f"key group {key_group(42, MAX_P)}" in msg
    assert handle in msg
    # the checkpoint before the damaged increment still restores
    prev = backend.read_metadata(1)["tasks"]["0"]["handle"]
    assert load_task_snapshot(backend, prev)["states"]["counts"][42] == 42


def test_a_failed_upload_is_carried_into_the_next_checkpoint(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config())
    task.comp.counts.update({i: i for i in range(100)})
    task.checkpoint(1)
    task.comp.counts[1] = 10
    real_put = backend.put_object

    def failing(key: str, data: bytes) -> None:
        raise BackendError("disk full")

    backend.put_object = failing  # type: ignore[method-assign]
    with pytest.raises(BackendError):
        task.checkpoint(2)
    backend.put_object = real_put  # type: ignore[method-assign]
    task.comp.counts[2] = 20
    handle = task.checkpoint(3).handle
    assert load_task_snapshot(backend, handle)["states"]["counts"] == dict(task.comp.counts)


def test_mutable_values_make_the_state_whole(backend: StateBackend) -> None:
    """A delta's values are type-checked on the snapshot thread: a mutable one declines
    that checkpoint (the task may change it in place after the barrier), the state is
    written whole from the next checkpoint on, and the other states' changes of the
    declined checkpoint are carried into the next segment."""
    task = TaskCheckpointer(backend, _config(incremental_compaction_ratio=100.0))
    other = task.comp.state("other")
    task.comp.counts["a"] = 1
    task.checkpoint(1)
    task.comp.counts["lst"] = [1]
    other["b"] = 2
    with pytest.raises(CheckpointError, match=r"\['counts'\] now hold mutable values"):
        task.checkpoint(2)
    task.comp.counts["lst"].append(2)  # in place: only a whole snapshot sees it
    handle = task.checkpoint(3).handle
    snap = load_task_snapshot(backend, handle)
    assert snap["states"]["counts"] == {"a": 1, "lst": [1, 2]}
    assert snap["states"]["other"] == {"b": 2}
    assert task.comp.counts.dirty == {}  # a state written whole records nothing
    # a base copies the values: they are checked at the barrier, nothing is declined
    fresh = TaskCheckpointer(open_backend(f"memory://inc-{uuid.uuid4().hex}"), _config())
    fresh.comp.counts["l"] = [1]
    fresh.checkpoint(1)
    fresh.comp.counts["l"].append(2)
    handle = fresh.checkpoint(2).handle
    assert load_task_snapshot(fresh.backend, handle)["states"]["counts"] == {"l": [1, 2]}


def test_tuple_values_are_checked_item_by_item(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config(incremental_compaction_ratio=100.0))
    task.comp.counts["a"] = (1, "x")
    task.checkpoint(1)
    task.comp.counts["b"] = (2, "y", None)
    assert task.checkpoint(2).kind == "delta"  # tuples of immutable values: as usual
    task.comp.counts["c"] = (3, [4])
    with pytest.raises(CheckpointError, match="mutable values"):
        task.checkpoint(3)
    task.comp.counts["c"][1].append(5)
    handle = task.checkpoint(4).handle
    assert load_task_snapshot(backend, handle)["states"]["counts"] == {
        "a": (1, "x"), "b": (2, "y", None), "c": (3, [4, 5])}


def test_retention_keeps_segments_retained_checkpoints_reference(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config(incremental_compaction_every=2,
                                    incremental_compaction_ratio=100.0))
    for cid in range(1, 8):
        task.comp.counts[cid] = cid
        task.checkpoint(cid)
        backend.garbage_collect(keep=2)
        for kept in backend.list_completed():
            handle = backend.read_metadata(kept)["tasks"]["0"]["handle"]
            assert load_task_snapshot(backend, handle)["states"]["counts"] == {
                i: i for i in range(1, kept + 1)}
    assert backend.list_completed() == [6, 7]
    # 1 base, 2-3 deltas, 4 base, 5-6 deltas, 7 base: checkpoint 6 needs 4, 5, 6 and
    # checkpoint 7 needs 7; segments 1..3 are gone
    segs = sorted(k.rsplit("/", 1)[1] for k in backend.list_objects(SEGMENT_PREFIX))
    assert [s[4:14] for s in segs] == [f"{c:010d}" for c in (4, 5, 6, 7)]


def test_retention_keeps_in_flight_segments(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config())
    task.comp.counts[1] = 1
    task.checkpoint(1)
    # checkpoint 2's segment is written but its metadata is not (still in flight)
    snap = {"states": task.comp.__dict__["_jstorm_states"]}
    task.comp.counts[2] = 2
    assert task.inc is not None
    task.inc.write(backend, task.inc.capture(snap), 2, 0)
    backend.garbage_collect(keep=1)
    assert len(backend.list_objects(SEGMENT_PREFIX)) == 2


def test_a_savepoint_of_an_incremental_checkpoint_is_self_contained(tmp_path: Any) -> None:
    from jstormpy import Spout, TopologyBuilder
    from jstormpy.operations.savepoints import import_savepoint, old_task_snapshots, write_savepoint

    class Src(Spout):
        outputs = ("word",)

    def topology(n: int) -> Any:
        b = TopologyBuilder("wc")
        b.set_spout("src", Src)
        b.set_bolt("count", KeyedCounter, parallelism=n).fields_grouping("src", ["word"])
        return b.build()

    t = topology(1)
    tasks = t.task_ids()
    source = open_backend(f"file://{tmp_path}/ckpt")
    task = TaskCheckpointer(source, _config(), task_id=tasks["count"][0])
    task.comp.counts.update({f"w{i}": i for i in range(2000)})
    task.checkpoint(1)
    task.comp.counts["w1"] = 100
    del task.comp.counts["w2"]
    handle = task.checkpoint(2, commit=False).handle  # committed below, with the spout
    src = source.put_snapshot(2, tasks["src"][0], pickle.dumps({"states": {}, "custom": 5}))
    source.create_metadata(2, {"tasks": {str(tasks["count"][0]): {"handle": handle},
                                        str(tasks["src"][0]): {"handle": src}}})
    uri = write_savepoint(source, 2, t, f"file://{tmp_path}/sp")
    saved = open_backend(uri)
    assert not saved.list_objects(SEGMENT_PREFIX)
    manifest = json.loads(open_blob(saved.get_object("savepoint.json"), "manifest"))
    old = old_task_snapshots(saved, manifest, "count")
    assert "incremental" not in old[0]
    assert old[0]["states"]["counts"] == dict(task.comp.counts)
    # the checkpoint's segments can go: the savepoint does not need them
    source.delete_objects(SEGMENT_PREFIX)
    target = open_backend(f"file://{tmp_path}/new")
    cid = import_savepoint(uri, topology(2), target)
    restored: dict[str, Any] = {}
    for entry in target.read_metadata(cid)["tasks"].values():
        restored.update(load_task_snapshot(target, entry["handle"])["states"].get("counts", {}))
    assert restored == dict(task.comp.counts)


def test_batch_key_groups_agree_with_key_hash() -> None:
    from jstormpy.keygroups import key_hash
    from jstormpy.state_backends.changelog import key_groups_of

    keys: list[Any] = [f"w{i}" for i in range(500)] + ["", "é", "\ud800", 1, 1.0, True,
                                                        2.5, None, b"x", (1, "a")]
    for max_p in (128, 1000, 32768):
        assert key_groups_of(keys, max_p) == [key_hash(k) % max_p for k in keys]


def test_a_pinned_checkpoint_and_its_segments_survive_retention(backend: StateBackend) -> None:
    task = TaskCheckpointer(backend, _config(incremental_compaction_every=2,
                                             incremental_compaction_ratio=100.0))
    task.comp.counts[0] = 0
    task.checkpoint(1)
    pin = backend.pin_checkpoint(1)
    for cid in range(2, 6):
        task.comp.counts[cid] = cid
        task.checkpoint(cid)
        backend.garbage_collect(keep=1)
    assert backend.list_completed() == [1, 5]
    assert task.restore(1)["states"]["counts"] == {0: 0}
    backend.unpin(pin)
    backend.garbage_collect(keep=1)
    assert backend.list_completed() == [5]
    expired = backend.pin_checkpoint(5, ttl_s=-1)
    assert backend.pinned_checkpoints() == set()
    assert expired not in backend.list_objects("meta/pins/")


def test_a_missing_segment_is_both_corrupt_and_not_found(backend: StateBackend) -> None:
    from jstormpy.api.errors import MissingSegmentError, SnapshotNotFoundError

    task = TaskCheckpointer(backend, _config())
    task.comp.counts[1] = 1
    task.checkpoint(1)
    backend.delete_objects(SEGMENT_PREFIX)
    with pytest.raises(MissingSegmentError) as err:
        task.restore(1)
    assert isinstance(err.value, CorruptSnapshotError)  # recovery falls back
    assert isinstance(err.value, SnapshotNotFoundError)  # a savepoint copy retries
    assert "base of checkpoint 1" in str(err.value) and "missing" in str(err.value)


def test_a_task_owning_other_key_groups_starts_a_new_base(backend: StateBackend) -> None:
    """After a rescale a task may be handed a snapshot whose chain covers other key groups:
    it must not continue that chain."""
    task = TaskCheckpointer(backend, _config(), key_groups=range(0, 64))
    task.comp.counts.update({i: i for i in range(50)})
    task.checkpoint(1)
    restored = task.restore(1)
    same = TaskCheckpointer(backend, _config(), key_groups=range(0, 64), restored=restored)
    assert same.inc is not None and not same.inc.need_base
    moved = TaskCheckpointer(backend, _config(), key_groups=range(0, 32),
                             restored=task.restore(1))
    assert moved.inc is not None and moved.inc.need_base
    assert moved.checkpoint(2).kind == "base"


@pytest.mark.slow
def test_incremental_bench_runs_small() -> None:
    """bench/incremental_bench.py works at a small size (the lead runs it at 10M keys)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "bench" / "incremental_bench.py"
    done = subprocess.run([sys.executable, str(script), "--keys", "4000", "--intervals", "2",
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON "))
    figures = json.loads(line[len("BENCH_JSON "):])
    assert figures["keys"] == 4000
    assert figures["incremental_bytes"] < figures["full_bytes"] / 5, figures


def test_segment_keys_are_fenced_by_the_writer_attempt() -> None:
    from jstormpy.state_backends.changelog import segment_checkpoint, segment_key

    live = segment_key(7, 42, 3, "delta", "123-ab")
    zombie = segment_key(7, 42, 3, "delta", "99-cd")
    assert live != zombie and live.startswith(SEGMENT_PREFIX + "task-00007/")
    assert segment_checkpoint(live) == segment_checkpoint(zombie) == 42
    assert segment_checkpoint("inc/task-00007/not-a-segment") is None
