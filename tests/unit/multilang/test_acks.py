"""The multilang spout's exactly-once ledger: ack on complete, fail after a rollback, drop
covered re-emits."""

from __future__ import annotations

import doctest

from jstormpy.multilang import acks
from jstormpy.multilang.acks import AckLedger, AdoptSteps


def test_doctests():
    assert doctest.testmod(acks).failed == 0


def test_ids_are_acked_only_when_their_checkpoint_completes():
    ledger = AckLedger()
    for i in (1, 2):
        ledger.emitted(i)
    ledger.barrier(1)
    ledger.emitted(3)
    ledger.barrier(2)
    ledger.emitted(4)
    assert ledger.complete(0) == []
    assert ledger.complete(2) == [1, 2, 3]  # a completion covers every earlier one
    assert ledger.complete(2) == []
    assert ledger.in_flight() == [4]


def test_a_restore_covers_what_was_unacked_at_the_barrier():
    ledger = AckLedger()
    for i in (1, 2, 3):
        ledger.emitted(i)
    ledger.barrier(1)
    ledger.complete(1)  # acked before the next barrier: not covered by checkpoint 2
    ledger.emitted(4)
    ledger.barrier(2)
    snap = ledger.snapshot()
    ledger.emitted(5)  # after checkpoint 2: the old task owes the spout 4 and 5
    after = AckLedger()
    after.restore(snap)
    assert after.adopt(ledger.in_flight()) == AdoptSteps(acks=[4], fails=[5])
    assert after.emitted(5) is True  # the re-emit of a failed id is a new tuple


def test_a_fresh_spout_re_emitting_covered_ids_is_dropped_once_and_json_ids_work():
    ledger = AckLedger()
    ledger.emitted(["a", 1])
    ledger.emitted({"k": 2})
    ledger.barrier(3)
    after = AckLedger()
    after.restore(ledger.snapshot())
    assert after.emitted({"k": 2}) is False
    assert after.emitted(["a", 1]) is False
    assert after.emitted(["a", 1]) is True  # only once: a later one is a new tuple
    assert after.snapshot() == {"unacked": []}  # nothing covered left; open ids are not in it
