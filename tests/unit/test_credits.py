"""Credit grants are absolute per channel, so a lost grant heals with the next one."""

from __future__ import annotations

import pytest

from jstormpy.runtime.credits import CreditGate


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
