"""The CPU probe of ``bench/recv_cpu.py``, loaded as ``sitecustomize`` by every process of
a run whose ``PYTHONPATH`` holds this folder. It does nothing unless ``JSTORM_RECV_PROBE``
names a directory; then each worker process (forked from the zygote) writes
``cpu-PID.json`` at its exit: the process's user+system CPU seconds (``os.times``, dead
threads included) and every thread's CPU seconds and context switches (``/proc``, sampled
every 0.5 s so threads that ended are kept). Nothing in the engine is patched."""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time

OUT = os.environ.get("JSTORM_RECV_PROBE", "")


def _is_worker() -> bool:
    return "worker" in " ".join(map(str, sys.argv))


def _install() -> None:
    # bench/proc_threads.py, run by its path: the repository is not on sys.path yet
    bench = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _thread_stats = runpy.run_path(os.path.join(bench, "proc_threads.py"))["thread_stats"]
    threads: dict[int, dict] = {}

    def dump() -> None:
        threads.update(_thread_stats())
        t = os.times()
        data = {"pid": os.getpid(), "cpu_s": t.user + t.system,
                "threads": list(threads.values())}
        tmp = os.path.join(OUT, f".cpu-{os.getpid()}.json")
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, os.path.join(OUT, f"cpu-{os.getpid()}.json"))

    def sampler() -> None:
        time.sleep(0.2)
        if not _is_worker():
            return
        while True:
            time.sleep(0.5)
            threads.update(_thread_stats())

    def in_child() -> None:
        orig_exit = os._exit

        def _exit(code: int) -> None:
            if _is_worker():
                try:
                    dump()
                except Exception:  # noqa: BLE001 - never stop the exit
                    pass
            orig_exit(code)

        os._exit = _exit  # type: ignore[assignment]
        threading.Thread(target=sampler, name="recv-probe", daemon=True).start()

    os.register_at_fork(after_in_child=in_child)


if OUT:
    _install()
