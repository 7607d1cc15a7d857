"""The task side of a sink's two-phase commit, free of I/O: events in, steps out.

:class:`SinkTransactions` is the one place that decides which transaction of a sink task
is open, which are staged (pre-committed) and waiting for a completed checkpoint, and what
to do on each protocol event. It never calls the sink, a clock or a thread: every event
returns the :data:`SinkStep` s to perform, in order, and the performer (the task executor,
the connector contract suite, the deterministic simulator) reports each one back with
:meth:`SinkTransactions.performed` or :meth:`SinkTransactions.failed`. Performing the same
events against the same outcomes always gives the same steps.

The protocol (``docs/checkpointing.md``; the sink contract is :mod:`jstormpy.barrier.twophase`):

* restore to completed checkpoint ``c`` (``None``: a fresh run), whose snapshot lists the
  staged ids ``pending`` (all ``<= c``): ``Commit(p)`` for each (idempotent: some may be
  committed already), then ``Recover(c)`` (the sink discards whatever else of this task
  is open or staged above ``c``, whoever left it, even ids below the floor), then
  ``ReportCommitted(c)``: everything up to ``c`` is visible now (the Topology Master counts
  it only in the generation it is waiting in: a gray release restores a batch of workers
  in the current one, and may be waiting for ``c`` to drain); then, when
  the task starts, ``Begin(f + 1)``, where ``f`` is the Topology Master's id floor, above
  every id any sink may have seen;
* barrier ``n``: ``PreCommit(n)`` of the open transaction (if earlier barriers never
  reached this task, the open transaction is older: it is staged under its own id first,
  and committed together with ``n``); then the task snapshot, which lists the staged ids;
  then ``Begin(n + 1)``;
* checkpoint ``n`` completed: ``Commit(p)`` for each staged ``p <= n``, in order, then
  ``ReportCommitted(n)``. A commit that finds the external system unavailable stops there
  and asks for ``RetryCommit(n)``; the rest stay staged, the task keeps running;
* checkpoint ``n`` aborted by the Topology Master: nothing. A staged transaction's records
  all precede the next barrier, so the next completed checkpoint covers them and commits
  them (Flink's ``TwoPhaseCommitSinkFunction`` does the same). Aborting it would lose them;
* a rollback: the next generation's ``Recover`` discards the void generation's open and
  staged transactions above the restored checkpoint (only it knows which checkpoint was
  restored; the old process may be dead). ``Sink.abort`` is the sink's own primitive for
  that discard; the engine has no other moment at which a transaction may be aborted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jstormpy.api.errors import SinkUnavailableError


@dataclass(frozen=True)
class Begin:
    """Open transaction ``txn`` (the one barrier ``txn`` will close)."""

    txn: int


@dataclass(frozen=True)
class PreCommit:
    """Stage transaction ``txn``: durable, invisible to readers."""

    txn: int


@dataclass(frozen=True)
class Commit:
    """Make staged transaction ``txn`` visible (idempotent)."""

    txn: int


@dataclass(frozen=True)
class Recover:
    """Discard everything of this task open or staged above ``restored`` (or everything,
    on a fresh run: ``None``) and commit what is staged at or below it."""

    restored: int | None


@dataclass(frozen=True)
class ReportCommitted:
    """Tell the Topology Master that everything up to checkpoint ``checkpoint_id`` is
    committed by this task."""

    checkpoint_id: int


@dataclass(frozen=True)
class FailCheckpoint:
    """Tell the Topology Master this task cannot take part in ``checkpoint_id``."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class RetryCommit:
    """Perform :meth:`SinkTransactions.complete` for ``checkpoint_id`` again later (the
    performer owns the clock)."""

    checkpoint_id: int


SinkStep = Begin | PreCommit | Commit | Recover | ReportCommitted | FailCheckpoint | RetryCommit
"""One step of the protocol: the first four are calls on the sink, the rest on the host."""


class SinkTransactions:
    """Which transactions of one sink task are open and staged; the steps each event needs.

    Args:
        pending: The staged ids the restored snapshot lists (empty on a fresh run).
    """

    def __init__(self, pending: Sequence[int] = ()) -> None:
        self.open: int | None = None
        self.pending: list[int] = sorted(pending)
        self.retry: int | None = None  # a completion whose commits were deferred
        self._barrier = 0  # the barrier / completion whose steps are being performed
        self._completion = 0
        self._in_barrier = False  # a Begin that fails within a barrier fails the checkpoint
        self._restoring = False  # between restore() and start(): a failure fails the prepare

    # -- events ----------------------------------------------------------------------------
    def restore(self, restored: int | None, id_floor: int = 0) -> list[SinkStep]:
        """After the sink's ``prepare``: re-commit the restored snapshot's staged ids, then
        recover to the *restored* checkpoint.

        A transaction staged above ``restored`` is covered by no checkpoint the task
        restores, and the replay produces its records again, so ``Recover`` must discard
        it even when its id is at or below ``id_floor`` (its checkpoint's metadata write
        failed: issue 23, hole 2). ``id_floor`` only names new transactions (:meth:`start`
        with ``id_floor + 1``). When nothing is restored but ids were handed out before
        (``id_floor > 0``), the step is ``Recover(0)``: nothing of the task is covered, yet
        this is not a fresh run, so output committed earlier in it is not an earlier run's.
        """
        self._restoring = True
        staged, self.pending = self.pending, []
        steps: list[SinkStep] = [Commit(p) for p in staged]  # all at or below ``restored``
        if restored is None and id_floor > 0:
            restored = 0
        steps.append(Recover(restored))
        if restored:
            # a gray release's restarted worker may have exited before it reported the
            # commit of its quiescent checkpoint; when that checkpoint is the final one,
            # the TM waits for this report to declare the job drained (found by the
            # deterministic simulator)
            steps.append(ReportCommitted(restored))
        return steps

    def start(self, first_txn: int) -> list[SinkStep]:
        """The task starts: open its first transaction."""
        self._restoring = False
        return [Begin(first_txn)]

    def barrier(self, checkpoint_id: int) -> list[SinkStep]:
        """Barrier ``checkpoint_id`` reached the sink (aligned): stage what is open."""
        self._barrier = checkpoint_id
        self._in_barrier = True
        steps: list[SinkStep] = []
        if self.open is not None and self.open < checkpoint_id:
            # earlier barriers never reached this task (it was respawned, or the sink was
            # unavailable then): stage the open transaction under its own id; it commits
            # together with this checkpoint
            steps += [PreCommit(self.open), Begin(checkpoint_id)]
        steps.append(PreCommit(checkpoint_id))
        return steps

    def snapshot_taken(self, checkpoint_id: int) -> list[SinkStep]:
        """The task snapshot of ``checkpoint_id`` (listing :attr:`pending`) was captured:
        open the next transaction."""
        self._in_barrier = False
        return [Begin(checkpoint_id + 1)]

    def complete(self, checkpoint_id: int) -> list[SinkStep]:
        """Checkpoint ``checkpoint_id`` completed: commit every staged id at or below it."""
        self.retry = None
        self._completion = checkpoint_id
        steps: list[SinkStep] = [Commit(p) for p in self.pending if p <= checkpoint_id]
        steps.append(ReportCommitted(checkpoint_id))
        return steps

    def abort(self, checkpoint_id: int) -> list[SinkStep]:
        """The Topology Master aborted ``checkpoint_id``: nothing to undo (module docstring)."""
        return []

    # -- performing ------------------------------------------------------------------------
    def run(self, steps: list[SinkStep], perform: Callable[[SinkStep], None]) -> bool:
        """Perform ``steps`` in order with ``perform`` and report each outcome; False if the
        external system was unavailable (``perform`` raised :class:`SinkUnavailableError`),
        in which case the replacement steps of :meth:`failed` were performed instead of the
        rest. Any other exception propagates: it fails the task."""
        todo = deque(steps)
        ok = True
        while todo:
            step = todo.popleft()
            try:
                perform(step)
            except SinkUnavailableError as exc:
                ok = False
                todo = deque(self.failed(step, str(exc)))
                continue
            self.performed(step)
        return ok

    # -- outcomes --------------------------------------------------------------------------
    def performed(self, step: SinkStep) -> None:
        """``step`` succeeded: move the transactions on."""
        if isinstance(step, Begin):
            self.open = step.txn
        elif isinstance(step, PreCommit):
            if self.open == step.txn:
                self.open = None
            if step.txn not in self.pending:
                self.pending.append(step.txn)
                self.pending.sort()
        elif isinstance(step, Commit) and step.txn in self.pending:
            self.pending.remove(step.txn)

    def failed(self, step: SinkStep, reason: str) -> list[SinkStep]:
        """``step`` found the external system unavailable: the steps that replace the rest
        of the event's steps. Other errors are not outcomes: they fail the task.

        Raises:
            SinkUnavailableError: during a restore (the staged ids of the snapshot would be
                forgotten unperformed): the prepare fails and the recovery restores again.
        """
        if self._restoring:
            raise SinkUnavailableError(f"{type(step).__name__} at restore found the external "
                                       f"system unavailable: {reason}; the worker's prepare "
                                       "fails and the recovery restores again")
        if isinstance(step, PreCommit) or (isinstance(step, Begin) and self._in_barrier):
            # give this checkpoint up; what is open stays open and is staged at the next
            # barrier (with the staged ids it already has)
            return [FailCheckpoint(self._barrier, reason)]
        if isinstance(step, Commit):
            self.retry = self._completion
            return [RetryCommit(self._completion)]
        # a transaction that cannot be opened outside a barrier: the task cannot go on
        # without one; it fails, and the recovery restores it
        raise SinkUnavailableError(f"{type(step).__name__} found the external system "
                                   f"unavailable: {reason}; the task fails and recovers")
