"""A task's barrier steps: one order (barrier/task_barrier.py), performed through a port.

The production executor, the inline runner and the simulator perform the same step list
(issue 37): these tests pin the order per kind of task and show the driver performs it,
and that none of the three writes a barrier step outside its port.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, Tuple
from jstormpy.api.component import bind_task
from jstormpy.api.topology import Grouping
from jstormpy.barrier.task_barrier import (
    BeginNext,
    Broadcast,
    Capture,
    Flush,
    Pause,
    PauseTicks,
    Release,
    Stage,
    TaskBarrier,
    TaskKind,
    Upload,
    perform,
)
from jstormpy.barrier.twophase import Sink
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import MessageKind, OutputCollector, build_routes
from tests.fake_task_host import FakeTaskHost
from tests.unit.test_routing import Sent

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """A port that records the steps performed; ``stage`` answers ``staged``."""

    def __init__(self, staged: bool = True) -> None:
        self.staged = staged
        self.done: list[str] = []

    def pause_ticks(self, barrier: int) -> None:
        self.done.append(f"pause_ticks {barrier}")

    def flush(self, barrier: int) -> None:
        self.done.append(f"flush {barrier}")

    def stage(self, barrier: int) -> bool:
        self.done.append(f"stage {barrier}")
        return self.staged

    def capture(self, barrier: int, state: bool) -> None:
        self.done.append(f"capture {barrier} {state}")

    def broadcast(self, barrier: int) -> None:
        self.done.append(f"broadcast {barrier}")

    def upload(self, barrier: int, state: bool) -> None:
        self.done.append(f"upload {barrier} {state}")

    def begin_next(self, barrier: int) -> None:
        self.done.append(f"begin_next {barrier}")

    def release(self, barrier: int) -> None:
        self.done.append(f"release {barrier}")

    def pause(self, barrier: int) -> None:
        self.done.append(f"pause {barrier}")


def test_a_sink_stages_captures_broadcasts_uploads_then_begins_the_next_transaction() -> None:
    assert TaskBarrier(TaskKind.SINK).steps() == (
        Flush(), Stage(), Capture(True), Broadcast(), Upload(True), BeginNext(), Release())


def test_a_bolt_captures_before_the_barrier_goes_on_and_releases_held_records_last() -> None:
    assert TaskBarrier(TaskKind.BOLT).steps() == (
        Flush(), Capture(True), Broadcast(), Upload(True), Release())
    assert TaskBarrier(TaskKind.BOLT, quiescent=True).steps()[0] == PauseTicks()
    assert TaskBarrier(TaskKind.BOLT, stateful=False).steps() == (
        Flush(), Capture(False), Broadcast(), Upload(False), Release())


def test_a_spout_flushes_captures_broadcasts_uploads_and_at_a_quiescent_barrier_pauses() -> None:
    assert TaskBarrier(TaskKind.SPOUT).steps() == (Flush(), Capture(True), Broadcast(),
                                                   Upload(True))
    assert TaskBarrier(TaskKind.SPOUT, quiescent=True).steps()[-1] == Pause()


def test_the_driver_performs_the_steps_in_order() -> None:
    port = Recorder()
    assert perform(TaskBarrier(TaskKind.SINK, quiescent=True), port, 7)
    assert port.done == ["pause_ticks 7", "flush 7", "stage 7", "capture 7 True",
                         "broadcast 7", "upload 7 True", "begin_next 7", "release 7"]


def test_a_sink_that_gives_the_checkpoint_up_passes_the_barrier_on_and_snapshots_nothing(
        ) -> None:
    port = Recorder(staged=False)
    assert not perform(TaskBarrier(TaskKind.SINK), port, 3)
    assert port.done == ["flush 3", "stage 3", "broadcast 3", "release 3"]


RUNTIMES = ("jstormpy/runtime/executor.py", "jstormpy/testing/inline.py",
            "jstormpy/testing/simulation/cluster.py")
STEP_CALLS = {"snapshot_taken": "begin_next", "barrier": "stage"}
"""A sink transaction's barrier calls and the one port method each may be made in."""


@pytest.mark.parametrize("module", RUNTIMES)
def test_no_runtime_orders_barrier_steps_outside_its_port(module: str) -> None:
    """The executor, the inline runner and the simulator perform a barrier's sink steps
    only in their ``_BarrierPort`` (the order is barrier/task_barrier.py's), and each
    performs the step list."""
    tree = ast.parse((ROOT / module).read_text())
    misplaced = []
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef)]:
            for call in [n for n in ast.walk(fn) if isinstance(n, ast.Call)]:
                f = call.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) \
                        and f.value.attr == "txns" and f.attr in STEP_CALLS \
                        and (cls.name, fn.name) != ("_BarrierPort", STEP_CALLS[f.attr]):
                    misplaced.append(f"{cls.name}.{fn.name}: txns.{f.attr}")
    assert not misplaced
    assert "barrier_steps.perform(" in (ROOT / module).read_text()


# -- what the order protects, as a user sees it (production's executor) ---------------------
# The step list above is pinned; these tests show why each of its orders matters on the
# executor that runs it, so a misordering planted in the list (or in a port) fails a test
# that names its consequence, not only a comparison with the list.

class AcksAtBarrier(Bolt):
    """A bolt that holds output back and emits it in ``before_snapshot``, as a multilang
    ``ShellBolt`` emits the last answers of its subprocess (docs/coming-from.md)."""

    outputs = ("word",)

    def __init__(self) -> None:
        self.held: list[str] = []

    def execute(self, tup: Tuple) -> None:
        self.held.append(tup["word"])

    def before_snapshot(self, checkpoint_id: int) -> None:
        for word in self.held:
            self.emit((word,))
        self.held = []


class StagingSink(Sink):
    """A sink over an 'external system': staged and committed transactions by id."""

    def __init__(self, staged: dict[int, list[str]], committed: dict[int, list[str]]) -> None:
        self.staged, self.committed = staged, committed
        self.open: list[str] = []

    def begin(self, checkpoint_id: int) -> None:
        self.open = []

    def write(self, tup: Tuple) -> None:
        self.open.append(tup["word"])

    def pre_commit(self, checkpoint_id: int) -> None:
        self.staged[checkpoint_id] = self.open
        self.open = []

    def commit(self, checkpoint_id: int) -> None:
        if checkpoint_id in self.staged:
            self.committed[checkpoint_id] = self.staged.pop(checkpoint_id)

    def abort(self, checkpoint_id: int) -> None:
        self.staged.pop(checkpoint_id, None)

    def recover(self, completed_id: int | None) -> None:
        # the contract's minimum: what no restored checkpoint stages is discarded; the
        # engine re-commits the restored snapshot's staged ids itself
        for txn in list(self.staged):
            if completed_id is None or txn > completed_id:
                self.staged.pop(txn)


def _executor(comp: Bolt, sent: Sent, host: FakeTaskHost, *, is_sink: bool = False,
              restored: dict[str, Any] | None = None) -> TaskExecutor:
    streams: dict[str, tuple[str, ...]] = {"default": ("word",)}
    routes, channels = build_routes(5, "mid", streams, [("out", Grouping("global", "mid",
                                                                         "default"))],
                                    {"mid": (5,), "out": (9,)}, {}, sent, 100)
    collector = OutputCollector(5, "mid", routes, channels, sent, streams=streams)
    bind_task(comp, collector, None)
    comp.prepare({}, None)  # type: ignore[arg-type]  # no context outside a run
    return TaskExecutor(5, "mid", "bolt", comp, collector, host, is_sink=is_sink,
                        input_channels=(1,), restored=restored,
                        source_index={(1, "default"): ("split", {"word": 0})})


def test_what_a_bolt_emits_as_it_snapshots_reaches_downstream_ahead_of_the_barrier() -> None:
    """Capture before Broadcast: output the bolt owes for input taken before barrier n
    (emitted by its ``before_snapshot``) belongs to checkpoint n downstream. Behind the
    barrier it would be counted in n+1 while the input that caused it is not replayed
    after a restore of n: lost."""
    sent, host = Sent(), FakeTaskHost()
    ex = _executor(AcksAtBarrier(), sent, host)
    ex._execute_batch(1, "default", [("a",), ("b",)])
    ex._on_barrier(1, 1)
    assert host.acked.wait(10)
    kinds = [(item[1], item[3]) for _, item in sent.items]
    assert kinds == [(MessageKind.DATA, [("a",), ("b",)]), (MessageKind.BARRIER, 1)]


def test_a_sink_restored_from_checkpoint_n_commits_what_it_staged_at_n() -> None:
    """Stage before Capture: checkpoint n's snapshot names transaction n as staged, so a
    sink that crashed after n completed and before it committed n commits it after the
    restore. Captured before the stage, the snapshot would not name it, and its records,
    never replayed (the spouts rewind to n), would be lost."""
    staged: dict[int, list[str]] = {}
    committed: dict[int, list[str]] = {}
    sent, host = Sent(), FakeTaskHost()
    ex = _executor(StagingSink(staged, committed), sent, host, is_sink=True)
    ex.perform_sink_steps(ex.txns.start(1))
    ex._execute_batch(1, "default", [("a",), ("b",)])
    ex._on_barrier(1, 1)
    assert host.acked.wait(10)
    snapshot = pickle.loads(host.stored[host.acks[0].handle])
    # the worker dies before complete(1) reaches it; a new one restores checkpoint 1
    restored = _executor(StagingSink(staged, committed), Sent(), FakeTaskHost(),
                         is_sink=True, restored=snapshot)
    restored.restore_sink(1, 1)
    assert committed == {1: ["a", "b"]}
