"""A clock for tests: it moves only when the test sets :attr:`Clock.now`."""

from __future__ import annotations


class Clock:
    """Callable like ``time.time`` / ``wall_ms``: returns :attr:`now` (in whatever unit the
    code under test reads)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
