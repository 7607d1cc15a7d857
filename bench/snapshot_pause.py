"""How long a checkpoint stops a task that holds ``--keys`` keys of managed state.

In one process, with the real :class:`TaskExecutor` snapshot code and a real file state
backend: the task thread takes the snapshot at a barrier (``_take_snapshot``) and then
keeps "processing" (a loop that records the longest gap between two iterations) while the
snapshot thread serialises, uploads and acks. Prints the synchronous figure (everything
on the task thread, the engine before asynchronous snapshots) beside it, and the first
asynchronous checkpoint apart (it also scans the state's value types on the task thread).

    python bench/snapshot_pause.py [--keys 1000000]
"""

from __future__ import annotations

import argparse
import pickle
import tempfile
import threading
import time
from typing import Any

from jstormpy import Bolt
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector
from jstormpy.state_backends.file import FileBackend


class Holder(Bolt):
    outputs = ("k",)


class _Host:
    guarantee = "exactly_once"
    worker_id = 0
    generation = 1
    config = None

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.acked = threading.Event()

    def write_snapshot(self, checkpoint_id: int, task_id: int, data: bytes) -> str:
        return self.backend.put_snapshot(checkpoint_id, task_id, data, self.generation)

    def ack_checkpoint(self, *args: Any) -> None:
        self.acked.set()

    def fail_checkpoint(self, *args: Any) -> None:
        raise RuntimeError(args)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    args = p.parse_args()
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
        pauses, cpus = [], []
        for cid in (2, 3):
            host.acked.clear()
            t0, c0 = time.perf_counter(), time.thread_time()
            ex._take_snapshot(cid, 0.0, emit_barrier=False)
            pauses.append((time.perf_counter() - t0) * 1000.0)
            cpus.append((time.thread_time() - c0) * 1000.0)
            worst_gap, last, spins = 0.0, time.perf_counter(), 0
            while not host.acked.is_set():  # the task keeps running meanwhile
                now = time.perf_counter()
                worst_gap = max(worst_gap, now - last)
                last = now
                spins += 1
            total_ms = (time.perf_counter() - t0) * 1000.0
        first_ms, pause_ms = pauses
        handle = backend.list_snapshots() if hasattr(backend, "list_snapshots") else None
        _ = handle
        restored = pickle.loads(ex._snapshot_bytes())["states"]["counts"]
        assert len(restored) == args.keys
        print(f"keys={args.keys} synchronous snapshot (pickle+upload on the task thread): "
              f"{sync_ms:.0f} ms")
        print(f"asynchronous, first checkpoint of the state (value types scanned on the "
              f"task thread): task-thread pause {first_ms:.0f} ms (CPU {cpus[0]:.0f} ms)")
        print(f"asynchronous: task-thread pause {pause_ms:.0f} ms (CPU {cpus[1]:.0f} ms, the "
              f"figure to read on a busy machine); longest task-loop gap "
              f"while the snapshot thread worked {worst_gap * 1000:.1f} ms; ack after "
              f"{total_ms:.0f} ms ({spins} task-loop iterations meanwhile)")


if __name__ == "__main__":
    main()
