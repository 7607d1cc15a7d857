"""The engines the bench runs, and how each one's interpreter is found.

Each engine is a script run by its own interpreter as ``python -m <module> --query Q
--events F --out DIR --delay-ms D --parallelism P`` from the repository's root. Its
last lines are ``GUARANTEE=<text>`` and ``PROCESSING_SECONDS=<s>``, or
``NOT_EXPRESSIBLE=<why>`` for a query it cannot express.

Interpreters: jstormpy runs with the interpreter running the bench; Bytewax with
``$NEXMARK_BYTEWAX_PYTHON`` (default ``/tmp/peerbench/venv-bytewax/bin/python``), PyFlink
with ``$NEXMARK_PYFLINK_PYTHON`` (default ``/tmp/peerbench/venv-flink/bin/python``). An
engine whose interpreter does not exist is reported as not installed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    """One row group of the table: a name, its script module and its interpreter."""

    name: str
    label: str
    module: str
    python_env: str | None
    default_python: str | None

    def python(self) -> str | None:
        """The interpreter to run it with, or None when it is not installed."""
        if self.python_env is None:
            return sys.executable
        path = os.environ.get(self.python_env) or self.default_python
        return path if path and os.path.exists(path) else None


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("jstormpy", "jstormpy (dataflow API)", "bench.nexmark.engine_jstormpy", None, None),
    Engine("bytewax", "Bytewax 0.21", "bench.nexmark.engine_bytewax",
           "NEXMARK_BYTEWAX_PYTHON", "/tmp/peerbench/venv-bytewax/bin/python"),
    Engine("pyflink", "PyFlink DataStream (Python functions)", "bench.nexmark.engine_pyflink",
           "NEXMARK_PYFLINK_PYTHON", "/tmp/peerbench/venv-flink/bin/python"),
    Engine("pyflink-sql", "PyFlink SQL (JVM operators, reference)",
           "bench.nexmark.engine_pyflink_sql", "NEXMARK_PYFLINK_PYTHON",
           "/tmp/peerbench/venv-flink/bin/python"),
)}
