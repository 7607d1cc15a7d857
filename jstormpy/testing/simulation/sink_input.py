"""What the simulator hands the real sinks it runs (:class:`~jstormpy.connectors.sinks.FileSink`
in ``file_sink``, :class:`~jstormpy.connectors.kafka.KafkaSink` in ``kafka_sink``): a simulated
row as the input tuple a sink writes, one transaction's rows written and pre-committed as the
engine does it, and the quiet task log a sweep's thousands of recoveries write to."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any, Protocol, cast

from jstormpy.api.component import Tuple


class RowTuple:
    """A simulated row (a dataclass) as the input tuple a sink writes: its fields by name."""

    __slots__ = ("row",)

    def __init__(self, row: Any) -> None:
        self.row = row

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.row)


class TransactionSteps(Protocol):
    def begin(self, checkpoint_id: int) -> None: ...
    def write(self, tup: Tuple) -> None: ...
    def pre_commit(self, checkpoint_id: int) -> None: ...


def stage_rows(sink: TransactionSteps, checkpoint_id: int, rows: list[Any]) -> None:
    """Open transaction ``checkpoint_id`` of ``sink``, write ``rows`` into it and pre-commit
    it: the engine's ``begin``, ``write`` s and ``pre_commit``."""
    sink.begin(checkpoint_id)
    for row in rows:
        sink.write(cast(Tuple, RowTuple(row)))
    sink.pre_commit(checkpoint_id)


def quiet_log(name: str) -> logging.Logger:
    """A task log that writes nothing: a sweep runs thousands of recoveries, each would log."""
    log = logging.getLogger(name)
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log
