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
    assert after.adopt(ledger.in_flight()) == AdoptSteps(fails=[5])
    assert after.emitted(5) is True  # the re-emit of a failed id is a new tuple
    after.barrier(3)
    # 4 is covered by the restored checkpoint 2: acked with it, as soon as a newer one
    # completes (nothing can then restore before 2)
    assert after.complete(3) == [4, 5]


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
    # the dropped re-emits wait to be acked with the restored checkpoint (3); the open
    # id is not in a snapshot until its barrier
    assert after.snapshot() == {"unacked": [{"k": 2}, ["a", 1]], "checkpoint": 0}
    after.barrier(4)
    assert after.complete(4) == [{"k": 2}, ["a", 1], ["a", 1]]


def test_acks_wait_until_no_recovery_can_restore_a_checkpoint_before_theirs():
    """A recovery may fall back past the newest completed checkpoint (its files lost):
    with checkpoints_retained=3, the ids of checkpoint n are acked once n is the oldest
    of the three newest completed (simulator seed 10179 lost a key acked at n's
    completion when the run fell back to n - 1)."""
    ledger = AckLedger(retained=3)
    for cid, msg in ((1, "a"), (2, "b"), (3, "c"), (4, "d")):
        ledger.emitted(msg)
        ledger.barrier(cid)
    assert ledger.complete(1) == [] and ledger.complete(2) == []
    assert ledger.complete(3) == ["a"]  # 1 is the oldest of 1, 2, 3
    assert ledger.complete(4) == ["b"]
    assert ledger.in_flight() == ["c", "d"]  # still replayable after a fallback to 2 or 3
