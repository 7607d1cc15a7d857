"""Barrier alignment at a task with several input channels (DESIGN §4 step 3).

Exactly-once: once barrier n arrived on a channel, that channel is *blocked* (its
records wait) until barrier n arrived on every channel. At-least-once: nothing is
blocked; the snapshot is taken when the last barrier n arrives.

Free of I/O: the caller passes the time (seconds on its own clock: ``time.monotonic()`` in
the executor, the simulated clock in the simulator).
"""

from __future__ import annotations

from collections import deque
from typing import Any


class BarrierAligner:
    """Tracks barrier arrivals per checkpoint and holds back blocked channels' items."""

    def __init__(self, channels: list[int], aligned: bool) -> None:
        self.channels = frozenset(channels)
        self.aligned = aligned
        self.arrived: dict[int, set[int]] = {}
        self.blocked: set[int] = set()
        self.held: dict[int, deque[Any]] = {}
        self.started: dict[int, float] = {}

    def is_blocked(self, channel: int) -> bool:
        """Whether items from ``channel`` must be held back now."""
        return channel in self.blocked

    def hold(self, channel: int, item: Any) -> None:
        """Keep an item of a blocked channel until the alignment completes."""
        self.held.setdefault(channel, deque()).append(item)

    def on_barrier(self, channel: int, checkpoint_id: int, now: float) -> bool:
        """Record barrier ``checkpoint_id`` from ``channel``, arrived at ``now`` (seconds);
        True when it arrived on all."""
        seen = self.arrived.setdefault(checkpoint_id, set())
        if not seen:
            self.started[checkpoint_id] = now
        seen.add(channel)
        if seen >= self.channels:
            del self.arrived[checkpoint_id]
            # channels are FIFO: an older checkpoint still incomplete now never completes
            # (its barrier was lost with a restarted upstream task); forget it
            for old in [c for c in self.arrived if c < checkpoint_id]:
                del self.arrived[old]
                self.started.pop(old, None)
            return True
        if self.aligned:
            self.blocked.add(channel)
        return False

    def alignment_ms(self, checkpoint_id: int, now: float) -> float:
        """How long the alignment of ``checkpoint_id`` took until ``now`` (ms); forgets it."""
        start = self.started.pop(checkpoint_id, None)
        return 0.0 if start is None else (now - start) * 1000.0

    def release(self) -> list[Any]:
        """Unblock every channel; returns the held items in per-channel arrival order."""
        self.blocked.clear()
        out: list[Any] = []
        for items in self.held.values():
            out.extend(items)
        self.held.clear()
        return out

    def reset(self) -> None:
        """Forget everything (rollback)."""
        self.arrived.clear()
        self.blocked.clear()
        self.held.clear()
        self.started.clear()
