"""Which CPU each worker of a local cluster runs on (``Config.worker_cpu_affinity``).

A worker's Python threads (its tasks, the receiving thread) share one GIL. Spread by the
OS over several cores, each hand-over of the GIL waits for a wake-up on another core, and
a thread preempted while it holds the GIL stalls its siblings whatever the other core
does: in the peer word count a third of two cores stayed idle that way. With each
worker's threads on one CPU of its own the hand-overs stay on that core (the running
counts 17-19 % sooner, the windowed counts 10-18 %: docs/performance.md, "A third of the
two cores idle").

So ``"auto"`` gives worker *i* the *i*-th CPU the launcher may use, but only where that
cannot crowd a core while another idles:

- the topology is the only live one under its ``JSTORM_HOME`` (two topologies would both
  put their worker 0 on the first CPU);
- it has no more workers than those CPUs, and there are at least two;
- its state is in memory: RocksDB's compaction threads, started from a task thread,
  would inherit its CPU, and they hold no GIL and should have every core.

Workers started by a rescale beyond the CPUs, and workers on Spark (whose executors own
their cores), are left to the OS. The worker applies its CPU itself, at its start
(``runtime/worker.py``, ``--cpu``), so every thread it starts inherits it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from jstormpy.api.config import Config


def worker_cpus(config: Config, alone: bool,
                available: Callable[[], Iterable[int]] | None = None) -> Sequence[int]:
    """The CPU of each worker id in order (worker *i* on the *i*-th; none past its end);
    empty where the workers are left to the OS. ``alone``: no other topology is live
    under the launcher's ``JSTORM_HOME``; ``available``: the CPUs the launcher may use
    (default: its affinity)."""
    if config.worker_cpu_affinity != "auto" or not alone or config.state_store == "rocksdb":
        return ()
    cpus = sorted((available or _affinity)())
    if len(cpus) < 2 or config.workers > len(cpus):
        return ()
    return cpus


def _affinity() -> Iterable[int]:
    return os.sched_getaffinity(0)

