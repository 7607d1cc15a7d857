"""SinkTransactions, the I/O-free task side of a sink's two-phase commit: the steps each
event asks for, and what each outcome changes. A recording sink performs the steps, as
the executor does, so the tests read as the calls a sink sees."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest

from jstormpy.api.component import TopologyContext
from jstormpy.api.errors import RestoreRefusedError, SinkError, SinkUnavailableError
from jstormpy.barrier.transactions import (
    Begin,
    Commit,
    FailCheckpoint,
    PreCommit,
    Recover,
    ReportCommitted,
    RetryCommit,
    SinkStep,
    SinkTransactions,
)
from jstormpy.connectors.twophase import TwoPhaseCommitSink
from jstormpy.run_identity import RunIdentity


class Performer:
    """Performs steps like the executor; ``down`` makes sink calls find it unavailable."""

    def __init__(self, txns: SinkTransactions) -> None:
        self.txns = txns
        self.calls: list[SinkStep] = []
        self.down = False

    def run(self, steps: list[SinkStep]) -> bool:
        return self.txns.run(steps, self.perform)

    def perform(self, step: SinkStep) -> None:
        if self.down and isinstance(step, Begin | PreCommit | Commit | Recover):
            raise SinkUnavailableError("down")
        self.calls.append(step)

    def take(self) -> list[SinkStep]:
        out, self.calls = self.calls, []
        return out


def started(first: int = 1, restored: int | None = None, pending=()) -> Performer:
    p = Performer(SinkTransactions(pending))
    p.run(p.txns.restore(restored))
    p.run(p.txns.start(first))
    return p


def test_the_steps_are_values_a_performer_may_keep_and_compare() -> None:
    """Every kind of step is a value: equal steps are one key of a set or dict (a
    performer counting what it performed, or dropping a step it already performed when
    events are replayed), and a step it was handed cannot be changed."""
    steps: list[SinkStep] = [Begin(1), PreCommit(1), Commit(1), Recover(None),
                             ReportCommitted(1), FailCheckpoint(1, "down"), RetryCommit(1)]
    assert {type(step) for step in steps} == set(typing.get_args(SinkStep))
    again = [dataclasses.replace(step) for step in steps]
    assert len(set(steps) | set(again)) == len(steps)
    for step in steps:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(step, dataclasses.fields(step)[0].name, 2)


def test_fresh_run_recovers_everything_then_opens_the_first_transaction() -> None:
    p = started()
    assert p.take() == [Recover(None), Begin(1)]
    assert p.txns.open == 1 and p.txns.pending == []


def test_restore_recommits_the_snapshots_staged_ids_then_recovers_to_the_restored_one() -> None:
    p = started(first=8, restored=5, pending=[4, 5])
    assert p.take() == [Commit(4), Commit(5), Recover(5), ReportCommitted(5), Begin(8)]
    assert p.txns.pending == []


def test_barrier_stages_the_open_transaction_and_the_snapshot_opens_the_next() -> None:
    p = started()
    p.take()
    assert p.run(p.txns.barrier(1))
    assert p.take() == [PreCommit(1)]
    assert p.txns.pending == [1]  # what the task snapshot lists
    p.run(p.txns.snapshot_taken(1))
    assert p.take() == [Begin(2)] and p.txns.open == 2


def test_each_snapshot_opens_the_transaction_of_the_next_checkpoint() -> None:
    """After barrier ``n``'s snapshot the sink opens transaction ``n + 1``, the id the next
    barrier stages it under: a sink names what it opens by that id (FileSink's in-progress
    file, KafkaSink's open transaction), so what it began is what it stages."""
    p = started()
    p.take()
    for n in (1, 2, 3, 4):
        p.run(p.txns.barrier(n))
        p.run(p.txns.snapshot_taken(n))
        assert p.take() == [PreCommit(n), Begin(n + 1)]
        assert p.txns.open == n + 1


def test_completion_commits_every_staged_id_up_to_it_in_order_then_reports() -> None:
    p = started()
    for n in (1, 2, 3):
        p.run(p.txns.barrier(n))
        p.run(p.txns.snapshot_taken(n))
    p.take()
    p.run(p.txns.complete(2))
    assert p.take() == [Commit(1), Commit(2), ReportCommitted(2)]
    assert p.txns.pending == [3]


def test_a_barrier_that_finds_an_older_open_transaction_stages_it_under_its_own_id() -> None:
    p = started(first=4)  # barriers 4 and 5 never reached this (respawned) task
    p.take()
    p.run(p.txns.barrier(6))
    assert p.take() == [PreCommit(4), Begin(6), PreCommit(6)]
    assert p.txns.pending == [4, 6]
    p.run(p.txns.complete(6))
    assert p.take() == [Commit(4), Commit(6), ReportCommitted(6)]


def test_an_unavailable_sink_at_the_barrier_fails_that_checkpoint_only() -> None:
    p = started()
    p.take()
    p.down = True
    assert not p.run(p.txns.barrier(1))
    assert p.take() == [FailCheckpoint(1, "down")]
    assert p.txns.open == 1 and p.txns.pending == []  # still open: staged next time
    p.down = False
    p.run(p.txns.barrier(2))
    assert p.take() == [PreCommit(1), Begin(2), PreCommit(2)]
    assert p.txns.pending == [1, 2]


def test_an_unavailable_sink_at_commit_defers_the_rest_and_retries_the_completion() -> None:
    p = started()
    for n in (1, 2):
        p.run(p.txns.barrier(n))
        p.run(p.txns.snapshot_taken(n))
    p.take()
    p.down = True
    p.run(p.txns.complete(2))
    assert p.take() == [RetryCommit(2)]  # nothing reported committed
    assert p.txns.pending == [1, 2] and p.txns.retry == 2
    p.down = False
    p.run(p.txns.complete(p.txns.retry))
    assert p.take() == [Commit(1), Commit(2), ReportCommitted(2)]
    assert p.txns.retry is None


def test_an_aborted_checkpoint_leaves_its_staged_transaction_for_the_next_completion() -> None:
    p = started()
    p.run(p.txns.barrier(1))
    p.run(p.txns.snapshot_taken(1))
    p.take()
    assert p.txns.abort(1) == []
    p.run(p.txns.barrier(2))
    p.run(p.txns.snapshot_taken(2))
    p.run(p.txns.complete(2))
    assert [s for s in p.take() if isinstance(s, Commit)] == [Commit(1), Commit(2)]


def test_a_begin_failing_after_the_snapshot_is_not_an_outcome_it_fails_the_task() -> None:
    p = started()
    p.run(p.txns.barrier(1))
    p.down = True
    with pytest.raises(SinkUnavailableError, match="Begin found the external system unavailable"):
        p.run(p.txns.snapshot_taken(1))


def test_a_sink_error_other_than_unavailable_fails_the_task() -> None:
    p = started()
    p.run(p.txns.barrier(1))
    p.run(p.txns.snapshot_taken(1))

    def fenced(step: SinkStep) -> None:
        raise SinkError("fenced: a newer generation owns this task")

    with pytest.raises(SinkError, match="fenced"):
        p.txns.run(p.txns.complete(1), fenced)
    assert p.txns.pending == [1]  # not committed, still staged for the next generation


def test_restore_below_the_id_floor_recovers_to_the_restored_checkpoint() -> None:
    """Hole 2: checkpoint 6's metadata write failed (floor 6), the task restores 5: staged
    transaction 6 is covered by nothing restored, so Recover(5) discards it; new ids start
    above the floor."""
    p = Performer(SinkTransactions([5]))
    p.run(p.txns.restore(5, id_floor=6))
    p.run(p.txns.start(7))
    assert p.take() == [Commit(5), Recover(5), ReportCommitted(5), Begin(7)]


def test_nothing_restored_after_ids_were_handed_out_recovers_to_zero() -> None:
    p = Performer(SinkTransactions())
    p.run(p.txns.restore(None, id_floor=4))
    assert p.take() == [Recover(0)]  # not a fresh run: this run's output is its own
    p.run(p.txns.restore(None, id_floor=0))
    assert p.take() == [Recover(None)]  # a fresh run


def test_an_unavailable_sink_at_restore_fails_the_prepare_and_keeps_the_staged_ids() -> None:
    # found by the deterministic simulator: a re-commit at restore that found the system
    # down used to be deferred like a completion's, with the snapshot's staged ids already
    # taken out of ``pending``, so they were never committed
    p = Performer(SinkTransactions([4, 5]))
    p.down = True
    with pytest.raises(SinkUnavailableError, match="Commit at restore found the external"):
        p.run(p.txns.restore(5))
    assert p.calls == []
    # the recovery restores again, from the same snapshot: the ids are committed then
    p = Performer(SinkTransactions([4, 5]))
    p.run(p.txns.restore(5))
    assert p.take() == [Commit(4), Commit(5), Recover(5), ReportCommitted(5)]


# -- TwoPhaseCommitSink's record of abandoned transactions (issue 37's mutation survivors)

class StagingSystem:
    """An external system that keeps staged rows and, per run, the ids recoveries
    discarded (as the Redis and PostgreSQL sinks do)."""

    def __init__(self) -> None:
        self.staged: dict[int, list[Any]] = {}
        self.visible: list[Any] = []
        self.abandoned: dict[str, set[int]] = {}


class StagedSink(TwoPhaseCommitSink):
    """A sink task over a :class:`StagingSystem`."""

    def __init__(self, system: StagingSystem) -> None:
        self.system = system

    def stage_transaction(self, checkpoint_id: int, rows: list[Any]) -> None:
        self.system.staged[checkpoint_id] = list(rows)

    def commit_transaction(self, checkpoint_id: int) -> None:
        if checkpoint_id in self.system.staged:
            self.system.visible += self.system.staged.pop(checkpoint_id)
        elif checkpoint_id in self.system.abandoned.get(self.abandoned_owner(checkpoint_id),
                                                        set()):
            raise self.abandoned_error(checkpoint_id, "the test's table")

    def abort_transaction(self, checkpoint_id: int) -> None:
        self.system.staged.pop(checkpoint_id, None)

    def abandon_transaction(self, checkpoint_id: int) -> None:
        self.system.abandoned.setdefault(self.fence_owner, set()).add(checkpoint_id)
        self.system.staged.pop(checkpoint_id, None)

    def staged_transactions(self) -> list[int]:
        return sorted(self.system.staged)

    def install_fence(self) -> None:
        pass


def sink_task(system: StagingSystem, run: RunIdentity) -> StagedSink:
    sink = StagedSink(system)
    sink.prepare({}, TopologyContext("orders", "out", 7, 0, 0, generation=1, run=run))
    return sink


def test_a_commit_of_a_transaction_a_recovery_discarded_is_refused_in_the_run_that_owns_it(
        ) -> None:
    """A recovery discards staged transaction 2 (it fell back past it) and records it
    under the run. Committing 2 later finds nothing staged: in that run, and in a run
    restored from a savepoint that lists 2 as pending (2 is the earlier run's), that is
    refused naming the discard, never taken for a normal commit with the rows silently
    missing; the restored run's own ids are looked up in its own record."""
    system = StagingSystem()
    first = sink_task(system, RunIdentity("run1"))
    first.pre_commit(2)
    first.recover(1)  # the recovery restored checkpoint 1: staged 2 is discarded
    assert system.staged == {} and system.abandoned == {"orders@run1": {2}}
    with pytest.raises(RestoreRefusedError, match="a recovery of this run discarded it"):
        first.commit(2)

    restored = sink_task(system, RunIdentity("run2", restored_from="run1",
                                             restored_through=3))
    with pytest.raises(RestoreRefusedError, match=r"the run it was taken from \(run1\)"):
        restored.commit(2)  # the savepoint of checkpoint 3 lists 2 as pending
    restored.pre_commit(4)
    restored.recover(3)
    restored.commit(3)  # nothing staged, discarded by nobody: a commit done before
    with pytest.raises(RestoreRefusedError, match="a recovery of this run discarded it"):
        restored.commit(4)


def test_a_sink_finds_its_own_transactions_by_name() -> None:
    """A sink names each staged transaction ``jstorm-<topology>-<task>-<checkpoint>`` (a
    PostgreSQL GID); at a recovery it lists the prepared transactions and must read back
    the checkpoint id of its own, and only of its own: another task's or another
    topology's are not its to commit or roll back."""
    sink = TwoPhaseCommitSink()
    sink.prepare({}, TopologyContext(topology="orders-eu", component="out", task_id=3,
                                     task_index=0, worker_id=1,
                                     component_tasks={"out": (3,)}, generation=1))
    for cid in (1, 17, 1_234_567_890):
        assert sink.parse_transaction_name(sink.transaction_name(cid)) == cid
    assert sink.parse_transaction_name("jstorm-orders_eu-31-17") is None
    assert sink.parse_transaction_name("jstorm-orders_us-3-17") is None
    assert sink.parse_transaction_name("other") is None
