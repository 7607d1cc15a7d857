"""Credit-based flow control per channel (DESIGN §5, level 1).

Every channel (upstream task → downstream task) starts a generation with
``channel_credits(dst)`` credits: the number of batches (or markers) it may have queued
at the receiver. A sender spends one credit per item and blocks at zero; the receiver
returns credits as it *processes* items (not when it merely holds them behind a barrier),
in memory for local channels and as small CREDIT frames over the transport for remote
ones. Remote grants are *absolute*: the receiver sends the total it has returned on that
channel in this generation, and re-sends it periodically, so a lost or late grant is healed
by the next one instead of shrinking the channel for good. So every task input queue is
bounded by Σ credits of its channels, nothing is
dropped, and a slow task slows exactly the channels feeding it. Credits are per channel,
never shared between the tasks of a worker: shared credits could let a channel blocked
for barrier alignment starve another channel's barrier (a deadlock Flink's exclusive
buffers also avoid).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any


class Stopped(Exception):
    """Raised to a waiting sender when its task is being stopped."""


class CreditGate:
    """Credits of the channels whose sender is in this worker."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.credits: dict[tuple[int, int], int] = {}
        self.returned: dict[tuple[int, int], int] = {}
        self.waiting = 0

    def reset(self, grants: dict[tuple[int, int], int]) -> None:
        """Start over (new generation, or a peer restarted)."""
        with self.cond:
            self.credits.update(grants)
            for key in grants:
                self.returned[key] = 0
            self.cond.notify_all()

    def acquire(self, src: int, dst: int, should_stop: Callable[[], bool]) -> None:
        """Spend one credit of channel ``src → dst``, waiting while there is none."""
        key = (src, dst)
        with self.cond:
            while self.credits.get(key, 0) <= 0:
                if should_stop():
                    raise Stopped
                self.waiting += 1
                try:
                    self.cond.wait(0.1)
                finally:
                    self.waiting -= 1
            self.credits[key] -= 1

    def release(self, src: int, dst: int, n: int) -> None:
        """Give ``n`` credits back to channel ``src → dst``; wakes the senders only if
        one waits (most returns find none: a wake-up nobody waits for is pure cost)."""
        with self.cond:
            self.credits[(src, dst)] = self.credits.get((src, dst), 0) + n
            if self.waiting:
                self.cond.notify_all()

    def release_total(self, src: int, dst: int, total: int) -> None:
        """The receiver has returned ``total`` credits of ``src → dst`` since the last reset.

        Only the increase over the largest total seen is granted, so repeated, late or
        re-sent totals are harmless and a lost one is made good by the next.

        Raises:
            ValueError: ``total`` is negative.
        """
        if total < 0:
            raise ValueError(f"credit total {total} for channel {src} -> {dst} is negative")
        key = (src, dst)
        with self.cond:
            seen = self.returned.get(key, 0)
            if total > seen:
                self.returned[key] = total
                self.credits[key] = self.credits.get(key, 0) + total - seen
                if self.waiting:
                    self.cond.notify_all()

    def blocked(self) -> int:
        """How many senders are waiting for credit right now."""
        return self.waiting


class GrantTotals:
    """The receiving side's running totals: credits returned per remote channel into this
    worker's tasks since the channel's generation began (what CREDIT frames carry, and
    what the heartbeat re-sends). Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.totals: dict[tuple[int, int], int] = {}

    def add(self, src: int, dst: int, n: int) -> int:
        """Count ``n`` more credits returned on ``src → dst``; returns the new total."""
        with self.lock:
            total = self.totals[(src, dst)] = self.totals.get((src, dst), 0) + n
        return total

    def items(self) -> list[tuple[tuple[int, int], int]]:
        """Every channel's total (a copy)."""
        with self.lock:
            return list(self.totals.items())

    def forget(self, channel: Callable[[int, int], bool]) -> None:
        """Drop the totals of the channels ``channel(src, dst)`` selects (they count from
        0 again: a rebuilt receiver, or a restarted sender)."""
        with self.lock:
            for key in [k for k in self.totals if channel(*k)]:
                del self.totals[key]


class TaskInbox:
    """A task's input queue. Unbounded as a data structure; bounded by credits.

    One thread takes from it: its task's. A put wakes that thread only if it waits for
    an item and no put has woken it yet: a busy task (or one already woken, waiting for
    the GIL) finds the item when it next looks, and the put costs an append under the
    lock. ``waiting`` is changed and read under the lock, so no wake-up is lost.
    """

    def __init__(self, capacity: int) -> None:
        self.items: deque[Any] = deque()
        self.not_empty = threading.Condition(threading.Lock())
        self.maxsize = capacity
        self.waiting = False  # the task's thread waits in get(), not yet woken
        self.woken = False  # wake() since the last get that waited

    def put(self, item: Any) -> None:
        """Append one item (the sender already holds a credit for it)."""
        with self.not_empty:
            self.items.append(item)
            if self.waiting:
                self.waiting = False
                self.not_empty.notify()

    def get(self, timeout: float) -> Any:
        """The next item; raises IndexError if none arrives within ``timeout``."""
        items = self.items
        if items:
            return items.popleft()
        with self.not_empty:
            if not items and not self.woken:
                self.waiting = True
                try:
                    self.not_empty.wait(timeout)
                finally:
                    self.waiting = False
            self.woken = False
            return items.popleft()

    def wake(self) -> None:
        """Wake the reader: a :meth:`get` waiting now (or the next one, if none waits)
        returns at once, raising IndexError as at its timeout if no item came (its task has
        a command to run)."""
        with self.not_empty:
            self.woken = True
            self.not_empty.notify()

    def qsize(self) -> int:
        """Items waiting."""
        return len(self.items)

    def empty(self) -> bool:
        """Whether nothing is waiting."""
        return not self.items
