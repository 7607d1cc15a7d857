"""A worker's first heartbeat imports nothing.

In a run shorter than the heartbeat interval the first heartbeat is the one that reports
the spouts' end of input, and the Topology Master triggers the final checkpoint when it
arrives: an import there (psutil, for the worker's memory and CPU figures: tens of ms)
delayed the end of every short bounded run. A worker forked from the zygote has it
imported already.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import importlib, sys
    from jstormpy.deploy.forkserver import PRELOAD
    for name in PRELOAD:  # what the zygote imports before it forks a worker
        importlib.import_module(name)
    from jstormpy.runtime.worker import Worker
    worker = Worker("127.0.0.1:9", 0, b"secret")  # never connects in this test
    before = set(sys.modules)
    worker._heartbeat()
    print(sorted(set(sys.modules) - before))
""")


def test_the_first_heartbeat_of_a_forked_worker_imports_nothing() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip().splitlines()[-1]
    assert out == "[]", f"the first heartbeat imported {out}"
