"""The connector contract suite (docs/connectors.md): every source and sink passes it.

Use it like the state-backend contract: subclass :class:`SourceContract` or
:class:`SinkContract` in a test module and give it a ``harness`` fixture that starts the
real system and returns an object with the methods of :class:`SourceHarness` /
:class:`SinkHarness`. The tests drive the spout/sink exactly as the engine does (same call
order, same hooks) in this process, and check what a *fresh reader* of the real system
sees afterwards::

    class TestPostgresSink(SinkContract):
        @pytest.fixture
        def harness(self, postgres_server):
            return MyPgHarness(postgres_server)

Records are ``(key, seq, value)`` tuples (``key`` a str, ``seq``/``value`` ints).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pytest

from jstormpy.api.component import Spout, TopologyContext, Tuple, bind_task
from jstormpy.api.errors import FencedError, SinkError
from jstormpy.barrier.transactions import (
    Begin,
    Commit,
    PreCommit,
    Recover,
    SinkStep,
    SinkTransactions,
)
from jstormpy.barrier.twophase import Sink
from jstormpy.connectors.splits import owned_splits
from jstormpy.run_identity import RunIdentity

FIELDS = ("key", "seq", "value")
INDEX = {f: i for i, f in enumerate(FIELDS)}
TOPOLOGY = "contract"


def context(task_id: int = 1, generation: int = 1, task_index: int = 0, parallelism: int = 1,
            component: str = "c", topology: str = TOPOLOGY,
            run: RunIdentity | None = None) -> TopologyContext:
    """A task context like the worker builds (task ids ``1 .. parallelism``)."""
    tasks = tuple(range(task_id - task_index, task_id - task_index + parallelism))
    return TopologyContext(topology=topology, component=component, task_id=task_id,
                           task_index=task_index, worker_id=1,
                           component_tasks={component: tasks}, generation=generation,
                           run=run)


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``cond`` until it returns something truthy (returned) or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


# ------------------------------------------------------------------------------ sinks


class SinkHarness(Protocol):
    """What a sink test module provides (started real system, fresh readers)."""

    def make_sink(self) -> Sink:
        """A new, unprepared sink instance writing ``(key, seq, value)`` rows."""

    def committed(self) -> list[dict[str, Any]]:
        """Every committed row, read with a fresh connection/consumer, in commit order
        (per sink task), as dicts with at least ``key``, ``seq``, ``value``."""

    def staged(self) -> list[str]:
        """Names of staged (pre-committed, not committed) transactions of every task."""


def capability(harness: SinkHarness, name: str) -> Any:
    """A harness's optional declaration of what its system cannot do (default: can).

    * ``staged_limit`` (int, default unlimited): how many staged transactions per task the
      system itself holds; the rest wait in the task's checkpoint (Kafka: one open
      transaction per ``transactional.id``).
    * ``recovers_unlisted`` (bool, default True): recovery to ``c`` commits staged
      transactions ``<= c`` even without the restored snapshot's pending list (Kafka
      cannot: their records live in the checkpoint, so it needs the list the engine gives).
    * ``fences`` (bool, default True): the system stops a zombie (librdkafka's mock
      cluster does not).
    """
    defaults = {"staged_limit": None, "recovers_unlisted": True, "fences": True}
    return getattr(harness, name, defaults[name])


class SinkDriver:
    """Drives one sink task as the engine does: through the engine's own protocol object,
    :class:`~jstormpy.barrier.transactions.SinkTransactions`, whose steps it performs on
    the sink (the host's steps -- reporting to the Topology Master -- have no host here).

    Like the engine, it snapshots the sink's managed state at each barrier into
    ``snapshots`` (checkpoint id -> (state, pending ids)); a driver made with ``restored=c``
    and the previous driver's ``snapshots`` restores checkpoint ``c``'s state into the new
    sink before ``prepare``. ``pending=None``: the pending ids the restored snapshot lists.
    ``floor``: the id floor the Topology Master sends with the restore (the highest
    checkpoint id it handed out before); new transactions start above it. ``run``: the
    task's run identity (``TopologyContext.run``; None: a run older than run identities).
    """

    def __init__(self, harness: SinkHarness, task_id: int = 1, generation: int = 1,
                 restored: int | None = None, pending: Sequence[int] | None = (),
                 snapshots: dict[int, Any] | None = None, floor: int = 0,
                 run: RunIdentity | None = None) -> None:
        self.sink = harness.make_sink()
        self.snapshots: dict[int, Any] = snapshots if snapshots is not None else {}
        saved = self.snapshots.get(restored) if restored is not None else None
        if saved is not None:
            self.sink.__dict__["_jstorm_states"] = copy.deepcopy(saved[0])
        staged: list[int] = list(saved[1]) if saved is not None else []
        if pending is not None:
            staged = list(pending)
        self.txns = SinkTransactions(staged)
        self.sink.prepare({}, context(task_id=task_id, generation=generation, run=run))
        self._run(self.txns.restore(restored, floor))
        self.txn = max(restored or 0, floor) + 1
        self._run(self.txns.start(self.txn))

    @property
    def pending(self) -> list[int]:
        """Staged transactions not yet committed, as the task snapshot lists them."""
        return list(self.txns.pending)

    def _run(self, steps: list[SinkStep]) -> None:
        self.txns.run(steps, self._perform)

    def _perform(self, step: SinkStep) -> None:
        match step:
            case Begin(txn):
                self.sink.begin(txn)
            case PreCommit(txn):
                self.sink.pre_commit(txn)
            case Commit(txn):
                self.sink.commit(txn)
            case Recover(restored):
                self.sink.recover(restored)

    def write(self, rows: Sequence[tuple[str, int, int]]) -> None:
        """Feed rows to the open transaction."""
        for r in rows:
            self.sink.execute(Tuple(r, INDEX, "src", "default", 0))

    def barrier(self) -> int:
        """Barrier of the open transaction: pre-commit it, open the next; its id."""
        n = self.txn
        self._run(self.txns.barrier(n))
        self.snapshots[n] = (copy.deepcopy(self.sink.__dict__.get("_jstorm_states", {})),
                             self.pending)
        self._run(self.txns.snapshot_taken(n))
        self.txn = n + 1
        return n

    def complete(self, n: int) -> None:
        """Checkpoint ``n`` completed: commit every staged id ``<= n``."""
        self._run(self.txns.complete(n))

    def close(self) -> None:
        """Stop the task (no commit, no abort: like a crash or a stop)."""
        self.sink.cleanup()


def rows_for(key: str, seqs: range) -> list[tuple[str, int, int]]:
    """``(key, seq, seq * 7 % 13)`` rows."""
    return [(key, s, s * 7 % 13) for s in seqs]


def triples(rows: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """Committed rows as comparable ``(key, seq, value)`` triples."""
    return [(str(r["key"]), int(r["seq"]), int(r["value"])) for r in rows]


def check_recovery_below_the_id_floor(harness: SinkHarness) -> None:
    """Checkpoint 2's commit point (its ``_metadata``) could not be written, then a worker
    died: the Topology Master restores checkpoint 1 and hands out ids above 2 (its id
    floor). Transaction 2, staged by the sink, is covered by no completed checkpoint and the
    replay produces its rows again, so the recovery must discard it, not publish it."""
    d = SinkDriver(harness)
    d.write(rows_for("a", range(4)))
    first = d.barrier()
    d.complete(first)
    d.write(rows_for("a", range(4, 8)))
    failed = d.barrier()  # staged; the checkpoint's metadata write then failed
    d.close()  # a worker dies
    d2 = SinkDriver(harness, generation=2, restored=first, pending=None,
                    snapshots=d.snapshots, floor=failed)
    assert triples(harness.committed()) == rows_for("a", range(4)), (
        f"recovery to checkpoint {first} published transaction {failed}, which no "
        "completed checkpoint covers")
    assert harness.staged() == [], "recovery left a staged transaction behind"
    assert d2.txn == failed + 1, "a new transaction reuses an id handed out before"
    d2.write(rows_for("a", range(4, 8)))  # the replay of checkpoint 2's input
    d2.complete(d2.barrier())
    assert triples(harness.committed()) == rows_for("a", range(8))
    d2.close()


class SinkContract:
    """Two-phase-commit sink contract. Subclasses provide the ``harness`` fixture."""

    @pytest.fixture
    def harness(self) -> SinkHarness:
        """Overridden by every concrete test class."""
        raise NotImplementedError

    def test_pre_commit_is_invisible_until_commit(self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        d.write(rows_for("a", range(5)))
        assert harness.committed() == []
        n = d.barrier()
        assert harness.committed() == [], "pre-committed rows are visible before commit"
        assert harness.staged() == [f"jstorm-{TOPOLOGY}-1-{n}"]
        d.complete(n)
        assert triples(harness.committed()) == rows_for("a", range(5))
        assert harness.staged() == []
        d.close()

    def test_order_kept_within_and_across_transactions(self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        expected: list[tuple[str, int, int]] = []
        for i in range(3):
            rows = rows_for("a", range(i * 10, i * 10 + 10)) + rows_for("b", range(i, i + 1))
            d.write(rows)
            expected += rows
            d.complete(d.barrier())
        assert triples(harness.committed()) == expected
        d.close()

    def test_commit_is_idempotent_and_works_from_a_new_process(
            self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        d.write(rows_for("a", range(3)))
        n = d.barrier()
        d.close()  # crash after the snapshot: the restored snapshot lists n as pending
        d2 = SinkDriver(harness, generation=2, restored=n, pending=[n], snapshots=d.snapshots)
        d2.complete(n)  # again: a no-op
        d2.sink.commit(n)
        assert triples(harness.committed()) == rows_for("a", range(3))
        assert harness.staged() == []
        d2.close()

    def test_empty_transaction_commits_nothing(self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        d.complete(d.barrier())
        assert harness.committed() == []
        assert harness.staged() == []
        d.close()

    def test_abort_discards_open_and_staged(self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        d.write(rows_for("a", range(3)))
        n = d.barrier()
        d.sink.abort(n)
        d.write(rows_for("b", range(2)))
        d.sink.abort(d.txn)
        d.sink.begin(d.txn)
        d.write(rows_for("c", range(2)))
        d.complete(d.barrier())
        d.sink.commit(n)  # aborted: stays discarded
        assert triples(harness.committed()) == rows_for("c", range(2))
        assert harness.staged() == []
        d.close()

    def test_recovery_commits_covered_and_aborts_the_rest(self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        staged = []
        for i in range(3):
            d.write(rows_for("a", range(i * 4, i * 4 + 4)))
            staged.append(d.barrier())
        d.write(rows_for("a", range(100, 104)))  # open, never staged
        d.close()  # crash between pre-commit and commit, three transactions staged
        limit = capability(harness, "staged_limit")
        assert len(harness.staged()) == (3 if limit is None else min(3, limit))
        # restored checkpoint covers the first two; its snapshot was taken before they were
        # committed but this recovery does not rely on the pending list (unless the
        # harness says it must: then the engine's list, the first two)
        unlisted = capability(harness, "recovers_unlisted")
        d2 = SinkDriver(harness, generation=2, restored=staged[1],
                        pending=() if unlisted else None, snapshots=d.snapshots)
        assert triples(harness.committed()) == rows_for("a", range(8))
        assert harness.staged() == [], "recovery left prepared transactions behind"
        d2.write(rows_for("a", range(8, 12)))
        d2.complete(d2.barrier())
        assert triples(harness.committed()) == rows_for("a", range(12))
        d2.close()

    def test_recovery_below_the_id_floor_discards_the_uncovered_transaction(
            self, harness: SinkHarness) -> None:
        check_recovery_below_the_id_floor(harness)

    def test_fresh_start_aborts_every_staged_transaction(self, harness: SinkHarness) -> None:
        d = SinkDriver(harness)
        d.write(rows_for("a", range(3)))
        d.barrier()
        d.close()
        d2 = SinkDriver(harness, generation=2, restored=None)
        assert harness.staged() == []
        assert harness.committed() == []
        d2.close()

    def test_zombie_cannot_stage_or_commit(self, harness: SinkHarness) -> None:
        if not capability(harness, "fences"):
            pytest.skip("this system does not fence zombies (see the harness)")
        zombie = SinkDriver(harness, generation=1)
        zombie.write(rows_for("z", range(3)))
        n = zombie.barrier()  # staged by generation 1
        zombie.write(rows_for("z", range(3, 6)))
        # generation 2 takes the task over, restored to nothing: n is not covered
        fresh = SinkDriver(harness, generation=2, restored=None)
        with pytest.raises(FencedError):
            zombie.barrier()
        with pytest.raises(SinkError):
            zombie.complete(n)
        fresh.write(rows_for("a", range(2)))
        fresh.complete(fresh.barrier())
        assert triples(harness.committed()) == rows_for("a", range(2))
        assert harness.staged() == []
        zombie.close()
        fresh.close()

    def test_tasks_only_touch_their_own_transactions(self, harness: SinkHarness) -> None:
        t1 = SinkDriver(harness, task_id=1)
        t1.write(rows_for("a", range(2)))
        n = t1.barrier()
        t2 = SinkDriver(harness, task_id=2, generation=2, restored=None)  # task 2 restarts
        assert harness.staged() == [f"jstorm-{TOPOLOGY}-1-{n}"]
        t2.write(rows_for("b", range(2)))
        t2.complete(t2.barrier())
        t1.complete(n)
        assert sorted(triples(harness.committed())) == rows_for("a", range(2)) + rows_for(
            "b", range(2))
        t1.close()
        t2.close()


class StagedSinkContract(SinkContract):
    """The contract of sinks whose staged transactions live in the external system
    (:class:`~jstormpy.connectors.twophase.TwoPhaseCommitSink`: PostgreSQL, Redis Streams):
    what a savepoint restore into their used output does (issue 23, seed 1032215)."""

    def test_a_savepoint_restore_refuses_a_transaction_its_run_abandoned_in_a_fallback(
            self, harness: SinkHarness) -> None:
        """Issue 23, simulator seed 1032215, for sinks that stage in the external system.

        The first run completes checkpoint 2 (a savepoint is taken from it), but the sink task
        had not committed transaction 2 when a lost shared file made the run fall back past 2 to
        checkpoint 1: the recovery discards staged 2 (rows deleted) and the replay re-emits that
        span under new ids; here the run stops partway through it. A second run restores the
        savepoint into the same output: its state continues after checkpoint 2, so transaction
        2's rows belong in the output, but they are gone. The restore must refuse with an error
        naming the savepoint's checkpoint, never publish nothing and go on (a silent loss)."""
        earlier = RunIdentity("earlier", 1)
        d = SinkDriver(harness, run=earlier)
        d.write(rows_for("a", range(4)))
        one = d.barrier()
        d.complete(one)
        d.write(rows_for("a", range(4, 8)))
        two = d.barrier()  # checkpoint 2 completes, the savepoint is taken from it
        d.close()  # the task dies before commit(2)
        # the fallback past 2 to 1: ids go on above the ones handed out (the reservation)
        f = SinkDriver(harness, generation=2, restored=one, pending=None, snapshots=d.snapshots,
                       floor=100, run=earlier)
        assert harness.staged() == [], "the fallback to checkpoint 1 kept staged transaction 2"
        f.write(rows_for("a", range(4, 6)))  # part of the replay, then the first run stops
        f.complete(f.barrier())
        f.close()
        before = triples(harness.committed())
        assert before == rows_for("a", range(6))
        restored = RunIdentity.from_savepoint(earlier, two).taken_over()
        with pytest.raises(SinkError, match=rf"savepoint.*checkpoint {two}") as err:
            SinkDriver(harness, restored=two, pending=None, snapshots=d.snapshots, floor=two,
                       run=restored)
        assert "fresh output" in str(err.value) and "older savepoint" in str(err.value), (
            f"the error does not say what to do: {err.value}")
        assert triples(harness.committed()) == before, "the refused restore changed the output"

    def test_a_savepoint_restore_recommits_a_committed_transaction_as_a_no_op(
            self, harness: SinkHarness) -> None:
        """The counterpart: the run that took the savepoint committed transaction 2 normally
        (and discarded a later one in a recovery); restoring the savepoint of checkpoint 2
        re-commits 2 as a no-op, publishes nothing twice, and the restored run goes on. An
        older run of the same topology, killed with transaction 2 staged, left it behind: the
        next run's first recovery discards it, but as that older run's, not its own (the
        names carry no run) -- it must not make the restore refuse."""
        killed = SinkDriver(harness, run=RunIdentity("killed", 1))
        killed.write([("z", 0, 0)])
        killed.complete(killed.barrier())
        killed.write([("z", 1, 7)])
        killed.barrier()  # staged 2, then the run is killed and never recovers
        killed.close()
        prefix = [("z", 0, 0)]
        earlier = RunIdentity("earlier", 1)
        d = SinkDriver(harness, run=earlier)  # a fresh run: discards the killed run's 2
        assert harness.staged() == []
        d.write(rows_for("a", range(4)))
        one = d.barrier()
        d.complete(one)
        d.write(rows_for("a", range(4, 8)))
        two = d.barrier()
        d.complete(two)
        d.write(rows_for("a", range(8, 10)))
        d.barrier()  # staged 3, never completed
        d.close()
        f = SinkDriver(harness, generation=2, restored=two, pending=None, snapshots=d.snapshots,
                       floor=3, run=earlier)  # discards 3
        f.close()
        restored = RunIdentity.from_savepoint(earlier, two).taken_over()
        r = SinkDriver(harness, restored=two, pending=[two], snapshots=d.snapshots, floor=two,
                       run=restored)
        r.write(rows_for("a", range(8, 10)))
        r.complete(r.barrier())
        r.close()
        assert triples(harness.committed()) == prefix + rows_for("a", range(10))


# ------------------------------------------------------------------------------ sources


class SourceHarness(Protocol):
    """What a source test module provides."""

    splits: list[str]
    """Split ids, as the spout names them in its snapshot's ``offsets``."""

    def produce(self, split: str, records: Sequence[tuple[str, str]],
                timestamp_ms: int | None = None) -> None:
        """Append ``(key, value)`` records to ``split`` of the real system (with an event
        time, if given)."""

    def make_spout(self, idle_timeout_ms: float | None = None) -> Spout:
        """A new, unopened spout over every split."""

    def decode(self, values: Sequence[Any]) -> tuple[str, str, str]:
        """``(split, key, value)`` of an emitted tuple."""

    def released_offsets(self) -> dict[str, Any] | None:
        """Offsets the job released to the system (a consumer-group commit, ...), read
        fresh; ``None`` if this connector never writes its position to the system."""


class _Recorder:
    def __init__(self) -> None:
        self.tuples: list[Sequence[Any]] = []
        self.watermarks: list[float] = []

    def emit(self, values: Sequence[Any], stream: str = "default") -> None:
        self.tuples.append(tuple(values))

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = "default") -> None:
        self.tuples.append(tuple(values))

    def emit_watermark(self, wm: float) -> None:
        self.watermarks.append(wm)


class SpoutDriver:
    """Drives one spout task as the engine does (restore, open, next_tuple, checkpoints)."""

    def __init__(self, harness: SourceHarness, snap: Any = None, task_index: int = 0,
                 parallelism: int = 1, idle_timeout_ms: float | None = None) -> None:
        self.harness = harness
        self.spout = harness.make_spout(idle_timeout_ms=idle_timeout_ms)
        self.out = _Recorder()
        bind_task(self.spout, self.out, None)
        if snap is not None:
            self.spout.restore(snap)
        self.spout.open({}, context(task_id=task_index + 1, task_index=task_index,
                                    parallelism=parallelism))

    def read(self, n: int, timeout: float = 10.0) -> list[tuple[str, str, str]]:
        """Call ``next_tuple`` until ``n`` more tuples came out; them, decoded. ``n`` must be
        everything produced and not yet read (a spout emits in batches)."""
        start = len(self.out.tuples)

        def enough() -> bool:
            self.spout.next_tuple()
            return len(self.out.tuples) - start >= n

        wait_for(enough, timeout, f"{n} records from the spout")
        got = self.out.tuples[start:start + n]
        assert len(self.out.tuples) - start == n, "spout emitted more than was produced"
        return [self.harness.decode(v) for v in got]

    def checkpoint(self, cid: int) -> Any:
        """Take the snapshot of checkpoint ``cid`` (engine order: hook, then snapshot)."""
        hook = getattr(self.spout, "before_snapshot", None)
        if callable(hook):
            hook(cid)
        return self.spout.snapshot()

    def complete(self, cid: int) -> None:
        """Checkpoint ``cid`` completed."""
        hook = getattr(self.spout, "on_checkpoint_complete", None)
        if callable(hook):
            hook(cid)

    def close(self) -> None:
        """Stop the task."""
        self.spout.close()


def produce_numbered(harness: SourceHarness, per_split: int, start: int = 0) -> None:
    """``per_split`` records ``(f"{split}-k", str(i))`` on every split."""
    for s in harness.splits:
        harness.produce(s, [(f"{s}-k", str(i)) for i in range(start, start + per_split)])


def numbered(harness: SourceHarness, per_split: int, start: int = 0) -> list[tuple[str, str, str]]:
    """What :func:`produce_numbered` wrote, as decoded tuples."""
    return [(s, f"{s}-k", str(i)) for s in harness.splits for i in range(start, start + per_split)]


def by_split(recs: list[tuple[str, str, str]]) -> dict[str, list[tuple[str, str, str]]]:
    """Records grouped per split, order kept."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for r in recs:
        out.setdefault(r[0], []).append(r)
    return out


class SourceContract:
    """Replayable-source contract. Subclasses provide the ``harness`` fixture (two or more
    splits)."""

    @pytest.fixture
    def harness(self) -> SourceHarness:
        """Overridden by every concrete test class."""
        raise NotImplementedError

    def test_reads_every_split_in_order(self, harness: SourceHarness) -> None:
        assert len(harness.splits) >= 2
        produce_numbered(harness, 20)
        d = SpoutDriver(harness)
        got = d.read(20 * len(harness.splits))
        assert by_split(got) == by_split(numbered(harness, 20))
        d.close()

    def test_snapshot_holds_an_offset_per_split(self, harness: SourceHarness) -> None:
        produce_numbered(harness, 3)
        d = SpoutDriver(harness)
        d.read(3 * len(harness.splits))
        snap = d.checkpoint(1)
        assert set(snap["offsets"]) == set(harness.splits)
        d.close()

    def test_restore_rewinds_to_the_checkpoint(self, harness: SourceHarness) -> None:
        n = len(harness.splits)
        produce_numbered(harness, 5)
        d = SpoutDriver(harness)
        first = d.read(5 * n)
        snap = d.checkpoint(1)
        produce_numbered(harness, 15, start=5)
        rest = d.read(15 * n)
        d.close()
        assert by_split(first + rest) == by_split(numbered(harness, 20))
        replay = SpoutDriver(harness, snap=snap)  # rollback to checkpoint 1
        again = replay.read(15 * n)
        assert by_split(again) == by_split(rest), "replay differs from the original run"
        replay.close()

    def test_offsets_never_released_ahead_of_the_checkpoint(
            self, harness: SourceHarness) -> None:
        if harness.released_offsets() is None:
            pytest.skip("this connector keeps its position only in the checkpoint")
        produce_numbered(harness, 4)
        d = SpoutDriver(harness)
        d.read(4 * len(harness.splits))
        snap1 = d.checkpoint(1)
        assert not harness.released_offsets(), "offsets released before the checkpoint completed"
        produce_numbered(harness, 6, start=4)
        d.read(6 * len(harness.splits))
        d.checkpoint(2)  # taken, never completed
        d.complete(1)
        # a connector may release asynchronously (KafkaSpout's group commit): wait for it
        wait_for(lambda: harness.released_offsets() == snap1["offsets"], 10.0,
                 f"the offsets of checkpoint 1 ({snap1['offsets']}) to be released")
        d.close()

    def test_parallel_tasks_read_disjoint_splits(self, harness: SourceHarness) -> None:
        produce_numbered(harness, 5)
        got: list[tuple[str, str, str]] = []
        for i in range(2):  # task i of 2 owns every 2nd split of the sorted list
            mine = owned_splits(harness.splits, i, 2)
            d = SpoutDriver(harness, task_index=i, parallelism=2)
            share = d.read(5 * len(mine)) if mine else []
            assert {r[0] for r in share} == set(mine)
            assert set(d.checkpoint(1)["offsets"]) == set(mine)
            got += share
            d.close()
        assert sorted(got) == sorted(numbered(harness, 5))

    def test_watermark_is_the_minimum_over_active_splits(self, harness: SourceHarness) -> None:
        t0 = 1_700_000_000_000
        for i, s in enumerate(harness.splits):
            harness.produce(s, [("k", "0")], timestamp_ms=t0 + 1000 * (i + 1))
        d = SpoutDriver(harness, idle_timeout_ms=60_000)
        d.read(len(harness.splits))
        wait_for(lambda: (d.spout.next_tuple(), d.out.watermarks)[1], 5.0, "a watermark")
        assert max(d.out.watermarks) <= t0 + 1000, (
            f"watermark {max(d.out.watermarks)} ran ahead of the slowest split (event time "
            f"{t0 + 1000})")
        d.close()

    def test_idle_split_marks_itself_idle(self, harness: SourceHarness) -> None:
        busy, quiet = harness.splits[0], harness.splits[1]
        d = SpoutDriver(harness, idle_timeout_ms=300)
        t0 = 1_700_000_000_000
        i = 0

        def quiet_is_idle() -> bool:
            nonlocal i
            i += 1
            harness.produce(busy, [("k", str(i))], timestamp_ms=t0 + i)
            d.spout.next_tuple()
            return quiet in d.spout.idle_splits() and busy not in d.spout.idle_splits()

        wait_for(quiet_is_idle, 10.0, f"split {quiet} to mark itself idle")
        wait_for(lambda: (d.spout.next_tuple(), d.out.watermarks)[1], 5.0,
                 "a watermark while one split is idle")
        assert d.out.watermarks[-1] >= t0 + 1, "the idle split held the watermark back"
        assert d.out.watermarks == sorted(d.out.watermarks)
        d.close()
