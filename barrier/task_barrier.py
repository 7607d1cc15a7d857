"""A task's steps at a checkpoint barrier, in their one order (DESIGN §4 steps 3-5).

The order is the protocol: what a task does once a barrier aligned on every input channel
(a bolt or a sink) or once the Topology Master triggered it (a spout). It lives here once;
the production executor, the inline test runner and the simulator each perform it through
their own :class:`BarrierPort` with :func:`perform`, so none of them can order it
differently (issue 37).

The order, and why each step is where it is:

1. ``PauseTicks`` (a gray release's quiescent barrier at a bolt): nothing may be emitted on
   the task's own initiative after the quiescent cut until the release resumes.
2. ``Flush``: what the task emitted before the barrier goes out ahead of it.
3. ``Stage`` (a sink): pre-commit the open transaction under the barrier's id. If the
   external system is down the sink gives the checkpoint up (``FailCheckpoint``) and the
   rest is ``Broadcast``, ``Release``: downstream must not stall, and the transaction is
   staged at the next barrier. No snapshot: the checkpoint cannot complete.
4. ``Capture``: the task's state as of the barrier (its snapshot's generation fixed now;
   the component's ``before_snapshot`` hook first, its emits flushed ahead of the
   barrier). A stateless task (``at_most_once``) captures nothing.
5. ``Broadcast``: the barrier to every downstream task, after the capture (the state is
   that of the cut) and before anything the task does after it.
6. ``Upload``: hand the capture to the task's snapshot thread, which uploads it and acks
   the checkpoint (a stateless task acks at once, with no handle).
7. ``BeginNext`` (a sink): open the next transaction; records after the barrier go into it.
8. ``Release`` (a bolt or a sink): the records held behind the barrier on the blocked
   channels are processed next, in arrival order.
9. ``Pause`` (a spout at a quiescent barrier): no records until the release resumes it.

Free of I/O: the steps are values; :func:`perform` only calls the port.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class TaskKind(enum.Enum):
    SPOUT = "spout"
    BOLT = "bolt"
    SINK = "sink"
    """A bolt that writes an external system through two-phase commit."""


@dataclass(frozen=True)
class PauseTicks:
    """A quiescent barrier at a bolt: no ``on_tick`` until the release resumes."""


@dataclass(frozen=True)
class Flush:
    """Send what the task emitted before the barrier."""


@dataclass(frozen=True)
class Stage:
    """A sink pre-commits its open transaction under the barrier's checkpoint id."""


@dataclass(frozen=True)
class Capture:
    """Capture the task's state at the barrier (``state``: False for a stateless task,
    which only notes the barrier)."""

    state: bool


@dataclass(frozen=True)
class Broadcast:
    """Send the barrier to every downstream task."""


@dataclass(frozen=True)
class Upload:
    """Upload the capture and ack the checkpoint (``state`` False: ack at once)."""

    state: bool


@dataclass(frozen=True)
class BeginNext:
    """A sink opens its next transaction."""


@dataclass(frozen=True)
class Release:
    """Process the records held behind the barrier, in arrival order."""


@dataclass(frozen=True)
class Pause:
    """A spout at a quiescent barrier emits nothing until the release resumes it."""


BarrierStep = PauseTicks | Flush | Stage | Capture | Broadcast | Upload | BeginNext | Release \
    | Pause


@dataclass(frozen=True)
class TaskBarrier:
    """What one task does at one barrier: its steps, in order."""

    kind: TaskKind
    stateful: bool = True
    """False: ``at_most_once`` (no state is captured or uploaded)."""
    quiescent: bool = False
    """The barrier of a gray release's quiescent checkpoint."""

    def steps(self) -> tuple[BarrierStep, ...]:
        """The steps while the sink (if any) stages its transaction."""
        kind, state = self.kind, self.stateful
        if kind is TaskKind.SPOUT:
            return (Flush(), Capture(state), Broadcast(), Upload(state),
                    *((Pause(),) if self.quiescent else ()))
        return (*((PauseTicks(),) if self.quiescent else ()), Flush(),
                *((Stage(),) if kind is TaskKind.SINK else ()),
                Capture(state), Broadcast(), Upload(state),
                *((BeginNext(),) if kind is TaskKind.SINK else ()), Release())

    def declined(self) -> tuple[BarrierStep, ...]:
        """The steps after ``Stage`` when the sink gave the checkpoint up (its external
        system is down): the barrier goes on, held records are released, nothing else."""
        return (Broadcast(), Release())


class BarrierPort(Protocol):
    """How a runtime performs the steps (one method per step). ``barrier`` is the
    barrier's payload as received: the checkpoint id, an ``int`` (a quiescent barrier's
    own type included)."""

    def pause_ticks(self, barrier: int) -> None: ...

    def flush(self, barrier: int) -> None: ...

    def stage(self, barrier: int) -> bool:
        """Pre-commit the open transaction; False: the sink gave the checkpoint up."""
        ...

    def capture(self, barrier: int, state: bool) -> None: ...

    def broadcast(self, barrier: int) -> None: ...

    def upload(self, barrier: int, state: bool) -> None: ...

    def begin_next(self, barrier: int) -> None: ...

    def release(self, barrier: int) -> None: ...

    def pause(self, barrier: int) -> None: ...


def perform(plan: TaskBarrier, port: BarrierPort, barrier: int) -> bool:
    """Perform ``plan``'s steps at ``barrier`` through ``port``; False if the sink gave
    the checkpoint up at ``Stage`` (the declined steps were performed instead)."""
    for step in plan.steps():
        if not _perform(step, port, barrier):
            for after in plan.declined():
                _perform(after, port, barrier)
            return False
    return True


def _perform(step: BarrierStep, port: BarrierPort, barrier: int) -> bool:
    match step:
        case PauseTicks():
            port.pause_ticks(barrier)
        case Flush():
            port.flush(barrier)
        case Stage():
            return port.stage(barrier)
        case Capture(state):
            port.capture(barrier, state)
        case Broadcast():
            port.broadcast(barrier)
        case Upload(state):
            port.upload(barrier, state)
        case BeginNext():
            port.begin_next(barrier)
        case Release():
            port.release(barrier)
        case Pause():
            port.pause(barrier)
    return True
