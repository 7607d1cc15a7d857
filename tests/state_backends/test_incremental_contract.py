"""Incremental checkpoints over every backend (memory, file, WebHDFS, HBase Thrift test
servers): chains of segments round-trip, restore by key group, a damaged increment is
named, retention deletes exactly the unreferenced segments."""

from __future__ import annotations

import os

import pytest

from jstormpy import Config
from jstormpy.api.errors import CorruptSnapshotError
from jstormpy.keygroups import key_group
from jstormpy.state_backends.changelog import SEGMENT_PREFIX, segment_checkpoint
from jstormpy.testing.incremental import TaskCheckpointer
from tests.state_backends.test_contract import Env, env  # noqa: F401 - the fixture

CONFIG = Config(incremental_checkpoints=True, incremental_compaction_every=3,
                incremental_compaction_ratio=100.0)


def test_chain_round_trips_and_restores_key_groups(env: Env) -> None:  # noqa: F811
    task = TaskCheckpointer(env.backend, CONFIG, task_id=4)
    counts = task.comp.counts
    # values big enough that the base spans several HBase chunks
    counts.update({f"k{i}": (i, os.urandom(8).hex()) for i in range(40_000)})
    base = task.checkpoint(1)
    for cid in (2, 3):
        for i in range(cid, 40_000, 97):
            counts[f"k{i}"] = (-i, "x")
        del counts[f"k{cid * 1000}"]
        delta = task.checkpoint(cid)
        assert delta.kind == "delta" and delta.bytes_written < base.bytes_written / 10
    assert task.restore(3)["states"]["counts"] == dict(counts)
    wanted = range(100, 128)
    assert task.restore(3, wanted)["states"]["counts"] == {
        k: v for k, v in counts.items() if key_group(k, 128) in wanted}


def test_damaged_increment_is_named(env: Env) -> None:  # noqa: F811
    task = TaskCheckpointer(env.backend, CONFIG, task_id=1)
    task.comp.counts.update({i: i for i in range(1000)})
    task.checkpoint(1)
    task.comp.counts[7] = 70
    task.checkpoint(2)
    seg = task.restore(2)["incremental"]["chain"][-1]["key"]
    data = env.backend.get_object(seg)
    env.backend.put_object(seg, data[:-1] + bytes([data[-1] ^ 0x55]))
    with pytest.raises(CorruptSnapshotError, match=rf"checkpoint 2 .*key group "
                                                   rf"{key_group(7, 128)}\b"):
        task.restore(2)
    assert task.restore(1)["states"]["counts"][7] == 7


def test_retention_deletes_only_unreferenced_segments(env: Env) -> None:  # noqa: F811
    task = TaskCheckpointer(env.backend, CONFIG, task_id=2)
    for cid in range(1, 9):  # bases at 1, 5; deltas 2-4, 6-8
        task.comp.counts[cid] = cid
        task.checkpoint(cid)
        env.backend.garbage_collect(keep=2)
    assert env.backend.list_completed() == [7, 8]
    left = sorted(segment_checkpoint(k) or 0 for k in env.backend.list_objects(SEGMENT_PREFIX))
    assert left == [5, 6, 7, 8]
    assert task.restore(7)["states"]["counts"] == {i: i for i in range(1, 8)}
