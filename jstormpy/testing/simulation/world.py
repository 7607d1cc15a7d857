"""The simulated world: one seeded random generator, a clock and an event queue.

Nothing in a simulation runs on a thread or sleeps. Every message delivery, storage
completion, timer and fault is an event at a simulated time; the world pops them in time
order (ties broken by insertion order), so a run is a pure function of its seed.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TRACE_EVENTS = 60
"""How many of the last events a failing run's trace shows."""


@dataclass(order=True)
class _Event:
    time: float
    seq: int
    fn: Callable[[], None] = field(compare=False)
    label: str = field(compare=False)


class World:
    """The clock, the event queue and the random source of one simulated run."""

    def __init__(self, seed: int, trace_events: int | None = TRACE_EVENTS) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0.0
        self.steps = 0
        self._queue: list[_Event] = []
        self._seq = 0
        self.trace: deque[str] = deque(maxlen=trace_events)
        self.reached: dict[Any, int] = {}
        """How often the run reached each step a fault is there to test (``judging.Step``)."""

    def at(self, delay: float, fn: Callable[[], None], label: str) -> None:
        """Run ``fn`` ``delay`` simulated milliseconds from now."""
        self._seq += 1
        heapq.heappush(self._queue, _Event(self.now + max(delay, 0.0), self._seq, fn, label))

    def clock_ms(self) -> float:
        """The simulated time in milliseconds (a clock the real objects can be given)."""
        return self.now

    def latency(self, low: float, high: float) -> float:
        """A random delay in ``[low, high]`` ms."""
        return self.rng.uniform(low, high)

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def reach(self, step: Any) -> None:
        """The run reached ``step`` (a :class:`~jstormpy.testing.simulation.judging.Step`)."""
        self.reached[step] = self.reached.get(step, 0) + 1

    def note(self, text: str) -> None:
        """Record a line in the trace (shown when the run fails)."""
        self.trace.append(f"{self.now:9.1f} ms  {text}")

    def run(self, done: Callable[[], bool], max_steps: int, max_time: float) -> bool:
        """Pop events until ``done()``; False if the step or time budget ran out first
        (the run hung) or nothing is left to happen."""
        while not done():
            if not self._queue or self.steps >= max_steps:
                return False
            event = heapq.heappop(self._queue)
            if event.time > max_time:
                return False
            self.now = event.time
            self.steps += 1
            if event.label:
                self.note(event.label)
            event.fn()
        return True
