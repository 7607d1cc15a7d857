"""A savepoint written by jstormpy 0.1.0 (tests/golden/savepoint-0.1.0, made by
make_golden_savepoint.py) still restores: offsets, keyed managed state, window
accumulators and timers, sink state.

Snapshots are pickled by class path, so moving an engine class can make old state
unreadable; this test is what catches it (issue 24: "checkpoints and savepoints written
by today's main still restore"). The golden files are never regenerated to make it pass.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from jstormpy import Config, LocalCluster, SequenceSpout, read_committed
from jstormpy.operations.savepoints import read_manifest
from tests.golden.components import KEYS, PER_KEY, WINDOW, golden

GOLDEN = Path(__file__).parent / "savepoint-0.1.0"


def test_a_savepoint_of_0_1_0_restores_and_continues_exactly_once(tmp_path: Path) -> None:
    savepoint = tmp_path / "savepoint"
    shutil.copytree(GOLDEN, savepoint)  # the restore must not depend on writing into it
    manifest = read_manifest(f"file://{savepoint}")
    assert manifest["engine_version"] == "0.1.0"
    sums_out, windows_out = tmp_path / "sums", tmp_path / "windows"
    with LocalCluster() as cluster:
        handle = cluster.submit(golden(sums_out, windows_out, rate=None),
                                Config(workers=2, checkpoint_interval_ms=300),
                                from_savepoint=f"file://{savepoint}")
        handle.wait(timeout=120)

    # keyed state and offsets: each key resumes where the savepoint left it, with the
    # running sum and count of everything before (state equal to a recomputation)
    by_key: dict[str, list[dict]] = defaultdict(list)
    for record in read_committed(sums_out):
        by_key[record["key"]].append(record)
    assert sorted(by_key) == [f"k{i}" for i in range(KEYS)]
    for key, records in by_key.items():
        first = records[0]["seq"]
        assert first > 0, f"{key}: restarted from 0, the savepoint's offsets were not restored"
        assert [r["seq"] for r in records] == list(range(first, PER_KEY)), key
        for r in records:
            assert r["count"] == r["seq"] + 1, (key, r)
            assert r["sum"] == sum(SequenceSpout.value_of(s) for s in range(r["seq"] + 1)), r

    # window state: every window from the one open at the savepoint on fires once, on
    # time, with all WINDOW events -- the open window's accumulator was restored
    windows: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for record in read_committed(windows_out):
        windows[record["key"]].append((record["window_start"], record["result"],
                                       record["kind"]))
    assert sorted(windows) == [f"k{i}" for i in range(KEYS)]
    last = PER_KEY - WINDOW
    for key, fired in windows.items():
        starts = sorted(start for start, _, _ in fired)
        assert starts == list(range(starts[0], last + 1, WINDOW)), (key, starts)
        # the window holding the first restored record fires in this run, so it must
        # have counted the events before the savepoint from the restored accumulator
        assert starts[0] <= by_key[key][0]["seq"] // WINDOW * WINDOW, (key, starts)
        assert all(count == WINDOW and kind == "on_time" for _, count, kind in fired), fired
    restored_mid_window = [k for k, recs in by_key.items() if recs[0]["seq"] % WINDOW]
    assert restored_mid_window, "the savepoint should cut some key's window in the middle"
