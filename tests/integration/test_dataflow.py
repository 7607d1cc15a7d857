"""The dataflow API end to end: real LocalCluster runs, committed FileSink output checked
exactly against plain-Python references."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from jstormpy import LocalCluster, read_committed

from .dataflow_flows import (
    interval_join,
    interval_join_reference,
    sessions_and_tumbling,
    sessions_and_tumbling_reference,
    window_join,
    window_join_reference,
    window_rows,
    windowed,
    windowed_reference,
    wordcount,
    wordcount_reference,
)
from .helpers import committed_count, fast_config, kill_now, wait_until

pytestmark = pytest.mark.timeout(180)


def _run(topology, **config):
    with LocalCluster() as cluster:
        status = cluster.submit(topology, fast_config(**config)).wait(timeout=150)
    assert status["state"] == "drained"


def test_dataflow_wordcount_commits_every_running_count_once(tmp_path):
    n = 400
    _run(wordcount(tmp_path, n))
    expected = wordcount_reference(n)

    per_word = defaultdict(list)
    for rec in read_committed(tmp_path / "a"):
        per_word[rec["word"]].append(rec["count"])
    # stateful_map: every word's running counts 1..n, in order, none lost or repeated
    assert {w: counts for w, counts in per_word.items()} == \
        {w: list(range(1, c + 1)) for w, c in expected.items()}

    # reduce -> KeyedValue(key, value), then a fused filter: every 50th running sum
    got = Counter((r["key"], r["value"]["n"]) for r in read_committed(tmp_path / "b"))
    want = Counter((w, m) for w, c in expected.items() for m in range(50, c + 1, 50))
    assert got == want
    assert all(r["key"] == r["value"]["word"] for r in read_committed(tmp_path / "b"))


def test_dataflow_windowed_aggregates_match_the_reference(tmp_path):
    keys, per_key = 6, 120
    _run(windowed(tmp_path, keys, per_key))
    want_counts, want_sums = windowed_reference(keys, per_key)

    def rows(path):
        return sorted(read_committed(path), key=lambda r: (r["key"], r["start"]))

    assert rows(tmp_path / "count") == want_counts
    assert rows(tmp_path / "sum") == want_sums


@pytest.mark.parametrize("how", ["inner", "outer"])
def test_dataflow_window_join_pairs_match_the_reference(tmp_path, how):
    keys, nl, nr = 5, 90, 40
    _run(window_join(tmp_path, keys, nl, nr, how=how))
    got = Counter((r["key"], r["l"], r["r"]) for r in read_committed(tmp_path))
    assert got == window_join_reference(keys, nl, nr, how)


def test_dataflow_interval_join_pairs_match_the_reference(tmp_path):
    keys, nl, nr = 5, 90, 40
    _run(interval_join(tmp_path, keys, nl, nr, -30, 50))
    got = Counter((r["key"], r["l"], r["r"]) for r in read_committed(tmp_path))
    assert got == interval_join_reference(keys, nl, nr, -30, 50)


@pytest.mark.slow
def test_dataflow_window_join_rescaled_while_running_stays_exactly_once(tmp_path):
    """The join's buffered sides are managed keyed state: `rescale {"join": 3}` mid-run
    moves them by key group to the new tasks, and no pair is lost or repeated."""
    keys, nl, nr = 6, 300, 150
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(window_join(out, keys, nl, nr, rate=300),
                                fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: committed_count(out) > 200, 60, "some committed pairs")
        done = handle.rescale({"join": 3})
        assert done["error"] == ""
        assert next(c["parallelism"] for c in handle.status()["components"]
                    if c["name"] == "join") == 3
        want = window_join_reference(keys, nl, nr)
        assert committed_count(out) < sum(want.values()), "the run ended before the rescale"
        assert handle.wait(timeout=150)["state"] == "drained"
    got = Counter((r["key"], r["l"], r["r"]) for r in read_committed(out))
    assert got == want


@pytest.mark.slow
@pytest.mark.parametrize("sigkill", [False, True], ids=["rescale", "rescale-then-sigkill"])
def test_dataflow_session_and_tumbling_windows_rescaled_mid_run_stay_exactly_once(
        tmp_path, sigkill):
    """`rescale {"sessions": 3, "tumbling": 3}` mid-run: each window's state moves by key
    group to the new tasks (sessions cut by the checkpoint go on growing there), the old
    tasks' watermarks merge, and every window fires once with all its records. With
    `sigkill`, a worker is killed at once after the rescale: the restore from the
    rescaled checkpoint runs again, with the same result."""
    keys, per_key = 8, 600
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(sessions_and_tumbling(out, keys, per_key, rate=400),
                                fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: committed_count(out / "tumbling") > 40, 60, "some windows")
        done = handle.rescale({"sessions": 3, "tumbling": 3})
        assert done["error"] == ""
        if sigkill:
            kill_now(handle, "worker", 1)
        assert {c["name"]: c["parallelism"] for c in handle.status()["components"]
                if c["name"] in ("sessions", "tumbling")} == {"sessions": 3, "tumbling": 3}
        want_sessions, want_tumbling = sessions_and_tumbling_reference(keys, per_key)
        assert committed_count(out / "tumbling") < sum(want_tumbling.values()), \
            "the run ended before the rescale"
        status = handle.wait(timeout=150)
        assert status["state"] == "drained"
        if sigkill:
            assert status["restarts"] >= 1
    assert window_rows(out / "sessions") == want_sessions
    assert window_rows(out / "tumbling") == want_tumbling


@pytest.mark.slow
def test_dataflow_interval_join_rescaled_while_running_stays_exactly_once(tmp_path):
    """The interval join's buffers are managed keyed state: `rescale {"interval": 3}`
    mid-run moves them by key group, and every pair in range is committed once."""
    keys, nl, nr = 6, 400, 200
    out = tmp_path / "out"
    with LocalCluster(home=tmp_path / "home") as cluster:
        handle = cluster.submit(interval_join(out, keys, nl, nr, -30, 50, rate=300),
                                fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: committed_count(out) > 100, 60, "some committed pairs")
        assert handle.rescale({"interval": 3})["error"] == ""
        want = interval_join_reference(keys, nl, nr, -30, 50)
        assert committed_count(out) < sum(want.values()), "the run ended before the rescale"
        assert handle.wait(timeout=150)["state"] == "drained"
    assert Counter((r["key"], r["l"], r["r"]) for r in read_committed(out)) == want


@pytest.mark.slow
def test_dataflow_windows_from_a_savepoint_at_another_parallelism(tmp_path):
    """A savepoint of session and tumbling windows at parallelism 2, restored at 3: the
    windows move by key group as in a rescale, and every window is committed once."""
    keys, per_key = 8, 500
    out = tmp_path / "out"
    with LocalCluster() as cluster:
        handle = cluster.submit(sessions_and_tumbling(out, keys, per_key, rate=400),
                                fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: committed_count(out / "tumbling") > 40, 60, "some windows")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    want_sessions, want_tumbling = sessions_and_tumbling_reference(keys, per_key)
    assert committed_count(out / "tumbling") < sum(want_tumbling.values())
    with LocalCluster() as cluster:
        status = cluster.submit(sessions_and_tumbling(out, keys, per_key, windows=3),
                                fast_config(), from_savepoint=uri).wait(timeout=150)
    assert status["state"] == "drained"
    assert window_rows(out / "sessions") == want_sessions
    assert window_rows(out / "tumbling") == want_tumbling


def test_dataflow_join_state_size_is_in_the_metrics(tmp_path):
    """A window join's buffered left and right records are reported as `state_records`
    (task and component level) while it runs, bounded by what the sources emitted."""
    keys, nl, nr = 4, 200, 100
    out = tmp_path / "out"
    seen: list[int] = []
    with LocalCluster() as cluster:
        handle = cluster.submit(window_join(out, keys, nl, nr, rate=200), fast_config())

        def buffered() -> bool:
            m = handle.metrics()
            join = m["components"].get("join", {})
            tasks = [t for t in m["tasks"].values() if t["component"] == "join"]
            if join.get("state_records", 0) > 0:
                assert join["state_records"] == sum(t["state_records"] for t in tasks)
                seen.append(join["state_records"])
            return len(seen) >= 2

        wait_until(buffered, 60, "the join reporting buffered records")
        assert handle.wait(timeout=150)["state"] == "drained"
    assert all(0 < n <= keys * (nl + nr) for n in seen)
    assert Counter((r["key"], r["l"], r["r"]) for r in read_committed(out)) == \
        window_join_reference(keys, nl, nr)
