"""A task's barrier steps: one order (barrier/task_barrier.py), performed through a port.

The production executor, the inline runner and the simulator perform the same step list
(issue 37): these tests pin the order per kind of task and show the driver performs it,
and that none of the three writes a barrier step outside its port.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
