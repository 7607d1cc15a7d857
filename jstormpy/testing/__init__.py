"""Testing jstormpy jobs: the kit users reach for first, and the project's own tools.

The kit (docs/dataflow.md, "Testing"):

* :class:`TestingSource` — a replayable spout over a list, optionally failing once;
* :class:`TestingSink` — collects the committed output (:meth:`TestingSink.items`);
* :func:`run_inline` — runs a topology or dataflow in this process with real
  checkpoints and a simulated worker crash, and returns the sink's committed records.

Also here: :mod:`.semantics` (the exactly-once checker), :mod:`.chaos` (seeded fault
scenarios on real processes), :mod:`.simulation` (the deterministic simulator of the
checkpoint protocol, ``jstorm simulate``), :mod:`.netns` (hosts as network namespaces)
and :mod:`.servers` (real WebHDFS/HBase/PostgreSQL/Redis servers and a fault-injecting
proxy for tests).
"""

from __future__ import annotations

from jstormpy.testing.inline import InlineRunError, InlineStats, run_inline
from jstormpy.testing.kit import TestingSink, TestingSource, TestingSourceFailure

__all__ = ["InlineRunError", "InlineStats", "TestingSink", "TestingSource",
           "TestingSourceFailure", "run_inline"]
