"""Built-in connectors: replayable spouts and exactly-once (two-phase-commit) sinks.

Connectors to real systems import their client library only when used.
"""

from __future__ import annotations

from typing import Any

from jstormpy.connectors.sinks import FileSink, committed_files, read_committed
from jstormpy.connectors.sources import FileSpout, SequenceSpout

__all__ = ["FileSink", "FileSpout", "KafkaSink", "KafkaSpout", "SequenceSpout",
           "committed_files", "read_committed"]

_LAZY = {
    "PostgresSink": "jstormpy.connectors.postgres",
    "KafkaSpout": "jstormpy.connectors.kafka",
    "KafkaSink": "jstormpy.connectors.kafka",
}


def __getattr__(name: str) -> Any:
    """Import a connector module (and its client library) on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jstormpy.connectors' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
