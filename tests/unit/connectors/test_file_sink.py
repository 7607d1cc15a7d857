"""FileSink: two-phase commit on real files, driven exactly like the engine drives it."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import cloudpickle
import pyarrow.parquet as pq
import pytest

from jstormpy.api.component import TopologyContext, Tuple, bind_task
from jstormpy.api.errors import FencedError, SinkError
from jstormpy.barrier.twophase import Sink
from jstormpy.connectors.sinks import FileSink, committed_files, read_committed
from jstormpy.connectors.sources import SequenceSpout
from jstormpy.testing.semantics import check_sequences

FIELDS = {"key": 0, "seq": 1, "value": 2}


def ctx(task_id: int = 3, generation: int = 0, component: str = "out") -> TopologyContext:
    return TopologyContext(topology="t", component=component, task_id=task_id, task_index=0,
                           worker_id=0, generation=generation)


def tup(key: str, seq: int) -> Tuple:
    return Tuple((key, seq, seq * 7 % 13), FIELDS, "src")


def start(directory: Path, fmt: str = "jsonl", restored: int | None = None, *,
          pending: tuple[int, ...] = (), task_id: int = 3, generation: int = 0) -> FileSink:
    """A new task instance, shipped like the engine ships it, through the restart sequence."""
    sink = cloudpickle.loads(cloudpickle.dumps(FileSink(directory, format=fmt)))
    sink.prepare({}, ctx(task_id, generation))
    for p in pending:
        sink.commit(p)
    sink.recover(restored)
    sink.begin((restored or 0) + 1)
    return sink


def visible(directory: Path) -> list[str]:
    """Every file a reader that skips ``_``/``.`` names would see (relative paths)."""
    out = []
    for dirpath, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        rel = os.path.relpath(dirpath, directory)
        out += [os.path.normpath(os.path.join(rel, f)) for f in files
                if not f.startswith(("_", "."))]
    return sorted(out)


def all_files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_filesink_is_a_sink() -> None:
    assert isinstance(FileSink("/nonexistent"), Sink)


def test_commit_makes_the_part_file_visible(tmp_path: Path) -> None:
    sink = start(tmp_path)
    for i in range(3):
        sink.execute(tup("a", i))
    assert visible(tmp_path) == []
    sink.pre_commit(1)
    sink.begin(2)
    assert visible(tmp_path) == []
    assert read_committed(tmp_path) == []
    (staged,) = all_files(tmp_path)  # in this incarnation's own staging directory
    assert staged.startswith("_staging/t00003-") and \
        staged.endswith("/part-0000000001-00003.jsonl"), staged

    sink.commit(1)
    assert visible(tmp_path) == ["part-0000000001-00003.jsonl"]
    lines = (tmp_path / "part-0000000001-00003.jsonl").read_text().splitlines()
    assert lines == ['{"key":"a","seq":0,"value":0}', '{"key":"a","seq":1,"value":7}',
                     '{"key":"a","seq":2,"value":1}']
    assert read_committed(tmp_path) == [{"key": "a", "seq": i, "value": i * 7 % 13}
                                        for i in range(3)]
    assert all_files(tmp_path) == ["part-0000000001-00003.jsonl"]


def test_uncommitted_data_is_never_visible(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.write(tup("a", 0))
    sink.pre_commit(1)
    sink.begin(2)
    sink.write(tup("a", 1))  # in progress
    assert read_committed(tmp_path) == []
    assert visible(tmp_path) == []
    names = all_files(tmp_path)
    assert len(names) == 2
    assert all(n.split("/")[0].startswith(("_", ".")) for n in names)


def test_commit_is_idempotent_across_restarts(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.write(tup("a", 0))
    sink.pre_commit(1)
    sink.begin(2)
    sink.commit(1)
    before = (tmp_path / "part-0000000001-00003.jsonl").read_bytes()
    sink.commit(1)  # again, same process
    other = start(tmp_path, restored=1, pending=(1,), generation=1)  # again, after "crash"
    other.commit(1)
    assert (tmp_path / "part-0000000001-00003.jsonl").read_bytes() == before
    assert read_committed(tmp_path) == [{"key": "a", "seq": 0, "value": 0}]


def test_commit_interrupted_after_publishing_is_finished_by_recommit(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.write(tup("a", 0))
    sink.pre_commit(1)
    (staged,) = tmp_path.glob("_staging/*/part-0000000001-00003.jsonl")
    os.link(staged, tmp_path / "part-0000000001-00003.jsonl")  # crash before unlink
    again = start(tmp_path, restored=1, pending=(1,), generation=1)
    assert not staged.exists()
    assert read_committed(tmp_path) == [{"key": "a", "seq": 0, "value": 0}]
    again.write(tup("a", 1))
    again.pre_commit(2)
    again.commit(2)
    assert [r["seq"] for r in read_committed(tmp_path)] == [0, 1]


def test_empty_transaction_produces_no_file(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.pre_commit(1)
    sink.begin(2)
    sink.commit(1)
    sink.commit(1)
    assert all_files(tmp_path) == []
    assert read_committed(tmp_path) == []


def test_crash_recovery_recommits_pending_and_discards_the_rest(tmp_path: Path) -> None:
    first = start(tmp_path)
    first.write(tup("a", 0))
    first.write(tup("a", 1))
    first.pre_commit(1)
    first.begin(2)
    first.write(tup("a", 2))
    first.pre_commit(2)  # checkpoint 2's snapshot lists 2 as pending
    first.begin(3)
    first.commit(1)  # checkpoint 1 completes; checkpoint 2 completes but the crash
    first.write(tup("a", 3))  # comes before commit(2)
    first.pre_commit(3)  # staged, but checkpoint 3 never completes
    first.begin(4)
    first.write(tup("a", 4))  # in progress
    first.write(tup("a", 5))
    assert first._fh is not None
    first._fh.flush()
    # -- crash: `first` is abandoned without cleanup; restore to checkpoint 2
    second = start(tmp_path, restored=2, pending=(2,), generation=1)
    assert [r["seq"] for r in read_committed(tmp_path)] == [0, 1, 2]
    assert all_files(tmp_path) == ["part-0000000001-00003.jsonl",
                                   "part-0000000002-00003.jsonl"]
    # the replay re-sends what followed checkpoint 2
    for seq in (3, 4, 5):
        second.write(tup("a", seq))
    second.pre_commit(3)
    second.begin(4)
    second.commit(3)
    report = check_sequences(read_committed(tmp_path), "key", "seq", {"a": 6})
    assert report.ok, report.summary()


def test_fresh_start_recover_discards_every_leftover_of_the_task(tmp_path: Path) -> None:
    old = start(tmp_path)
    old.write(tup("a", 0))
    old.pre_commit(1)
    old.begin(2)
    old.write(tup("a", 1))
    start(tmp_path, generation=1)  # recover(None)
    assert all_files(tmp_path) == []


def test_recover_leaves_other_tasks_alone(tmp_path: Path) -> None:
    t3 = start(tmp_path, task_id=3)
    t4 = start(tmp_path, task_id=4)
    t3.write(tup("a", 0))
    t4.write(tup("b", 0))
    t3.pre_commit(1)
    t4.pre_commit(1)
    t3.begin(2)
    t4.begin(2)
    t4.write(tup("b", 1))
    start(tmp_path, task_id=3, generation=1)  # task 3 restarts from scratch
    t4.pre_commit(2)
    t4.commit(1)
    t4.commit(2)
    assert read_committed(tmp_path) == [{"key": "b", "seq": 0, "value": 0},
                                        {"key": "b", "seq": 1, "value": 7}]
    assert all_files(tmp_path) == ["part-0000000001-00004.jsonl",
                                   "part-0000000002-00004.jsonl"]


def test_abort_discards_open_and_staged(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.write(tup("a", 0))
    sink.pre_commit(1)
    sink.begin(2)
    sink.write(tup("a", 1))
    sink.abort(2)
    sink.abort(1)
    assert all_files(tmp_path) == []
    sink.commit(1)  # nothing left to commit: no-op
    assert read_committed(tmp_path) == []
    sink.begin(2)  # the aborted transaction can be reopened
    sink.write(tup("a", 9))
    sink.pre_commit(2)
    sink.commit(2)
    assert read_committed(tmp_path) == [{"key": "a", "seq": 9, "value": 11}]


def test_read_committed_orders_by_checkpoint_then_task(tmp_path: Path) -> None:
    sinks = {task: start(tmp_path, task_id=task) for task in (12, 2)}
    for checkpoint in (1, 2):
        for task, sink in sinks.items():
            sink.write(Tuple((task, checkpoint), {"task": 0, "cp": 1}, "src"))
            sink.pre_commit(checkpoint)
            sink.begin(checkpoint + 1)
    for checkpoint in (2, 1):
        for sink in sinks.values():
            sink.commit(checkpoint)
    assert [(r["cp"], r["task"]) for r in read_committed(tmp_path)] == [
        (1, 2), (1, 12), (2, 2), (2, 12)]
    assert [p.name for p in committed_files(tmp_path)] == [
        "part-0000000001-00002.jsonl", "part-0000000001-00012.jsonl",
        "part-0000000002-00002.jsonl", "part-0000000002-00012.jsonl"]


def test_parquet_round_trip(tmp_path: Path) -> None:
    sink = start(tmp_path, fmt="parquet")
    index = {"word": 0, "count": 1, "score": 2}
    rows = [("cat", 3, 0.5), ("dog", 1, 1.25), ("ému", 7, -2.0)]
    for values in rows:
        sink.write(Tuple(values, index, "count"))
    assert all_files(tmp_path) == []  # buffered until the barrier
    sink.pre_commit(1)
    sink.begin(2)
    assert visible(tmp_path) == []
    sink.commit(1)
    assert visible(tmp_path) == ["part-0000000001-00003.parquet"]
    table = pq.read_table(tmp_path / "part-0000000001-00003.parquet")
    assert table.column_names == ["word", "count", "score"]
    assert table.to_pylist() == [dict(zip(index, v, strict=True)) for v in rows]
    assert read_committed(tmp_path) == table.to_pylist()


def test_parquet_crash_recovery(tmp_path: Path) -> None:
    first = start(tmp_path, fmt="parquet")
    first.write(tup("a", 0))
    first.pre_commit(1)
    first.begin(2)
    first.write(tup("a", 1))
    first.pre_commit(2)
    second = start(tmp_path, fmt="parquet", restored=1, pending=(1,), generation=1)
    second.write(tup("a", 1))
    second.pre_commit(2)
    second.commit(2)
    assert read_committed(tmp_path) == [{"key": "a", "seq": 0, "value": 0},
                                        {"key": "a", "seq": 1, "value": 7}]


def test_unwritable_directory_raises_sink_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    sink = FileSink(blocker / "out")
    with pytest.raises(SinkError, match="cannot create its output directories"):
        sink.prepare({}, ctx())


def test_unknown_format_is_refused() -> None:
    with pytest.raises(SinkError, match="format 'csv' is not supported"):
        FileSink("/tmp/x", format="csv")


def test_protocol_misuse_is_reported(tmp_path: Path) -> None:
    sink = FileSink(tmp_path)
    with pytest.raises(SinkError, match="before prepare"):
        sink.begin(1)
    sink.prepare({}, ctx())
    with pytest.raises(SinkError, match="no open transaction"):
        sink.write(tup("a", 0))
    sink.begin(1)
    with pytest.raises(SinkError, match="transaction 1 is still open"):
        sink.begin(2)
    with pytest.raises(SinkError, match="open transaction is 1"):
        sink.pre_commit(2)
    with pytest.raises(SinkError, match="as JSON"):
        sink.write(Tuple((object(),), {"x": 0}, "src"))


def test_read_committed_of_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match="cannot list"):
        read_committed(tmp_path / "nope")


class _Collector:
    def __init__(self) -> None:
        self.out: list[tuple[Any, ...]] = []

    def emit(self, values: Any, stream: str = "default") -> None:
        self.out.append(tuple(values))

    def drain(self) -> list[tuple[Any, ...]]:
        out, self.out = self.out, []
        return out


def _run_pipeline(directory: Path, fmt: str, seed: int) -> int:
    """SequenceSpout → FileSink under a simulated engine that crashes at random points.

    Returns the number of crashes. Checkpoints: the barrier snapshots the spout position and
    pre-commits the sink; completion (randomly later) commits. A crash abandons both
    components; the restart restores the last completed checkpoint.
    """
    rng = random.Random(seed)
    spout_ctx = TopologyContext(topology="t", component="src", task_id=1, task_index=0,
                                worker_id=0)
    completed: tuple[int, dict[str, int], tuple[int, ...]] | None = None
    crashes = 0
    while True:
        generation = crashes
        spout = SequenceSpout(keys=5, per_key=120, batch=11)
        collector = _Collector()
        bind_task(spout, collector, None)
        if completed is not None:
            spout.restore(json.loads(json.dumps(completed[1])))
        spout.open({}, spout_ctx)
        restored = completed[0] if completed else None
        sink = start(directory, fmt, restored=restored,
                     pending=completed[2] if completed else (), generation=generation)
        checkpoint = (restored or 0) + 1
        pending: list[int] = []
        in_flight: tuple[int, dict[str, int], tuple[int, ...]] | None = None
        while True:
            if crashes < 6 and rng.random() < 0.04:
                crashes += 1
                break
            spout.next_tuple()
            for values in collector.drain():
                sink.execute(Tuple(values, FIELDS, "src"))
            if in_flight is not None and (spout.finished or rng.random() < 0.5):
                completed, in_flight = in_flight, None
                if crashes < 6 and rng.random() < 0.2:  # crash before the commits
                    crashes += 1
                    break
                for p in [p for p in pending if p <= completed[0]]:
                    sink.commit(p)
                    pending.remove(p)
            if in_flight is None and (spout.finished or rng.random() < 0.3):
                sink.pre_commit(checkpoint)
                pending.append(checkpoint)
                in_flight = (checkpoint, spout.snapshot(), tuple(pending))
                sink.begin(checkpoint + 1)
                checkpoint += 1
                if spout.finished:
                    completed = in_flight
                    for p in pending:
                        sink.commit(p)
                    sink.cleanup()
                    return crashes


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("seed", range(6))
def test_exactly_once_through_random_crashes(tmp_path: Path, fmt: str, seed: int) -> None:
    crashes = _run_pipeline(tmp_path, fmt, seed)
    assert crashes > 0
    records = read_committed(tmp_path)
    report = check_sequences(records, "key", "seq",
                             SequenceSpout(keys=5, per_key=120).expected_counts())
    assert report.ok, report.summary()
    assert len(records) == 600
    assert all(r["value"] == r["seq"] * 7 % 13 for r in records)
    leftovers = [n for n in all_files(tmp_path) if n.startswith(("_", "."))]
    assert leftovers == []


def test_a_prepared_sink_can_still_be_pickled(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.write(tup("a", 0))
    clone = cloudpickle.loads(cloudpickle.dumps(sink))
    assert clone._fh is None and clone.directory == sink.directory


def test_a_fresh_run_into_a_used_directory_is_refused_and_keeps_the_old_output(
        tmp_path: Path) -> None:
    # issue 13 hole 5: checkpoint ids restart at 1 in a fresh run; commit(1) used to find the
    # earlier run's part-1 "already committed" and delete its own staged transaction
    first = start(tmp_path)
    first.write(tup("a", 0))
    first.pre_commit(1)
    first.commit(1)
    before = all_files(tmp_path)
    content = (tmp_path / "part-0000000001-00003.jsonl").read_bytes()
    fresh = cloudpickle.loads(cloudpickle.dumps(FileSink(tmp_path)))
    fresh.prepare({}, ctx(3, 0))
    with pytest.raises(SinkError) as err:
        fresh.recover(None)  # what a fresh run does: nothing restored
    assert str(tmp_path) in str(err.value) and "--resume" in str(err.value)
    assert all_files(tmp_path) == before
    assert (tmp_path / "part-0000000001-00003.jsonl").read_bytes() == content
    # a restore (recover to a completed checkpoint) in the same directory is fine
    start(tmp_path, restored=1, generation=1)


def test_a_zombie_incarnation_can_neither_stage_nor_commit(tmp_path: Path) -> None:
    # issue 13 hole 6: a frozen task of an older generation wakes up after the recovery
    zombie = start(tmp_path, generation=1)
    zombie.write(tup("a", 0))
    zombie.pre_commit(1)  # checkpoint 1 completes, the zombie froze before commit(1)
    zombie.begin(2)
    zombie.write(tup("z", 99))  # replayed by the new incarnation, differently batched
    fresh = start(tmp_path, restored=1, pending=(1,), generation=2)
    assert [r["seq"] for r in read_committed(tmp_path)] == [0]
    fresh.write(tup("a", 1))
    fresh.pre_commit(2)
    fresh.begin(3)
    # the zombie wakes up: it may not stage over, or publish, transaction 2
    with pytest.raises(FencedError):
        zombie.pre_commit(2)
    with pytest.raises(FencedError):
        zombie.commit(2)
    fresh.commit(2)
    assert [(r["key"], r["seq"]) for r in read_committed(tmp_path)] == [("a", 0), ("a", 1)]


def test_staged_files_of_an_earlier_layout_are_adopted(tmp_path: Path) -> None:
    sink = start(tmp_path)
    sink.write(tup("a", 0))
    sink.pre_commit(1)
    (staged,) = tmp_path.glob("_staging/*/part-0000000001-00003.jsonl")
    os.replace(staged, tmp_path / "_staging" / staged.name)  # the flat layout
    start(tmp_path, restored=1, pending=(1,), generation=1)
    assert [r["seq"] for r in read_committed(tmp_path)] == [0]


def test_a_savepoint_restore_over_output_written_after_the_savepoint_is_refused(
        tmp_path: Path) -> None:
    # issue 23 hole 4: the restored run's ids continue from the savepoint's checkpoint, so
    # part files committed after it would take the restored run's names (and its output)
    first = start(tmp_path)
    for n in (1, 2, 3):
        first.write(tup("a", n))
        first.pre_commit(n)
        first.commit(n)
        first.begin(n + 1)
    before = all_files(tmp_path)
    with pytest.raises(SinkError) as err:
        FileSink(tmp_path).check_savepoint_restore(1)
    assert str(tmp_path) in str(err.value) and "checkpoint 1" in str(err.value)
    assert "part-0000000002-00003.jsonl" in str(err.value)
    assert all_files(tmp_path) == before
    FileSink(tmp_path).check_savepoint_restore(3)  # nothing after the savepoint: fine
    FileSink(tmp_path / "new").check_savepoint_restore(1)  # no directory yet: fine


def test_a_used_output_directory_names_one_part_file_once(tmp_path: Path) -> None:
    # issue 40 item 8: one committed file is named, not shown as a range from it to itself
    first = start(tmp_path)
    first.write(tup("a", 0))
    first.pre_commit(1)
    first.commit(1)
    with pytest.raises(SinkError) as err:
        FileSink(tmp_path).check_fresh_run()
    text = str(err.value)
    assert "1 committed part file of an earlier run (part-0000000001-00003.jsonl)" in text, text
    assert " ... " not in text, text
    first.begin(2)
    first.write(tup("a", 1))
    first.pre_commit(2)
    first.commit(2)
    with pytest.raises(SinkError) as err:
        FileSink(tmp_path).check_fresh_run()
    assert "2 committed part files of an earlier run (part-0000000001-00003.jsonl ... " \
           "part-0000000002-00003.jsonl)" in str(err.value), str(err.value)
