"""The Topology Master's restart decisions (Flink's restart strategies, docs/errors.md): one
small object the core asks on every failure -- restart after how long, or fail the job --
and that spots a deterministic user error (the same exception on the same tuple right after
the restore it caused)."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from jstormpy.api.errors import RestoreRefusedError, UnavailableError
from jstormpy.api.restart import RestartKind, RestartStrategy

NOT_RESTARTABLE: dict[str, str] = {
    UnavailableError.__name__: "an external system did not answer in time; restarting "
                               "would only wait again",
    RestoreRefusedError.__name__: "a sink refused the restored checkpoint; every restore "
                                  "of it would refuse again",
}
"""Errors no restart can fix, by exception type name, with why: a task or a Prepare that
fails with one of them fails the topology at once (the restart strategy is not asked)."""


def unrestartable_reason(message: str) -> str | None:
    """Why no restart can fix the error ``message`` (``"<ExceptionType>: ..."``, as workers
    report them), or None."""
    kind, sep, _ = message.partition(":")
    return NOT_RESTARTABLE.get(kind) if sep else None


@dataclass(frozen=True)
class RestartDecision:
    """The answer to one failure: ``restart`` after ``delay_s``, or fail with ``reason``."""

    restart: bool
    delay_s: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class ErrorSignature:
    """What makes two user errors "the same": component, exception type and message, and the
    tuple it raised on."""

    component: str
    message: str
    tuple_repr: str


class RestartTracker:
    """Counts failures and decides, for one strategy, on an injectable clock."""

    def __init__(self, strategy: RestartStrategy, max_restarts: int,
                 clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random) -> None:
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.clock = clock
        self.rand = rand
        self.restarts = 0           # restarts made (status "restarts")
        self.in_a_row = 0           # since the last back-off reset (exponential-delay)
        self.failures: deque[float] = deque()  # failure times (failure-rate)
        self.last_failure: float | None = None
        self.next_delay_s = strategy.initial_ms / 1000.0
        self.restart_at = 0.0       # no Prepare before this clock time
        self.last_user_error: ErrorSignature | None = None
        self.user_error_generation = -1

    def on_failure(self, reason: str) -> RestartDecision:
        """A failure that needs a recovery: restart (after a delay) or fail."""
        now = self.clock()
        s = self.strategy
        attempts = s.attempts or self.max_restarts
        self.restarts += 1
        if s.kind is RestartKind.NONE:
            return self._fail(f"restart strategy none: no restart ({reason})")
        if s.kind is RestartKind.FIXED_DELAY:
            if self.restarts > attempts:
                return self._fail(f"{self.restarts - 1} restarts used up the restart strategy "
                                  f"({s.describe(self.max_restarts)})")
            return self._restart(now, s.delay_ms / 1000.0)
        if s.kind is RestartKind.FAILURE_RATE:
            self.failures.append(now)
            while self.failures and self.failures[0] <= now - s.interval_ms / 1000.0:
                self.failures.popleft()
            if len(self.failures) > s.max_failures:
                return self._fail(f"{len(self.failures)} failures within "
                                  f"{s.interval_ms} ms exceed the restart strategy "
                                  f"({s.describe(self.max_restarts)})")
            return self._restart(now, s.delay_ms / 1000.0)
        # exponential-delay
        if self.last_failure is not None and now - self.last_failure >= s.reset_after_ms / 1000.0:
            self.in_a_row = 0
            self.next_delay_s = s.initial_ms / 1000.0
        self.in_a_row += 1
        if self.in_a_row > attempts:
            return self._fail(f"{self.in_a_row - 1} restarts in a row used up the restart "
                              f"strategy ({s.describe(self.max_restarts)})")
        delay = min(self.next_delay_s, s.max_ms / 1000.0)
        self.next_delay_s = min(delay * s.multiplier, s.max_ms / 1000.0)
        if s.jitter:
            delay *= 1.0 + s.jitter * (2.0 * self.rand() - 1.0)
        return self._restart(now, max(0.0, delay))

    def is_deterministic(self, signature: ErrorSignature, generation: int) -> bool:
        """A user error raised on a tuple: True if the very same error on the same tuple
        caused the restore this generation started from (restarting again would only
        repeat it). Records it for the next call otherwise."""
        repeat = (self.last_user_error == signature
                  and generation == self.user_error_generation + 1)
        self.last_user_error = signature
        self.user_error_generation = generation
        return repeat

    def due(self) -> bool:
        """The back-off of the last restart is over."""
        return self.clock() >= self.restart_at

    def _restart(self, now: float, delay_s: float) -> RestartDecision:
        self.last_failure = now
        self.restart_at = now + delay_s
        return RestartDecision(True, delay_s)

    def _fail(self, reason: str) -> RestartDecision:
        self.restarts -= 1  # counted on entry, but not made
        return RestartDecision(False, reason=reason)
