"""WindowedBolt with its task's state store as the engine installs it: with RocksDB the
open windows live in the store's column family (not in the bolt's snapshot), and a
checkpoint/restore anywhere gives the firings of an uninterrupted run — the same as with
the memory store."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from jstormpy import state_store
from jstormpy.api.component import (
    bind_task,
    managed_states,
    restore_managed_states,
    use_state_store,
)
from jstormpy.state_store import RocksDBStore, open_store
from jstormpy.window import CountWindows, SessionWindows, stored
from jstormpy.window.stored import WINDOW_STATE

from .helpers import ListCollector, context
from .test_bolt import EarlyCount, _run, _script

MAX_P = 128


def start(bolt: Any, store: Any, col: ListCollector, snap: dict[str, Any] | None) -> None:
    """What the worker does for a task: restore managed states and the snapshot, give it
    its store (restored states move in), then prepare."""
    bind_task(bolt, col, None)
    if snap is not None:
        restore_managed_states(bolt, snap["states"])
        bolt.restore(snap["custom"])
    use_state_store(bolt, store)
    store.adopt(managed_states(bolt))
    bolt.prepare({}, context())


def checkpoint(bolt: Any, store: Any) -> dict[str, Any]:
    """The task snapshot's two parts, through pickle as a backend stores them."""
    if isinstance(store, RocksDBStore):
        store.flush()
    return pickle.loads(pickle.dumps({"states": dict(managed_states(bolt)),
                                      "custom": bolt.snapshot()}))


class Sessions(EarlyCount):
    window = SessionWindows(gap_ms=150)


class SlidingCounts(EarlyCount):
    """Count windows of 4 records every 2, per sensor: panes, no time."""

    window = CountWindows(4, 2)
    early_fire_every_ms = None
    watermark = None


def per_key(emitted: list[tuple[str, tuple]]) -> list[tuple[str, tuple]]:
    """Emitted tuples grouped by stream and key, each key's in emitted order (a watermark
    step that scans the store fires keys in store order)."""
    return sorted(emitted, key=lambda e: (e[0], repr(e[1][0])))


@pytest.mark.parametrize("cls", [EarlyCount, Sessions, SlidingCounts],
                         ids=["sliding", "session", "count"])
@pytest.mark.parametrize("kind", ["memory", "rocksdb", "rocksdb-scan"])
def test_checkpoint_anywhere_equals_uninterrupted_run(kind: str, cls: type, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """rocksdb-scan: every watermark step reads the windows in a scan of the database
    while it writes the fired windows back."""
    # a write cache of 2 entries: most reads decode what RocksDB holds (copies)
    monkeypatch.setattr(state_store, "WRITE_CACHE_ENTRIES", 2)
    if kind == "rocksdb-scan":
        monkeypatch.setattr(stored, "SCAN_MIN_DUE", 1)
        kind = "rocksdb"
    steps = _script()
    ref, ref_col = cls(), ListCollector()
    start(ref, open_store("memory", None, MAX_P), ref_col, None)
    _run(steps, ref, ref_col)
    kinds = {"on_time"} if cls is SlidingCounts else {"early", "on_time"}
    assert {v[4] for v in ref_col.stream("default")} >= kinds
    for cut in range(3, len(steps), 11):
        n = 0
        store = open_store(kind, tmp_path / f"a{cut}", MAX_P)
        first, col = cls(), ListCollector()
        start(first, store, col, None)
        _run(steps[:cut], first, col)
        snap = checkpoint(first, store)
        if kind == "rocksdb":  # the windows are the managed state, not the snapshot
            assert snap["custom"]["op"]["stored"] is True
            assert snap["states"][WINDOW_STATE], "no open window in the store"
            n = len(snap["states"][WINDOW_STATE])
        else:
            assert WINDOW_STATE not in snap["states"]
        store.close()
        second = cls()
        again = open_store(kind, tmp_path / f"b{cut}", MAX_P)
        start(second, again, col, snap)
        if kind == "rocksdb":
            assert len(managed_states(second)[WINDOW_STATE]) == n
        _run(steps[cut:], second, col)
        assert per_key(col.emitted) == per_key(ref_col.emitted), cut
        assert col.watermarks == ref_col.watermarks, cut
        assert second.late_records == ref.late_records
        again.close()


@pytest.mark.parametrize("cls", [EarlyCount, SlidingCounts], ids=["sliding", "count"])
def test_rocksdb_windows_restore_into_the_memory_store(cls: type, tmp_path: Path) -> None:
    """A savepoint of stored windows restores into a memory-store task (a dict holds them)."""
    steps = _script()
    ref, ref_col = cls(), ListCollector()
    start(ref, open_store("memory", None, MAX_P), ref_col, None)
    _run(steps, ref, ref_col)
    cut = len(steps) // 2
    store = open_store("rocksdb", tmp_path / "a", MAX_P)
    first, col = cls(), ListCollector()
    start(first, store, col, None)
    _run(steps[:cut], first, col)
    snap = checkpoint(first, store)
    store.close()
    second = cls()
    start(second, open_store("memory", None, MAX_P), col, snap)
    assert type(managed_states(second)[WINDOW_STATE]) is dict
    _run(steps[cut:], second, col)
    assert per_key(col.emitted) == per_key(ref_col.emitted)
