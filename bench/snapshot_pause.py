"""How long a checkpoint stops a task that holds ``--keys`` keys of managed state.

In one process, with the real :class:`TaskExecutor` snapshot code and a real file state
backend: the task thread takes the snapshot at a barrier (``_take_snapshot``) and then
keeps "processing" (a loop that records the longest gap between two iterations) while the
snapshot thread serialises, uploads and acks. Prints the synchronous figure (everything
on the task thread, the engine before asynchronous snapshots) beside it, and the first
asynchronous checkpoint apart (it also scans the state's value types on the task thread).

    python bench/snapshot_pause.py [--keys 1000000]
    python bench/snapshot_pause.py --incremental [--keys 1000000] [--changed 0.01]

With ``--incremental`` the task runs with ``Config(incremental_checkpoints=True)``: after
the base, ``--changed`` of the keys are rewritten and the next checkpoint (a delta) is
measured the same way -- task-thread pause, longest task-loop gap while the snapshot
thread hashes, pickles and uploads the delta, and barrier-to-ack time with the task busy.
"""

from __future__ import annotations

import argparse
import pickle
import random
import tempfile
import threading
import time
from typing import Any

from jstormpy import Bolt
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector
from jstormpy.runtime.task_host import DetachedHost
from jstormpy.state_backends.file import FileBackend


class Holder(Bolt):
    outputs = ("k",)


class _Host(DetachedHost):
    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.acked = threading.Event()

    def write_snapshot(self, checkpoint_id: int, task_id: int, data: Any,
                       refs: bytes | None = None, *, generation: int | None = None) -> str:
        return self.backend.put_snapshot(checkpoint_id, task_id, data,
                                         self.generation if generation is None else generation,
                                         refs=refs)

    def ack_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        self.acked.set()

    def fail_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(args)


def _measure(ex: TaskExecutor, host: _Host, cid: int) -> tuple[float, float, float, float, int]:
    """One checkpoint while the task keeps looping: (task-thread pause ms, its CPU ms,
    longest task-loop gap ms, barrier-to-ack ms, loop iterations meanwhile)."""
    host.acked.clear()
    t0, c0 = time.perf_counter(), time.thread_time()
    ex._take_snapshot(cid, 0.0, emit_barrier=False)
    pause = (time.perf_counter() - t0) * 1000.0
    cpu = (time.thread_time() - c0) * 1000.0
    worst_gap, last, spins = 0.0, time.perf_counter(), 0
    while not host.acked.is_set():  # the task keeps running meanwhile
        now = time.perf_counter()
        worst_gap = max(worst_gap, now - last)
        last = now
        spins += 1
    return pause, cpu, worst_gap * 1000.0, (time.perf_counter() - t0) * 1000.0, spins


def _incremental(keys: int, changed: float) -> None:
    """The ``--incremental`` run (see the module docs)."""
    from jstormpy import Config
    from jstormpy.runtime.incremental import make_incremental

    with tempfile.TemporaryDirectory() as tmp:
        host = _Host(FileBackend(tmp))
        comp = Holder()
        inc = make_incremental(comp, 1, range(128), 128,
                               Config(incremental_checkpoints=True), None)
        state = comp.state("counts")
        dict.update(state, ((f"key-{i}", i) for i in range(keys)))  # the base holds them
        coll = OutputCollector(1, "holder", {"default": []}, [], lambda d, i: None)
        ex = TaskExecutor(1, "holder", "bolt", comp, coll, host,  # type: ignore[arg-type]
                          incremental=inc)
        base = _measure(ex, host, 1)
        rng = random.Random(7)
        n = max(1, int(keys * changed))
        for i in rng.sample(range(keys), n):
            state[f"key-{i}"] = -i
        delta = _measure(ex, host, 2)
        print(f"keys={keys}, incremental checkpoints, {n} keys rewritten after the base")
        print(f"base: task-thread pause {base[0]:.0f} ms, ack after {base[3]:.0f} ms")
        print(f"delta: task-thread pause {delta[0]:.1f} ms (CPU {delta[1]:.1f} ms); longest "
              f"task-loop gap while the snapshot thread worked {delta[2]:.1f} ms; ack after "
              f"{delta[3]:.0f} ms ({delta[4]} task-loop iterations meanwhile)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--incremental", action="store_true",
                   help="measure a delta of Config(incremental_checkpoints=True)")
    p.add_argument("--changed", type=float, default=0.01,
                   help="with --incremental: fraction of the keys rewritten")
    args = p.parse_args()
    if args.incremental:
        _incremental(args.keys, args.changed)
        return
    with tempfile.TemporaryDirectory() as tmp:
        backend = FileBackend(tmp)
        host = _Host(backend)
        comp = Holder()
        state = comp.state("counts")
        state.update((f"key-{i}", i) for i in range(args.keys))
        coll = OutputCollector(1, "holder", {"default": []}, [], lambda d, i: None)
        ex = TaskExecutor(1, "holder", "bolt", comp, coll, host)  # type: ignore[arg-type]

        t0 = time.perf_counter()
        data = ex._snapshot_bytes()
        backend.put_snapshot(1, 1, data, 1)
        sync_ms = (time.perf_counter() - t0) * 1000.0

        # the first capture of a state scans its value types on the task thread; later
        # ones only copy (the snapshot thread scans the copy)
        first = _measure(ex, host, 2)
        pause_ms, cpu_ms, worst_gap_ms, total_ms, spins = _measure(ex, host, 3)
        restored = pickle.loads(ex._snapshot_bytes())["states"]["counts"]
        assert len(restored) == args.keys
        print(f"keys={args.keys} synchronous snapshot (pickle+upload on the task thread): "
              f"{sync_ms:.0f} ms")
        print(f"asynchronous, first checkpoint of the state (value types scanned on the "
              f"task thread): task-thread pause {first[0]:.0f} ms (CPU {first[1]:.0f} ms)")
        print(f"asynchronous: task-thread pause {pause_ms:.0f} ms (CPU {cpu_ms:.0f} ms, the "
              f"figure to read on a busy machine); longest task-loop gap "
              f"while the snapshot thread worked {worst_gap_ms:.1f} ms; ack after "
              f"{total_ms:.0f} ms ({spins} task-loop iterations meanwhile)")


if __name__ == "__main__":
    main()
