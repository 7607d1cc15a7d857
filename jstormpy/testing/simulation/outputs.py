"""Simulated external systems of two-phase-commit sinks.

Three kinds, after the ways the real connectors make a commit idempotent:

* ``"log"`` (KafkaSink): a simulated Kafka broker lives here (:attr:`SimOutput.broker`:
  a transactional log per topic, producer epochs and fencing), and the real
  :class:`~jstormpy.connectors.kafka.KafkaSink` produces, commits, aborts, re-sends a
  restored pending transaction and reads its commit log there through its client port:
  the connector is :class:`~jstormpy.testing.simulation.kafka_sink.SimKafkaSink`;
  readers see what a ``read_committed`` consumer sees.
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
from jstormpy.testing.simulation.filesystem import SimDisk
from jstormpy.testing.simulation.kafka_sink import SimBroker, committed_values


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
    broker: SimBroker = field(default_factory=SimBroker)
    """``"log"``: the Kafka broker KafkaSink writes to."""
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
        """What a reader of the system sees: every committed row, in commit order (the
        log: a ``read_committed`` consumer's order, the records' offsets)."""
        if self.kind == "log":
            return [Row(**v) for v in committed_values(self.broker)]
        if self.kind != "files":
            return self.rows
        return [Row(**json.loads(line)) for path in self.published
                for line in self.disk.files[path].decode().splitlines() if line]

    def check_up(self) -> None:
        """Raise :class:`SinkUnavailableError` while the fault plan holds the system down."""
        if self.down:
            raise SinkUnavailableError("external system unavailable")


def rows_of(items: list[Any]) -> list[Row]:
    return [r for r in items if isinstance(r, Row)]
