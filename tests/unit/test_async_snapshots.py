"""Asynchronous snapshots: what the task thread captures, what the snapshot thread does."""

from __future__ import annotations

import pickle

from jstormpy import Bolt
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector
from jstormpy.runtime.snapshots import CHUNK_KEYS, capture, serialise
from tests.fake_task_host import FakeTaskHost

BIG = CHUNK_KEYS * 2 + 7  # several chunks


def test_serialised_snapshot_loads_as_the_plain_snapshot_dict():
    counts = {f"k{i}": i for i in range(BIG)}
    pairs = {i: (i, "x", None) for i in range(BIG)}
    snap = {"states": {"counts": counts, "pairs": pairs, "small": {"a": 1}}, "custom": [1, 2],
            "watermark": 5.0}
    view = capture(snap)
    assert set(view.copies) == {"counts", "pairs"}  # big immutable-valued dicts are copied
    loaded = pickle.loads(serialise(view))
    assert loaded == snap


def test_changes_after_the_barrier_do_not_leak_into_the_snapshot():
    counts = {f"k{i}": i for i in range(BIG)}
    lists = {i: [i] for i in range(BIG)}  # mutable values: pickled at the barrier
    custom = {"pos": 1}
    snap = {"states": {"counts": counts, "lists": lists}, "custom": custom}
    view = capture(snap)
    counts["k0"] = -1
    counts["new"] = 1
    lists[0].append(99)
    custom["pos"] = 2
    loaded = pickle.loads(serialise(view))
    assert loaded["states"]["counts"]["k0"] == 0 and "new" not in loaded["states"]["counts"]
    assert loaded["states"]["lists"][0] == [0]
    assert loaded["custom"] == {"pos": 1}


class Holder(Bolt):
    outputs = ("k",)


def executor(host: FakeTaskHost) -> tuple[TaskExecutor, dict[str, int]]:
    comp = Holder()
    state = comp.state("counts")
    state.update({f"k{i}": i for i in range(BIG)})
    coll = OutputCollector(1, "holder", {"default": []}, [], lambda d, i: None)
    return TaskExecutor(1, "holder", "bolt", comp, coll, host), state  # type: ignore[arg-type]


def test_the_task_thread_does_not_wait_for_the_upload_but_the_ack_does():
    host = FakeTaskHost(blocking=True)
    ex, state = executor(host)
    ex._take_snapshot(3, 1.5, emit_barrier=False)  # returns while the upload is blocked
    state["k1"] = 1000  # processing goes on
    assert host.acks == []
    host.release.set()
    assert host.acked.wait(10)
    ack = host.acks[0]
    assert (ack.checkpoint_id, ack.task_id, ack.finished, ack.alignment_ms) == (3, 1, False, 1.5)
    assert ack.size == len(host.stored[ack.handle])
    restored = pickle.loads(host.stored[ack.handle])["states"]["counts"]
    assert restored["k1"] == 1 and len(restored) == BIG


def test_no_ack_when_the_task_was_stopped_by_a_rollback_meanwhile():
    host = FakeTaskHost(blocking=True)
    ex, _ = executor(host)
    ex._take_snapshot(4, 0.0, emit_barrier=False)
    ex.stop()  # a rollback stops the task while the upload is in flight
    host.release.set()
    assert ex.snapshotter is not None and ex.snapshotter.wait_idle(10)
    assert host.acks == []


def test_type_scan_moves_off_the_task_thread_after_the_first_capture():
    """The first capture scans a state's value types (task thread); later ones copy it
    unscanned and the snapshot thread scans the copy, declining the checkpoint if a
    mutable value turned up (then the task thread scans again, and pickles it)."""
    import pytest

    from jstormpy.api.errors import CheckpointError
    from jstormpy.runtime.snapshots import verify

    counts = {f"k{i}": i for i in range(BIG)}
    verified: set[str] = set()
    first = capture({"states": {"counts": counts}}, verified)
    assert verified == {"counts"} and first.unchecked == []
    second = capture({"states": {"counts": counts}}, verified)
    assert second.unchecked == ["counts"]
    assert pickle.loads(serialise(second))["states"]["counts"] == counts
    counts["k1"] = [1]  # a mutable value now: a copy would share it with the live state
    third = capture({"states": {"counts": counts}}, verified)
    with pytest.raises(CheckpointError, match="'counts' now holds mutable values"):
        verify(third)
    assert verified == set()
    fourth = capture({"states": {"counts": counts}}, verified)
    assert "counts" not in fourth.copies  # pickled at the barrier
    counts["k1"].append(2)
    assert pickle.loads(serialise(fourth))["states"]["counts"]["k1"] == [1]
