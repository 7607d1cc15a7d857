"""The worker's garbage-collector policy (``Config.worker_gc``).

A worker holds a large, long-lived heap: the topology, the user's components, restored
state dicts, transport buffers. CPython's cyclic collector scans the young generation every
700 net allocations and everything every so often; on the per-tuple path, where a record
makes a few short-lived tuples, the collections cost a worker 5-25 % of its CPU, most in
full collections that walk the long-lived heap again and again (docs/performance.md).

``"tuned"`` (the default), after the worker built its tasks for a generation: collect once,
then :func:`gc.freeze` what is left (start-up objects and restored state move to a permanent
generation that no collection scans), and collect the young generation every
:data:`YOUNG_THRESHOLD` allocations. The first time, what the process froze before (the
zygote's imports, frozen before it forks: ``deploy/forkserver.py``) stays frozen and is
not scanned (it was collected before its freeze); a later generation's call scans
everything once more. Reference counting still frees everything acyclic at
once; a cycle among frozen objects is never reclaimed (they were live when frozen), which is
why the freeze follows a collection. ``"default"``: CPython's own settings.
"""

from __future__ import annotations

import gc

GC_POLICIES = ("tuned", "default")
YOUNG_THRESHOLD = 10_000
"""Allocations between young collections under ``"tuned"`` (CPython's default is 700)."""
_DEFAULT = gc.get_threshold()
_frozen_here = False  # this function froze the heap (an earlier generation's tasks)


def apply_collector_policy(policy: str) -> None:
    """Set this process's collector to ``policy`` (one of :data:`GC_POLICIES`)."""
    global _frozen_here
    if policy == "tuned":
        if _frozen_here:  # what an earlier generation froze is scanned once more, then kept
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        _frozen_here = True
        gc.set_threshold(YOUNG_THRESHOLD, _DEFAULT[1], _DEFAULT[2])
    elif policy == "default":
        gc.unfreeze()
        _frozen_here = False
        gc.set_threshold(*_DEFAULT)
    else:
        raise ValueError(f"unknown collector policy {policy!r}; one of {GC_POLICIES}")
