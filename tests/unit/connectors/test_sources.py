"""FileSpout and SequenceSpout: output, partitioning across tasks, snapshot/restore."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from jstormpy.api.component import Spout, TopologyContext, bind_task, declared_streams
from jstormpy.api.errors import SourceError
from jstormpy.connectors.sources import FileSpout, SequenceSpout
from jstormpy.testing.semantics import check_sequences


class Collector:
    def __init__(self) -> None:
        self.out: list[tuple[Any, ...]] = []
        self.streams: set[str] = set()
        self.spout: Any = None
        """The spout emitting into it (set by ``launch``)."""

    def emit(self, values: Any, stream: str = "default") -> None:
        self.out.append(tuple(values))
        self.streams.add(stream)


def ctx(task_index: int = 0, parallelism: int = 1) -> TopologyContext:
    tasks = tuple(range(10, 10 + parallelism))
    return TopologyContext(topology="t", component="src", task_id=tasks[task_index],
                           task_index=task_index, worker_id=0,
                           component_tasks={"src": tasks})


def launch(spout: Spout, snap: Any = None, task_index: int = 0,
           parallelism: int = 1) -> Collector:
    """Ship ``spout`` like the engine does, restore (before open), open, attach a collector."""
    spout = cloudpickle.loads(cloudpickle.dumps(spout))
    collector = Collector()
    bind_task(spout, collector, None)
    if snap is not None:
        spout.restore(json.loads(json.dumps(snap)))  # snapshots are plain data
    spout.open({}, ctx(task_index, parallelism))
    collector.spout = spout
    return collector


def drain(collector: Collector, max_calls: int = 100_000) -> list[tuple[Any, ...]]:
    spout = collector.spout
    start = len(collector.out)
    for _ in range(max_calls):
        if spout.finished:
            return collector.out[start:]
        spout.next_tuple()
    raise AssertionError("spout never finished")


def step(collector: Collector, calls: int) -> None:
    for _ in range(calls):
        collector.spout.next_tuple()


# ---------------------------------------------------------------- FileSpout


@pytest.fixture
def text_files(tmp_path: Path) -> list[Path]:
    files = []
    for i in range(5):
        path = tmp_path / f"in-{i}.txt"
        path.write_text("".join(f"file{i} line {j} ✓\n" for j in range(40 + i)),
                        encoding="utf-8")
        files.append(path)
    return files


def lines_of(paths: list[Path]) -> list[tuple[str]]:
    out = []
    for p in paths:
        out += [(line,) for line in p.read_text(encoding="utf-8").splitlines()]
    return out


def test_filespout_emits_every_line_without_line_ending(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes("alpha\r\nbeta\n\n  gamma  \nδέλτα".encode())
    collector = launch(FileSpout(str(path)))
    assert drain(collector) == [("alpha",), ("beta",), ("",), ("  gamma  ",), ("δέλτα",)]
    assert collector.streams == {"default"}


def test_filespout_glob_and_list(text_files: list[Path], tmp_path: Path) -> None:
    assert drain(launch(FileSpout(str(tmp_path / "in-*.txt")))) == lines_of(text_files)
    assert drain(launch(FileSpout([str(text_files[3]), str(text_files[1])]))) == lines_of(
        [text_files[3], text_files[1]])


def test_filespout_batches_and_finishes(text_files: list[Path]) -> None:
    collector = launch(FileSpout([str(text_files[0])], batch=16))
    step(collector, 1)
    assert len(collector.out) == 16
    assert not collector.spout.finished
    assert len(drain(collector)) == 40 - 16


def test_filespout_declares_its_field() -> None:
    assert declared_streams(FileSpout("x.txt")) == {"default": ("line",)}
    assert declared_streams(FileSpout("x.txt", field="text")) == {"default": ("text",)}


@pytest.mark.parametrize("calls", [0, 1, 2, 3, 5, 8, 13])
def test_filespout_restore_resumes_exactly(text_files: list[Path], tmp_path: Path,
                                           calls: int) -> None:
    spout = FileSpout(str(tmp_path / "in-*.txt"), batch=17)
    first = launch(spout)
    step(first, calls)
    before = list(first.out)
    snap = first.spout.snapshot()
    rest = drain(first)
    assert before + rest == lines_of(text_files)

    replay = launch(spout, snap=snap)
    assert drain(replay) == rest


def test_filespout_restore_after_the_end_emits_nothing(text_files: list[Path]) -> None:
    spout = FileSpout([str(p) for p in text_files])
    first = launch(spout)
    drain(first)
    replay = launch(spout, snap=first.spout.snapshot())
    assert drain(replay) == []


def test_filespout_partitions_files_across_tasks(text_files: list[Path],
                                                 tmp_path: Path) -> None:
    spout = FileSpout(str(tmp_path / "in-*.txt"))
    task0 = drain(launch(spout, task_index=0, parallelism=2))
    task1 = drain(launch(spout, task_index=1, parallelism=2))
    assert task0 == lines_of([text_files[0], text_files[2], text_files[4]])
    assert task1 == lines_of([text_files[1], text_files[3]])
    idle = drain(launch(spout, task_index=6, parallelism=7))  # more tasks than files
    assert idle == []


def test_filespout_can_be_pickled_mid_file(text_files: list[Path]) -> None:
    collector = launch(FileSpout([str(text_files[0])], batch=5))
    step(collector, 2)
    clone = cloudpickle.loads(cloudpickle.dumps(collector.spout))
    assert clone.snapshot() == collector.spout.snapshot()


def test_filespout_missing_inputs_raise_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        launch(FileSpout(str(tmp_path / "missing.txt")))
    with pytest.raises(SourceError, match="matches no file"):
        launch(FileSpout(str(tmp_path / "*.nothing")))


def test_filespout_invalid_utf8_raises_source_error(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\xfe\n")
    collector = launch(FileSpout(str(tmp_path / "bad.txt")))
    with pytest.raises(SourceError, match="not valid UTF-8"):
        drain(collector)
    assert collector.out == [("ok",)]


# ---------------------------------------------------------------- SequenceSpout


def test_sequencespout_is_deterministic_and_well_formed() -> None:
    spout = SequenceSpout(keys=4, per_key=50, batch=7)
    out = drain(launch(spout))
    assert out == drain(launch(spout))
    assert len(out) == 200
    assert all(v == s * 7 % 13 for _k, s, v in out)
    assert out[:5] == [("k0", 0, 0), ("k1", 0, 0), ("k2", 0, 0), ("k3", 0, 0), ("k0", 1, 7)]
    report = check_sequences([dict(zip(("key", "seq", "value"), r, strict=True)) for r in out],
                             "key", "seq", spout.expected_counts())
    assert report.ok, report.summary()
    assert declared_streams(spout) == {"default": ("key", "seq", "value")}


def test_sequencespout_partitions_keys_across_tasks() -> None:
    spout = SequenceSpout(keys=10, per_key=30, key_prefix="user-")
    outs = [drain(launch(spout, task_index=i, parallelism=3)) for i in range(3)]
    owned = [{k for k, _s, _v in out} for out in outs]
    assert owned[0] == {"user-0", "user-3", "user-6", "user-9"}
    assert owned[1] == {"user-1", "user-4", "user-7"}
    assert owned[2] == {"user-2", "user-5", "user-8"}
    records = [{"key": k, "seq": s} for out in outs for k, s, _v in out]
    assert check_sequences(records, "key", "seq", spout.expected_counts()).ok


@pytest.mark.parametrize("calls", [0, 1, 4, 9])
def test_sequencespout_restore_resumes_exactly(calls: int) -> None:
    spout = SequenceSpout(keys=3, per_key=40, batch=13)
    first = launch(spout, task_index=1, parallelism=2)
    step(first, calls)
    snap = first.spout.snapshot()
    rest = drain(first)
    assert drain(launch(spout, snap=snap, task_index=1, parallelism=2)) == rest


def test_sequencespout_rate_limit_throttles_without_long_sleeps(monkeypatch) -> None:
    # the sleeps the spout asks for, not the wall time of a call (which a loaded machine
    # stretches): a throttled call never blocks the task thread for long
    from jstormpy.connectors import sources

    slept: list[float] = []
    real_sleep = time.sleep
    me = threading.get_ident()

    def sleep(s: float) -> None:
        # sources.time is the time module itself, so the patch reaches every thread in
        # the process (a leftover daemon thread of an earlier test sleeps 1 s): count
        # only the sleeps of the thread that drives the spout
        if threading.get_ident() == me:
            slept.append(s)
        real_sleep(s)
    monkeypatch.setattr(sources.time, "sleep", sleep)
    collector = launch(SequenceSpout(keys=2, per_key=1000, batch=100, rate_per_s=20))
    t0 = time.monotonic()
    for _ in range(20):
        collector.spout.next_tuple()
    elapsed = time.monotonic() - t0
    assert slept and max(slept) <= 0.005  # it was throttled, in short sleeps
    assert 1 <= len(collector.out) <= 1 + elapsed * 20 + 1


def test_sequencespout_rejects_bad_arguments() -> None:
    with pytest.raises(SourceError, match="keys=0"):
        SequenceSpout(keys=0)
    with pytest.raises(SourceError, match="rate_per_s"):
        SequenceSpout(rate_per_s=0)
