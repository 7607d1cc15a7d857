"""ShellSpout's host side across rollbacks, driven directly (no cluster) with a real pystorm
reliable spout: what the kept subprocess is told when tasks come and go."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.component import TopologyContext, bind_task
from jstormpy.multilang import ShellSpout

pytestmark = pytest.mark.timeout(60)

KEYS_SPOUT = Path(__file__).parents[2] / "integration" / "multilang_components" / "keys_spout.py"


def context(topology: str) -> TopologyContext:
    """A task's context; the topology name keys the subprocesses a rollback keeps."""
    return TopologyContext(topology=topology, component="keys", task_id=1, task_index=0,
                           worker_id=0, component_tasks={"keys": (1,)})

CONF = {"guarantee": "exactly_once"}


class Emits:
    """The task's collector: what the spout emitted."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def emit(self, values: Any, stream: str = "default") -> None:
        self.values.append(values[0])


def task(acks: Path) -> tuple[ShellSpout, Emits]:
    spout = ShellSpout([sys.executable, str(KEYS_SPOUT), str(acks), "10"],
                       outputs=("seq", "key"))
    emits = Emits()
    bind_task(spout, emits, None)  # type: ignore[arg-type]
    return spout, emits


def test_a_second_rollback_before_the_first_next_still_fails_and_acks_what_is_owed(tmp_path):
    ctx = context("t-twice")
    first, emitted = task(tmp_path)
    first.open(CONF, ctx)
    first.next_tuple()
    first.before_snapshot(1)
    snap = first.snapshot()  # checkpoint 1 covers keys 0 and 1
    first.next_tuple()  # keys 2 and 3: after the checkpoint
    assert emitted.values == [0, 1, 2, 3]
    first.close()  # a rollback to checkpoint 1: the subprocess is kept

    second, _ = task(tmp_path)
    second.restore(snap)
    second.open(CONF, ctx)  # adopted: owed acks of 0, 1 and fails of 2, 3
    second.close()  # rolled back again before its first next_tuple

    third, emitted = task(tmp_path)
    third.restore(snap)
    third.open(CONF, ctx)
    try:
        for _ in range(6):
            third.next_tuple()
        # 0 and 1 are acked with the restored checkpoint, once a newer one completed
        assert acked(tmp_path) == []
        third.before_snapshot(2)
        third.on_checkpoint_complete(2)
    finally:
        third.close()
    assert {2, 3} <= set(emitted.values)  # failed, so re-emitted
    assert 0 not in emitted.values and 1 not in emitted.values
    assert {0, 1} <= set(acked(tmp_path))


def test_a_fresh_subprocess_re_emitting_covered_ids_is_dropped_and_acked(tmp_path):
    ctx = context("t-fresh")
    first, emitted = task(tmp_path)
    first.open(CONF, ctx)
    first.next_tuple()
    first.before_snapshot(1)
    snap = first.snapshot()  # covers 0 and 1, never acked: the worker dies next
    first._proc.close()  # type: ignore[union-attr]  # the subprocess died with its worker
    first.close()

    again, emitted = task(tmp_path)
    again.restore(snap)
    again.open(CONF, ctx)  # a fresh subprocess: it emits 0, 1, 2, ... again
    try:
        for _ in range(3):
            again.next_tuple()
        assert acked(tmp_path) == []  # dropped, acked with the restored checkpoint
        again.before_snapshot(2)
        again.on_checkpoint_complete(2)
    finally:
        again.close()
    assert emitted.values[:2] == [2, 3]  # 0 and 1 were dropped, not emitted twice
    assert {0, 1} <= set(acked(tmp_path))


def acked(folder: Path) -> list[int]:
    """The ids the spout subprocess was acked for (it appends them to a file)."""
    path = folder / "acked-0.txt"
    return sorted(int(x) for x in path.read_text().split()) if path.exists() else []
