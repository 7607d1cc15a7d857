"""Simulated external systems of two-phase-commit sinks.

Three kinds, after the ways the real connectors make a commit idempotent:

* ``"log"`` (KafkaSink): a commit appends the transaction's rows and a
  commit-log entry under the task's key :func:`~jstormpy.connectors.kafka.commit_log_key`
  (one per run: :mod:`jstormpy.run_identity`). A transaction re-committed by a new
  process from its snapshot is skipped if the log holds its id (the id itself: after a
  fallback a run goes on above ids it never committed, so "below the last entry" is not
  "committed"). A recovery loses every staged transaction (the new producer aborted it):
  only the rows a restored snapshot holds for a pending id are committed again.
* ``"files"`` (FileSink): a commit renames the staged part file ``part-{txn}-{task}``; a
  name already taken counts as already committed. A fresh run refuses a directory with
  committed parts, and a savepoint restore refuses one with parts above the savepoint. A
  recovery keeps staged parts at or below the restored checkpoint, uncommitted: only a
  pending id of the restored snapshot commits one.
* ``"staged"`` (PostgresSink, RedisStreamSink: :class:`~jstormpy.connectors.twophase.
  TwoPhaseCommitSink`): the staged rows live in the external system (an empty transaction
  stages nothing); a commit publishes them if they are still staged, and is a no-op if
  not (committed already). A recovery's discard of a staged transaction records its id
  under the run (``abandon_transaction``); a commit that finds nothing staged but the id
  in the owning run's record (for a savepoint restore's ids, the earlier run's) raises a
  ``SinkError`` and sets :attr:`SimOutput.refused`: the run ends in that named error
  state, as the real one does once its restart strategy gives up.

The rows record which run and transaction wrote them, so the checker can tell runs apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import SinkError, SinkUnavailableError
from jstormpy.connectors.kafka import commit_log_key
from jstormpy.run_identity import RunIdentity


@dataclass(frozen=True)
class Row:
    key: str
    seq: int
    count: int
    job: str
    txn: int
    task: int
    streak: int = 0
    """With ``state_ttl`` or ``rocksdb_ttl``: the counter's TTL state for the key (records
    since it expired)."""
    at: float = 0.0
    """With ``state_ttl`` or ``rocksdb_ttl``: the simulated time (ms) the counter processed
    the record."""


@dataclass
class SimOutput:
    """One sink's external system, shared by every run that writes to it."""

    kind: str
    rows: list[Row] = field(default_factory=list)
    staged: dict[tuple[str, int, int], list[Row]] = field(default_factory=dict)
    commit_log: dict[str, set[int]] = field(default_factory=dict)
    parts: set[tuple[int, int]] = field(default_factory=set)
    abandoned: dict[tuple[str, int], set[int]] = field(default_factory=dict)
    """``"staged"``: per (run job id, task), the transactions its recoveries discarded."""
    refused: str | None = None
    """``"staged"``: why a commit was refused (a transaction a recovery discarded)."""
    down: bool = False

    def check_fresh_run(self) -> None:
        if self.kind == "files" and self.parts:
            raise SinkError(f"output directory already holds {len(self.parts)} committed "
                            "part file(s) of an earlier run")

    def check_savepoint_restore(self, checkpoint_id: int) -> None:
        if self.kind == "files":
            later = sorted(t for t, _ in self.parts if t > checkpoint_id)
            if later:
                raise SinkError(f"output directory holds part files committed after the "
                                f"savepoint's checkpoint {checkpoint_id} ({later[0]} ...)")

    def stage(self, run: RunIdentity, task: int, txn: int, rows: list[Row]) -> None:
        self._up()
        if self.kind == "staged" and not rows:
            return  # an empty transaction stages nothing (PostgreSQL, Redis)
        self.staged[(run.job_id, task, txn)] = list(rows)

    def commit(self, run: RunIdentity, task: int, txn: int, rows: list[Row],
               earlier: tuple[RunIdentity, int] | None = None) -> None:
        """Make transaction ``txn`` of ``task`` visible (idempotent). ``earlier``: the run
        a savepoint came from and its checkpoint id (ids up to it are that run's)."""
        self._up()
        if self.kind == "staged":
            owner = earlier[0] if earlier is not None and txn <= earlier[1] else run
            staged = self.staged.pop((owner.job_id, task, txn), None)
            if staged is None:
                self.check_not_abandoned(owner, task, txn)
                return  # committed already (or empty)
            self.rows.extend(staged)
            return
        self.staged.pop((run.job_id, task, txn), None)
        if self.kind == "log":
            owner = earlier[0] if earlier is not None and txn <= earlier[1] else run
            key = commit_log_key(f"sink-{task}", owner)
            if txn in self.commit_log.get(key, ()):
                return  # already committed
            self.rows.extend(rows)
            self.commit_log.setdefault(key, set()).add(txn)
            return
        if (txn, task) in self.parts:
            return  # the name is taken: already committed
        self.parts.add((txn, task))
        self.rows.extend(rows)

    def recover(self, run: RunIdentity, task: int, restored: int | None) -> None:
        """A task's ``recover``, as each connector's: what it staged above ``restored`` is
        dropped; at or below, PostgreSQL and Redis (``"staged"``) commit it from the
        external system, FileSink (``"files"``) keeps the staged part file, and KafkaSink
        (``"log"``) has lost it (the new producer aborted the transaction). The last two
        commit only the ids the restored snapshot names as pending, which the engine asks
        for before ``recover`` (``SinkTransactions.restore``)."""
        self._up()
        mine = sorted(k for k in self.staged if k[0] == run.job_id and k[1] == task)
        for k in mine:
            if restored is not None and k[2] <= restored and self.kind == "staged":
                self.commit(run, task, k[2], self.staged[k])
            elif restored is not None and k[2] <= restored and self.kind == "files":
                continue  # kept; committed by a pending id of a snapshot, or never
            else:
                if self.kind == "staged":  # abandon_transaction: record, then discard
                    self.abandoned.setdefault((run.job_id, task), set()).add(k[2])
                del self.staged[k]

    def check_not_abandoned(self, owner: RunIdentity, task: int, txn: int) -> None:
        """``"staged"``: refuse a commit of a transaction ``owner``'s recovery discarded
        (``TwoPhaseCommitSink.abandoned_error``): its rows are gone."""
        if txn in self.abandoned.get((owner.job_id, task), ()):
            self.refused = (f"sink task {task}: transaction {txn} is pending in the restored "
                            f"checkpoint, but run {owner.job_id} discarded it in a recovery")
            raise SinkError(self.refused)

    def _up(self) -> None:
        if self.down:
            raise SinkUnavailableError("external system unavailable")


def rows_of(items: list[Any]) -> list[Row]:
    return [r for r in items if isinstance(r, Row)]
