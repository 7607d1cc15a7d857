"""Two-phase-commit sinks: the contract between the checkpoint engine and external outputs.

A :class:`Sink` groups its input into transactions delimited by checkpoint barriers:
transaction ``n`` holds the tuples that arrived between barrier ``n-1`` and barrier ``n``.
The engine (not the sink) drives the protocol:

* fresh start, or restore to completed checkpoint ``c`` (``c`` is ``None`` on a fresh start):
  ``prepare()``; ``commit(p)`` for every ``p`` the restored snapshot lists as
  pre-committed but not yet committed (all ``<= c``); ``recover(c)``; ``begin(f + 1)``
  where ``f >= c`` is the Topology Master's id floor (``begin(1)`` on a fresh start):
  ids handed out above ``c`` before the recovery are never reused. The engine's side of
  every step lives in :class:`jstormpy.barrier.transactions.SinkTransactions`.
* barrier ``n`` reaches the sink: ``pre_commit(n)``; the task snapshot is taken;
  ``begin(n + 1)``.
* checkpoint ``n`` completes (every task snapshotted): ``commit(p)`` for each pending
  ``p <= n``.

Tasks of one sink component run concurrently in different processes; each must only
touch its own transactions, told apart by ``context.task_id`` (given to ``prepare``).
"""

from __future__ import annotations

from jstormpy.api.batch import Batch
from jstormpy.api.component import Bolt, Tuple


class Sink(Bolt):
    """Two-phase-commit sink. Transaction n holds the tuples that arrived between barrier n-1
    and barrier n.

    Subclasses implement the six transaction methods below; ``execute`` forwards every input
    tuple to :meth:`write`. Like every component, a sink's constructor should only store its
    arguments: the engine pickles the instance and makes one copy per task, then calls
    ``prepare`` in the task's process.
    """

    commits_in_two_phases = True

    def begin(self, checkpoint_id: int) -> None:
        """Open the transaction that barrier ``checkpoint_id`` will close.

        Args:
            checkpoint_id: The id of the checkpoint whose barrier ends this transaction.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Sink.begin")

    def write(self, tup: Tuple) -> None:
        """Add one tuple to the open transaction.

        Args:
            tup: The input tuple.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Sink.write")

    def pre_commit(self, checkpoint_id: int) -> None:
        """Make the open transaction durable but invisible to readers (staged).

        After this returns, the transaction must survive a crash of this process, and a later
        ``commit(checkpoint_id)`` — possibly by another process — must be able to publish it.

        Args:
            checkpoint_id: The id of the open transaction (the barrier just received).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Sink.pre_commit")

    def commit(self, checkpoint_id: int) -> None:
        """Make the staged transaction visible.

        Must be idempotent: calling it again, after a crash and restart or otherwise, for an
        already committed transaction is a no-op and raises nothing.

        Args:
            checkpoint_id: The id of a pre-committed transaction.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Sink.commit")

    def abort(self, checkpoint_id: int) -> None:
        """Discard an open or staged transaction (never a committed one).

        Args:
            checkpoint_id: The id of the transaction to discard.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Sink.abort")

    def recover(self, completed_id: int | None) -> None:
        """Discard leftovers of earlier processes/generations of this task.

        Called after ``prepare`` and the re-commits of the restored pending transactions, and
        before any write: everything of *this task* that is open (in progress) or staged with
        an id greater than ``completed_id`` must be discarded, whoever left it.

        Args:
            completed_id: The checkpoint the task was restored to, or ``None`` on a fresh
                start (then every open or staged transaction of this task is discarded).
                ``0``: a recovery that restored no checkpoint of a run that already handed
                out ids (everything open or staged is discarded, as on a fresh start, but
                committed output is this run's, not an earlier one's). Transactions
                above ``completed_id`` must be discarded even when the engine opens its
                next transaction further up (``SinkTransactions.restore`` in
                :mod:`jstormpy.barrier.transactions`).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Sink.recover")

    def execute(self, tup: Tuple) -> None:
        """Add ``tup`` to the open transaction (calls :meth:`write`)."""
        self.write(tup)

    def write_batch(self, batch: Batch) -> None:
        """Add every tuple of ``batch`` to the open transaction, in order.

        The default calls :meth:`write` per tuple. A sink that can write a whole batch
        at once (column by column, one request, ...) overrides it; the dataflow API's
        sinks then get their records as batches of one record shape (the fields are
        the records' keys), and a sink's own ``execute_batch`` may call it too.

        Args:
            batch: Tuples of one channel between two markers
                (:class:`~jstormpy.api.batch.Batch`).
        """
        write = self.write
        for tup in batch:
            write(tup)
