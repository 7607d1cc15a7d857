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
* ``"staged"`` (PostgresSink, RedisStreamSink): the staged rows, the fencing tokens and
  each run's record of the transactions its recoveries discarded live here, and the real
  :class:`~jstormpy.connectors.twophase.TwoPhaseCommitSink` base drives them: the
  connector is :class:`~jstormpy.testing.simulation.staged_sink.SimStagedSink`. A commit
  of a transaction a recovery discarded raises the base's ``RestoreRefusedError``; the
  task sets :attr:`SimOutput.refused` and the run ends in that named error state, as the
  real one fails the topology.

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
    """``"staged"``: per (fence owner ``<topology>@<job_id>``, task), the transactions the
    run's recoveries discarded."""
    fences: dict[tuple[str, int], int] = field(default_factory=dict)
    """``"staged"``: per (fence owner, task), the generation holding the fencing token."""
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
        self.check_up()
        self.staged[(run.job_id, task, txn)] = list(rows)

    def commit(self, run: RunIdentity, task: int, txn: int, rows: list[Row],
               earlier: tuple[RunIdentity, int] | None = None) -> None:
        """Make transaction ``txn`` of ``task`` visible (idempotent). ``earlier``: the run
        a savepoint came from and its checkpoint id (ids up to it are that run's)."""
        self.check_up()
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
        dropped; at or below, FileSink (``"files"``) keeps the staged part file, and
        KafkaSink (``"log"``) has lost it (the new producer aborted the transaction). Both
        commit only the ids the restored snapshot names as pending, which the engine asks
        for before ``recover`` (``SinkTransactions.restore``)."""
        self.check_up()
        mine = sorted(k for k in self.staged if k[0] == run.job_id and k[1] == task)
        for k in mine:
            if restored is not None and k[2] <= restored and self.kind == "files":
                continue  # kept; committed by a pending id of a snapshot, or never
            del self.staged[k]

    def check_up(self) -> None:
        """Raise :class:`SinkUnavailableError` while the fault plan holds the system down."""
        if self.down:
            raise SinkUnavailableError("external system unavailable")


def rows_of(items: list[Any]) -> list[Row]:
    return [r for r in items if isinstance(r, Row)]
