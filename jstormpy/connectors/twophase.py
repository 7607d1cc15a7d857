"""The sink half of the connector contract: a two-phase-commit sink over an external system.

:class:`TwoPhaseCommitSink` turns the engine's transaction calls (``begin / write /
pre_commit / commit / abort / recover``, see :mod:`jstormpy.barrier.twophase`) into five
storage steps a connector implements:

==========================  ==============================================================
``stage_transaction``       pre-commit: make the rows of transaction ``n`` durable but
                            invisible, under the name ``jstorm-<topology>-<task>-<n>``;
                            refuse (:class:`~jstormpy.api.errors.FencedError`) if a newer
                            generation fenced this task
``commit_transaction``      make staged ``n`` visible; idempotent
``abort_transaction``       discard staged ``n`` (no-op if there is none)
``abandon_transaction``     recovery's discard of staged ``n``: like ``abort_transaction``,
                            and records ``n`` as discarded under this run
                            (:attr:`~TwoPhaseCommitSink.fence_owner`); a ``commit`` of an
                            id that is not staged then raises
                            :meth:`~TwoPhaseCommitSink.abandoned_error` if the owning run's
                            record holds it (:meth:`~TwoPhaseCommitSink.abandoned_owner`)
``staged_transactions``     the ids this task has staged and not yet committed
``install_fence``           record this instance's generation as the task's fencing token
                            (kept per run: :attr:`~TwoPhaseCommitSink.fence_owner`), so an
                            older generation (a zombie) can no longer stage/commit
==========================  ==============================================================

Recovery after restoring checkpoint ``c``: fence first, then commit every staged
transaction ``<= c`` (the restored checkpoint covers its input: the replay will not produce
it again) and discard every other one (the replay produces it again) with
``abandon_transaction``. A run's first recovery (:meth:`~TwoPhaseCommitSink.fence_installed`
is False) resolves what earlier runs left staged before it fences, discarding with
``abort_transaction``: staged names carry no run, and those are not this run's to record.

Why the record of abandoned transactions: a recovery that falls back *past* a completed
checkpoint (a lost shared file, docs/checkpointing.md) discards transactions that
checkpoint decided, and a savepoint taken from it still lists them as pending. A run
restored from that savepoint into the same output commits them; the external system no
longer holds them, exactly as when the earlier run committed them normally. Without the
record the two cannot be told apart and the rows would be silently missing from the
restored run's output; with it, the commit raises a
:class:`~jstormpy.api.errors.RestoreRefusedError` saying what to do, and the Topology Master
fails the topology at once, since every restore of that checkpoint would refuse again
(issue 23, simulator seed 1032215).

An unreachable system raises :class:`~jstormpy.api.errors.SinkUnavailableError` from
``stage_transaction``/``commit_transaction``: the engine then gives the checkpoint up and
keeps the open transaction (its rows stay buffered here) to stage at the next barrier.
"""

from __future__ import annotations

import re
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import RestoreRefusedError, SinkError
from jstormpy.barrier.twophase import Sink
from jstormpy.run_identity import RunIdentity

__all__ = ["TwoPhaseCommitSink", "transaction_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")


def transaction_name(topology: str, task_id: int, checkpoint_id: int) -> str:
    """The name of a sink transaction: ``jstorm-<topology>-<task>-<checkpoint>``.

    Characters other than letters, digits, ``_`` and ``.`` in the topology name become
    ``_`` so the name is a safe identifier everywhere (e.g. a PostgreSQL GID).

    Example:
        >>> transaction_name("orders-eu", 3, 17)
        'jstorm-orders_eu-3-17'
    """
    return f"jstorm-{_UNSAFE.sub('_', topology)}-{task_id}-{checkpoint_id}"


class TwoPhaseCommitSink(Sink):
    """Base of sinks with real (staged, then published) transactions; see the module doc.

    Rows of the open transaction are buffered in memory and staged in one go at the barrier,
    so the external transaction lives only as long as the pre-commit. Subclasses store only
    their arguments in ``__init__`` and open connections in :meth:`connect`.
    """

    # -- what a connector implements -------------------------------------------------------
    def connect(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open connections / create what is missing (called by ``prepare``)."""

    def row_of(self, tup: Tuple) -> Any:
        """What one tuple becomes in the buffer (default: ``tup.as_dict()``)."""
        return tup.as_dict()

    def stage_transaction(self, checkpoint_id: int, rows: list[Any]) -> None:
        """Pre-commit ``rows`` as transaction ``checkpoint_id`` (durable, invisible, fenced)."""
        raise NotImplementedError(f"{type(self).__name__} must implement stage_transaction")

    def commit_transaction(self, checkpoint_id: int) -> None:
        """Publish staged transaction ``checkpoint_id``; no-op if it is not staged."""
        raise NotImplementedError(f"{type(self).__name__} must implement commit_transaction")

    def abort_transaction(self, checkpoint_id: int) -> None:
        """Discard staged transaction ``checkpoint_id``; no-op if it is not staged."""
        raise NotImplementedError(f"{type(self).__name__} must implement abort_transaction")

    def abandon_transaction(self, checkpoint_id: int) -> None:
        """Discard staged ``checkpoint_id`` in a recovery and record it as discarded under
        :attr:`fence_owner` (default: :meth:`abort_transaction`, no record). Record first,
        then discard (or both at once): a crash in between must never leave the rows
        gone without the record."""
        self.abort_transaction(checkpoint_id)

    def staged_transactions(self) -> list[int]:
        """Ids this task has staged and not committed (left by any process or generation)."""
        raise NotImplementedError(f"{type(self).__name__} must implement staged_transactions")

    def install_fence(self) -> None:
        """Make :attr:`generation` this task's fencing token (older ones are refused)."""
        raise NotImplementedError(f"{type(self).__name__} must implement install_fence")

    def fence_installed(self) -> bool:
        """Whether this run (:attr:`fence_owner`) already holds a fencing token for the task:
        a recovery of this run got as far as fencing, so what is staged now is this run's.
        Before that (the run's first recovery), staged transactions are leftovers of
        earlier runs, whose names carry no run: they are discarded without a record, which
        would be this run's. Default: True."""
        return True

    # -- identity ------------------------------------------------------------------------
    @property
    def topology(self) -> str:
        """The topology name (known after ``prepare``)."""
        return str(self._ctx().topology)

    @property
    def task_id(self) -> int:
        """This sink task's id (known after ``prepare``)."""
        return int(self._ctx().task_id)

    @property
    def generation(self) -> int:
        """The generation this instance runs in: its fencing token (with the task id)."""
        return int(self._ctx().generation)

    @property
    def fence_owner(self) -> str:
        """Whose fencing token this task's fence row/key holds: ``<topology>@<job_id>``
        (:mod:`jstormpy.run_identity`), so a fresh run or a savepoint restore, whose
        generations restart at 1, never meets an earlier run's token; the bare topology
        name without a run identity."""
        run = self._ctx().run
        return f"{self.topology}@{run.job_id}" if run is not None else self.topology

    def _restored_run(self, checkpoint_id: int) -> RunIdentity | None:
        """This run's identity if ``checkpoint_id`` is a transaction of the run it was
        restored from by a savepoint (ids up to ``run.restored_through``), else None."""
        run = self._ctx().run
        if run is not None and run.restored_through and checkpoint_id <= run.restored_through:
            return run
        return None

    def abandoned_owner(self, checkpoint_id: int) -> str:
        """Whose record of abandoned transactions tells whether ``checkpoint_id`` was
        discarded: in a run restored from a savepoint, ids up to the savepoint's checkpoint
        (``run.restored_through``) are the earlier run's (``run.restored_from``); every
        other id is this run's (:attr:`fence_owner`)."""
        run = self._restored_run(checkpoint_id)
        if run is None:
            return self.fence_owner
        return f"{self.topology}@{run.restored_from}" if run.restored_from else self.topology

    def abandoned_error(self, checkpoint_id: int, where: str) -> RestoreRefusedError:
        """The error of committing transaction ``checkpoint_id`` that a recovery discarded
        (its rows are gone from ``where``): the restored state counts its input as
        published, so going on would silently lose the rows."""
        run = self._restored_run(checkpoint_id)
        sink = f"{type(self).__name__} task {self.task_id}"
        if run is not None:
            return RestoreRefusedError(
                f"{sink}: the savepoint of checkpoint {run.restored_through} lists "
                f"transaction {checkpoint_id} as pending, but the run it was taken from "
                f"({run.restored_from or 'a run of an older version'}) discarded it in a recovery "
                f"that fell back past checkpoint {checkpoint_id}, so its rows are not in "
                f"{where}; restoring would silently lose them. Restore the savepoint into "
                f"fresh output (a new table or stream), or restore an older savepoint (of a "
                f"checkpoint below {checkpoint_id})")
        return RestoreRefusedError(
            f"{sink}: the restored checkpoint lists transaction {checkpoint_id} as pending, "
            f"but a recovery of this run discarded it, so its rows are not in {where}; "
            f"going on would silently lose them. Restore a savepoint into fresh output, or "
            f"restore an older savepoint (of a checkpoint below {checkpoint_id})")

    def _ctx(self) -> TopologyContext:
        ctx = self.__dict__.get("_jstorm_2pc_ctx")
        if ctx is None:
            raise SinkError(f"{type(self).__name__} used before prepare()")
        return ctx  # type: ignore[no-any-return]

    def transaction_name(self, checkpoint_id: int) -> str:
        """``jstorm-<topology>-<task>-<checkpoint>`` (see :func:`transaction_name`)."""
        return transaction_name(self.topology, self.task_id, checkpoint_id)

    def parse_transaction_name(self, name: str) -> int | None:
        """The checkpoint id of one of *this task's* transaction names, else ``None``."""
        prefix = transaction_name(self.topology, self.task_id, 0)[:-1]
        tail = name[len(prefix):] if name.startswith(prefix) else ""
        return int(tail) if tail.isdigit() else None

    # -- the engine's side -----------------------------------------------------------------
    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Remember the task identity and connect."""
        self.__dict__["_jstorm_2pc_ctx"] = context
        self.__dict__["_rows"] = []
        self.__dict__["_open"] = None
        self.connect(conf, context)

    def begin(self, checkpoint_id: int) -> None:
        """Open transaction ``checkpoint_id`` (an empty buffer)."""
        self.__dict__["_open"] = checkpoint_id
        self.__dict__["_rows"] = []

    def write(self, tup: Tuple) -> None:
        """Buffer one row of the open transaction."""
        self.__dict__["_rows"].append(self.row_of(tup))

    def pre_commit(self, checkpoint_id: int) -> None:
        """Stage the buffered rows; on failure they stay buffered (retried next barrier)."""
        rows: list[Any] = self.__dict__["_rows"]
        self.stage_transaction(checkpoint_id, rows)
        self.__dict__["_rows"] = []
        self.__dict__["_open"] = None

    def commit(self, checkpoint_id: int) -> None:
        """Publish transaction ``checkpoint_id`` (idempotent)."""
        self.commit_transaction(checkpoint_id)

    def abort(self, checkpoint_id: int) -> None:
        """Drop the open transaction if it is ``checkpoint_id``, and any staged one."""
        if self.__dict__.get("_open") == checkpoint_id:
            self.__dict__["_rows"] = []
        self.abort_transaction(checkpoint_id)

    def recover(self, completed_id: int | None) -> None:
        """Fence older generations, then commit staged ``<= completed_id``, discard the rest
        (:meth:`abandon_transaction` once this run holds the fence; at its first recovery
        the leftovers of earlier runs are discarded first, with :meth:`abort_transaction`)."""
        own = self.fence_installed()
        if not own:
            self.resolve_staged(completed_id, own)
        self.install_fence()
        self.resolve_staged(completed_id, own)

    def resolve_staged(self, completed_id: int | None, own: bool) -> None:
        """Commit every staged transaction ``<= completed_id``; discard the others,
        recording them (:meth:`abandon_transaction`) if they are this run's (``own``)."""
        for cid in sorted(self.staged_transactions()):
            if completed_id is not None and cid <= completed_id:
                self.commit_transaction(cid)
            elif own:
                self.abandon_transaction(cid)
            else:
                self.abort_transaction(cid)

    def buffered(self) -> int:
        """Rows in the open transaction (not yet staged)."""
        return len(self.__dict__.get("_rows", ()))
