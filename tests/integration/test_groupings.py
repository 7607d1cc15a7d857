"""Storm grouping semantics over 2 real worker processes.

Each test runs one small topology: a replayable spout emitting N known tuples → a bolt
with parallelism 3 subscribed with the grouping under test, which records
``(task_id, worker_id, values)`` → a transactional FileSink. The assertions read the
committed output, i.e. what the topology really delivered and committed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed

from .components import EvenOddGrouping, NumberSpout, Recorder, StreamSplitter
from .helpers import fast_config

pytestmark = pytest.mark.timeout(120)

N = 60
KEYS = 7


def run(builder: TopologyBuilder, out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run to drain on 2 workers; return the committed records and the final status."""
    topology = builder.build()
    with LocalCluster() as cluster:
        handle = cluster.submit(topology, fast_config())
        status = handle.wait(timeout=60)
    assert status["state"] == "drained"
    assert status["restarts"] == 0, status["recoveries"]
    return read_committed(out), status


def grouped(tmp_path: Path, name: str, grouping: str, *args: Any,
            spout: NumberSpout | None = None, spout_parallelism: int = 2,
            ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    out = tmp_path / "out"
    b = TopologyBuilder(name)
    b.set_spout("numbers", spout or NumberSpout(N, KEYS), parallelism=spout_parallelism)
    declarer = b.set_bolt("rec", Recorder, parallelism=3)
    getattr(declarer, f"{grouping}_grouping")("numbers", *args)
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("rec")
    return run(b, out)


def rec_tasks(status: dict[str, Any]) -> list[int]:
    return next(c["tasks"] for c in status["components"] if c["name"] == "rec")


def plan(status: dict[str, Any]) -> dict[int, int]:
    return {int(t): w for t, w in status["plan"].items()}


def check_recorded_where_it_ran(records: list[dict[str, Any]], status: dict[str, Any]) -> None:
    """Every record's (task, worker) matches the physical plan, and the plan uses 2 workers."""
    where = plan(status)
    assert set(where.values()) == {0, 1}
    for r in records:
        assert where[r["task"]] == r["worker"], r


def seqs(records: list[dict[str, Any]]) -> list[int]:
    return sorted(r["values"][0] for r in records)


def test_fields_grouping_same_key_same_task(tmp_path):
    records, status = grouped(tmp_path, "g-fields", "fields", ["key"])
    check_recorded_where_it_ran(records, status)
    assert seqs(records) == list(range(N))  # each tuple exactly once
    task_of_key: dict[str, set[int]] = defaultdict(set)
    for r in records:
        task_of_key[r["values"][1]].add(r["task"])
    assert len(task_of_key) == KEYS
    assert all(len(tasks) == 1 for tasks in task_of_key.values()), task_of_key
    # the keys came from spout tasks in both workers, and still agree on the task
    assert {r["values"][3] for r in records} == {0, 1}
    # 7 keys over 3 tasks: more than one task is used
    assert len({t for ts in task_of_key.values() for t in ts}) >= 2


def test_all_grouping_every_task_gets_every_tuple(tmp_path):
    records, status = grouped(tmp_path, "g-all", "all")
    check_recorded_where_it_ran(records, status)
    by_task: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_task[r["task"]].append(r["values"][0])
    assert sorted(by_task) == rec_tasks(status)
    for task, got in by_task.items():
        assert sorted(got) == list(range(N)), f"task {task}"
    assert len(records) == 3 * N


def test_global_grouping_goes_to_lowest_task(tmp_path):
    records, status = grouped(tmp_path, "g-global", "global")
    check_recorded_where_it_ran(records, status)
    assert {r["task"] for r in records} == {min(rec_tasks(status))}
    assert seqs(records) == list(range(N))


@pytest.mark.parametrize("grouping", ["shuffle", "none"])
def test_shuffle_and_none_spread_over_every_task(tmp_path, grouping):
    records, status = grouped(tmp_path, f"g-{grouping}", grouping)
    check_recorded_where_it_ran(records, status)
    assert seqs(records) == list(range(N))
    per_task = Counter(r["task"] for r in records)
    assert sorted(per_task) == rec_tasks(status)
    # round-robin per emitter: 2 spout tasks x 30 tuples over 3 tasks = 20 each
    assert sorted(per_task.values()) == [N // 3] * 3, per_task


def test_local_or_shuffle_prefers_the_emitters_worker(tmp_path):
    records, status = grouped(tmp_path, "g-local", "local_or_shuffle")
    check_recorded_where_it_ran(records, status)
    assert seqs(records) == list(range(N))
    where = plan(status)
    tasks = rec_tasks(status)
    for r in records:
        src_worker = r["values"][3]
        assert any(where[t] == src_worker for t in tasks)  # there is a local task ...
        assert r["worker"] == src_worker, r                   # ... so it went there
    # every rec task is local to some spout task, so all of them got tuples
    assert {r["task"] for r in records} == set(tasks)


def test_local_or_shuffle_falls_back_to_all_tasks(tmp_path):
    # 2 spout tasks (one per worker) and 1 rec task: rec runs on one worker only, so the spout
    # task of the other worker has no local rec task and shuffles over all (= the one).
    out = tmp_path / "out"
    b = TopologyBuilder("g-local-fallback")
    b.set_spout("numbers", NumberSpout(N, KEYS), parallelism=2)
    b.set_bolt("rec", Recorder, parallelism=1).local_or_shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("rec")
    records, status = run(b, out)
    assert seqs(records) == list(range(N))
    (rec_task,) = rec_tasks(status)
    rec_worker = plan(status)[rec_task]
    src_workers = {r["values"][3] for r in records}
    assert src_workers == {0, 1}  # tuples from the remote worker arrived as well
    assert {(r["task"], r["worker"]) for r in records} == {(rec_task, rec_worker)}


def test_direct_grouping_delivers_to_the_chosen_task(tmp_path):
    spout = NumberSpout(N, KEYS, direct_to="rec")
    records, status = grouped(tmp_path, "g-direct", "direct", spout=spout)
    check_recorded_where_it_ran(records, status)
    tasks = rec_tasks(status)
    assert seqs(records) == list(range(N))
    for r in records:
        assert r["task"] == tasks[r["values"][0] % len(tasks)], r


def test_custom_grouping_chooses_the_tasks(tmp_path):
    records, status = grouped(tmp_path, "g-custom", "custom", EvenOddGrouping())
    check_recorded_where_it_ran(records, status)
    tasks = sorted(rec_tasks(status))
    got: dict[int, list[int]] = defaultdict(list)
    for r in records:
        got[r["values"][0]].append(r["task"])
    assert sorted(got) == list(range(N))
    for seq, receivers in got.items():
        expected = tasks[:2] if seq % 2 == 0 else [tasks[2]]
        assert sorted(receivers) == expected, (seq, receivers)


def test_named_streams_reach_their_own_consumers(tmp_path):
    out = tmp_path / "out"
    b = TopologyBuilder("g-streams")
    b.set_spout("numbers", NumberSpout(N, KEYS), parallelism=2)
    b.set_bolt("split", StreamSplitter, parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("evens", Recorder, parallelism=3).shuffle_grouping("split")
    b.set_bolt("odds", Recorder, parallelism=3).fields_grouping("split", ["half"], stream="odd")
    (b.set_bolt("out", FileSink(str(out)), parallelism=1)
     .global_grouping("evens").global_grouping("odds"))
    records, status = run(b, out)
    tasks = {c["name"]: c["tasks"] for c in status["components"]}
    evens = [r for r in records if r["task"] in tasks["evens"]]
    odds = [r for r in records if r["task"] in tasks["odds"]]
    assert len(evens) + len(odds) == len(records)
    assert sorted(r["values"][0] for r in evens) == list(range(0, N, 2))
    assert sorted(r["values"][0] for r in odds) == list(range(1, N, 2))
    for r in evens:
        assert (r["source"], r["stream"], r["fields"]) == ("split", "default", ["seq", "key"])
        assert r["values"][1] == f"k{r['values'][0] % KEYS}"
    half_task: dict[int, set[int]] = defaultdict(set)
    for r in odds:
        assert (r["source"], r["stream"], r["fields"]) == ("split", "odd", ["seq", "half", "tag"])
        seq, half, tag = r["values"]
        assert (half, tag) == (seq // 2, "odd")
        half_task[half].add(r["task"])
    assert all(len(t) == 1 for t in half_task.values())
