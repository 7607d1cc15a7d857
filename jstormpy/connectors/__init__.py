"""Built-in connectors: replayable spouts and exactly-once (two-phase-commit) sinks."""

from __future__ import annotations

from jstormpy.connectors.sinks import FileSink, committed_files, read_committed
from jstormpy.connectors.sources import FileSpout, SequenceSpout

__all__ = ["FileSink", "FileSpout", "SequenceSpout", "committed_files", "read_committed"]
