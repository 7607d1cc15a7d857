"""A gray release's switch after its quiescent cut: its steps, their one driver, its port.

A switch (master/upgrade.py, docs/upgrade.md) moves a batch of workers to a code version.
After the quiescent checkpoint ``n`` (master/quiescent.py, shared with the rescale) its
steps are one list (:meth:`SwitchSteps.steps`), in their one order:

1. **stop** -- the batch workers get ``Shutdown(exit_code=75)`` and restart on their new
   version; wait until every one registered again;
2. **read** -- ``n``'s snapshot handles (on the TM's backend thread); an unreadable
   checkpoint aborts the switch;
3. **prepare** -- each batch worker restores its tasks from ``n`` in the *current*
   generation (``Prepare(partial=True)``); the other workers keep their processes, tasks,
   state and generation; a worker that fails to prepare aborts the switch;
4. **resume** -- ``Start`` to the batch, then every spout resumes.

An abort puts the assignments back and a normal recovery (a new generation, the last
completed checkpoint) brings every worker back. :func:`perform` is the one driver;
``UpgradeController`` (master/upgrade.py) and the simulator's gray release
(jstormpy/testing/simulation) are each a :class:`SwitchPort`.

Free of I/O (``tests/unit/test_pure_protocol.py``): no clock, threads or files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class SwitchStep(StrEnum):
    """The steps after the quiescent cut, in their one order."""

    STOP = "stop"
    READ = "read"
    PREPARE = "prepare"
    RESUME = "resume"


@dataclass(frozen=True)
class SwitchSteps:
    """One switch from the quiescent checkpoint ``quiescent`` (``n``)."""

    quiescent: int

    def steps(self) -> list[SwitchStep]:
        return list(SwitchStep)


class SwitchPort(Protocol):
    """How a runtime performs a switch's steps. Each answers through ``then``; a port
    whose switch was cut off meanwhile (a worker lost, a recovery, a time-out, a dead TM)
    never answers, and the switch ends there."""

    def stop_batch(self, then: Callable[[], None]) -> None:
        """Restart the batch on its new code; ``then()`` once every one registered."""

    def read_checkpoint(self, quiescent: int,
                        then: Callable[[Mapping[int, str], str], None]) -> None:
        """``then(handles by task, error)``: ``quiescent``'s snapshot handles ("" error)."""

    def prepare_batch(self, quiescent: int, handles: Mapping[int, str],
                      then: Callable[[str], None]) -> None:
        """Restore the batch's tasks from ``quiescent`` in the current generation;
        ``then(failure)`` once every batch worker answered ("" if all are ready)."""

    def resume(self) -> None:
        """``Start`` to the batch, every spout resumes: the switch is done."""

    def abort(self, reason: str) -> None:
        """The switch ends: assignments back, a recovery brings every worker back."""


def perform(switch: SwitchSteps, port: SwitchPort) -> None:
    """The one driver: ``switch``'s steps through ``port``."""
    n = switch.quiescent

    def read(handles: Mapping[int, str], error: str) -> None:
        if error:
            port.abort(f"quiescent checkpoint {n} unreadable: {error}")
            return
        port.prepare_batch(n, handles, prepared)

    def prepared(failure: str) -> None:
        if failure:
            port.abort(failure)
            return
        port.resume()

    port.stop_batch(lambda: port.read_checkpoint(n, read))
