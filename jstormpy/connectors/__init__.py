"""Built-in connectors: replayable spouts and exactly-once (two-phase-commit) sinks.

The connector contract (docs/connectors.md) has two engine-side halves: replayable sources
over splits (:mod:`jstormpy.connectors.splits`) and two-phase-commit sinks over an external
system (:mod:`jstormpy.connectors.twophase`). Connectors to real systems import their client
library only when used.
"""

from __future__ import annotations

from typing import Any

from jstormpy.connectors.sinks import FileSink, committed_files, read_committed
from jstormpy.connectors.sources import FileSpout, SequenceSpout
from jstormpy.connectors.splits import ReplayableSpout, SplitOffsets, SplitRecord
from jstormpy.connectors.twophase import TwoPhaseCommitSink, transaction_name

__all__ = ["FileSink", "FileSpout", "KafkaSink", "KafkaSpout", "PostgresSink",
           "RedisStreamSink", "RedisStreamSpout", "ReplayableSpout", "SequenceSpout",
           "SplitOffsets", "SplitRecord", "TwoPhaseCommitSink", "committed_files",
           "read_committed", "transaction_name"]

_LAZY = {
    "KafkaSpout": "jstormpy.connectors.kafka",
    "KafkaSink": "jstormpy.connectors.kafka",
    "PostgresSink": "jstormpy.connectors.postgres",
    "RedisStreamSpout": "jstormpy.connectors.redis_streams",
    "RedisStreamSink": "jstormpy.connectors.redis_streams",
}


def __getattr__(name: str) -> Any:
    """Import a connector module (and its client library) on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jstormpy.connectors' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
