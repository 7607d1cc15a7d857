"""Simulated external systems of two-phase-commit sinks.

Three kinds, after the ways the real connectors make a commit idempotent:

* ``"log"`` (KafkaSink): a commit appends the transaction's rows and a
  commit-log entry under the task's key :func:`~jstormpy.connectors.kafka.commit_log_key`
  (one per run: :mod:`jstormpy.run_identity`). A transaction re-committed by a new
  process from its snapshot is skipped if the log holds its id (the id itself: after a
  fallback a run goes on above ids it never committed, so "below the last entry" is not
  "committed"). A recovery loses every staged transaction (the new producer aborted it):
  only the rows a restored snapshot holds for a pending id are committed again.
* ``"files"`` (FileSink): the output directory lives here, on a simulated disk
  (:attr:`SimOutput.disk`), and the real :class:`~jstormpy.connectors.sinks.FileSink`
  stages, commits, aborts and recovers in it through its filesystem port: the connector
  is :class:`~jstormpy.testing.simulation.file_sink.SimFileSink`, and the launcher's
  fresh-run and savepoint checks are the real sink's too.
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

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import SinkUnavailableError
from jstormpy.connectors.kafka import commit_log_key
from jstormpy.run_identity import RunIdentity
from jstormpy.testing.simulation.filesystem import SimDisk


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
    disk: SimDisk = field(default_factory=SimDisk)
    """``"files"``: the disk holding FileSink's output directory."""
    published: list[str] = field(default_factory=list)
    """``"files"``: the part files FileSink published, in the order it published them."""
    incarnations: Iterator[int] = field(default_factory=itertools.count)
    """``"files"``: numbers the sink incarnations' fencing tokens."""
    abandoned: dict[tuple[str, int], set[int]] = field(default_factory=dict)
    """``"staged"``: per (fence owner ``<topology>@<job_id>``, task), the transactions the
    run's recoveries discarded."""
    fences: dict[tuple[str, int], int] = field(default_factory=dict)
    """``"staged"``: per (fence owner, task), the generation holding the fencing token."""
    refused: str | None = None
    """``"staged"``: why a commit was refused (a transaction a recovery discarded)."""
    down: bool = False

    def committed_rows(self) -> list[Row]:
        """What a reader of the system sees: every committed row, in commit order."""
        if self.kind != "files":
            return self.rows
        return [Row(**json.loads(line)) for path in self.published
                for line in self.disk.files[path].decode().splitlines() if line]

    def stage(self, run: RunIdentity, task: int, txn: int, rows: list[Row]) -> None:
        self.check_up()
        self.staged[(run.job_id, task, txn)] = list(rows)

    def commit(self, run: RunIdentity, task: int, txn: int, rows: list[Row],
               earlier: tuple[RunIdentity, int] | None = None) -> None:
        """The ``"log"`` kind: make transaction ``txn`` of ``task`` visible (idempotent;
        KafkaSink's commit log, modelled). ``earlier``: the run
        a savepoint came from and its checkpoint id (ids up to it are that run's)."""
        self.check_up()
        self.staged.pop((run.job_id, task, txn), None)
        owner = earlier[0] if earlier is not None and txn <= earlier[1] else run
        key = commit_log_key(f"sink-{task}", owner)
        if txn in self.commit_log.get(key, ()):
            return  # already committed
        self.rows.extend(rows)
        self.commit_log.setdefault(key, set()).add(txn)

    def recover(self, run: RunIdentity, task: int, restored: int | None) -> None:
        """A task's ``recover``, as KafkaSink's: every staged transaction is lost (the new
        producer aborted it); only the ids the restored snapshot names as pending are
        committed again, which the engine asks for before ``recover``
        (``SinkTransactions.restore``)."""
        self.check_up()
        for k in sorted(k for k in self.staged if k[0] == run.job_id and k[1] == task):
            del self.staged[k]

    def check_up(self) -> None:
        """Raise :class:`SinkUnavailableError` while the fault plan holds the system down."""
        if self.down:
            raise SinkUnavailableError("external system unavailable")


def rows_of(items: list[Any]) -> list[Row]:
    return [r for r in items if isinstance(r, Row)]
