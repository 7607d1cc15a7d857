"""Credit grants are absolute per channel, so a lost grant heals with the next one; task
inboxes and credit returns wake a thread only when it waits, and never lose a wake-up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from jstormpy.runtime.credits import CreditGate, TaskInbox


def wait_until(pred: Callable[[], object], timeout: float, what: str = "condition") -> None:
    """Poll ``pred`` until it is true; fail the test if it is not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        threading.Event().wait(0.0005)


def _spend_all(gate: CreditGate, key: tuple[int, int]) -> int:
    n = 0
    while gate.credits.get(key, 0) > 0:
        gate.acquire(*key, lambda: False)
        n += 1
    return n


def test_lost_grant_is_healed_by_the_next_absolute_grant() -> None:
    gate = CreditGate()
    gate.reset({(1, 2): 8})
    assert _spend_all(gate, (1, 2)) == 8
    gate.release_total(1, 2, 4)   # receiver processed 4: grant "4 so far"
    # the grant "6 so far" is lost on the wire; the next one says 8 so far
    gate.release_total(1, 2, 8)
    assert _spend_all(gate, (1, 2)) == 8  # the full window is back, not 8 - 2
    gate.release_total(1, 2, 8)   # a periodic re-send of the same total grants nothing
    gate.release_total(1, 2, 5)   # nor does a late, older one
    assert gate.credits[(1, 2)] == 0


def test_reset_restarts_the_totals() -> None:
    gate = CreditGate()
    gate.reset({(1, 2): 3})
    gate.release_total(1, 2, 10)
    gate.reset({(1, 2): 3})  # new generation / peer restarted: the receiver counts from 0
    gate.release_total(1, 2, 2)
    assert gate.credits[(1, 2)] == 5


def test_negative_total_is_refused() -> None:
    with pytest.raises(ValueError, match="credit total"):
        CreditGate().release_total(1, 2, -1)


# -- hand-offs: a wake-up only for a thread that waits, and never one lost ------------------
def test_inbox_hands_every_item_to_a_task_that_keeps_running_dry() -> None:
    """The task thread alternates between finding items and waiting for them (a put
    wakes it only while it waits): a lost wake-up would leave it waiting out its
    timeout (``get`` returns the item only then, or raises)."""
    inbox = TaskInbox(64)
    n, timeout = 7_000, 3.0
    got: list[int] = []
    errors: list[str] = []

    def task() -> None:
        while len(got) < n:
            started = time.monotonic()
            try:
                got.append(inbox.get(timeout))
            except IndexError:
                errors.append(f"no item within {timeout} s after {len(got)}")
                return
            if time.monotonic() - started >= timeout:
                errors.append(f"item {len(got) - 1} came only after the {timeout} s timeout")
                return

    consumer = threading.Thread(target=task, daemon=True)
    consumer.start()
    for i in range(n):
        inbox.put(i)
        if i % 7 == 0:  # the task takes everything and waits: the next put must wake it
            wait_until(lambda i=i: (len(got) > i and inbox.waiting) or not consumer.is_alive(),
                       timeout=10.0, what="the task to wait")
    consumer.join(30)
    assert not errors, errors
    assert got == list(range(n))


def test_inbox_get_times_out_without_items() -> None:
    inbox = TaskInbox(4)
    with pytest.raises(IndexError):
        inbox.get(0.01)
    assert inbox.waiting == 0
    inbox.put("x")
    assert inbox.get(0.01) == "x"


def test_a_sender_waiting_for_credit_is_woken_by_the_return() -> None:
    """A sender at zero credit waits; the receiver returns one credit once it sees the
    sender waiting. A return wakes senders only when one waits: a lost wake-up would
    leave the sender to its 0.1 s poll, so the typical hand-off would take 0.1 s."""
    gate = CreditGate()
    gate.reset({(1, 9): 0})
    rounds = 200
    took: list[float] = []

    def sender() -> None:
        for _ in range(rounds):
            gate.acquire(1, 9, lambda: False)
            took.append(time.monotonic() - returned_at[0])

    returned_at = [0.0]
    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    for i in range(rounds):
        wait_until(lambda: gate.blocked() == 1, timeout=10.0, what="the sender to wait")
        returned_at[0] = time.monotonic()
        gate.release(1, 9, 1)
        wait_until(lambda i=i: len(took) > i, timeout=10.0, what="the sender to proceed")
    thread.join(10)
    assert len(took) == rounds
    assert sorted(took)[rounds // 2] < 0.05, f"median hand-off {sorted(took)[rounds // 2]:.3f} s"
