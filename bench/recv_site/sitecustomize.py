"""The CPU probe of ``bench/recv_cpu.py``, loaded as ``sitecustomize`` by every process of
a run whose ``PYTHONPATH`` holds this folder. It does nothing unless ``JSTORM_RECV_PROBE``
names a directory; then each worker process (forked from the zygote) writes
``cpu-PID.json`` at its exit: the process's user+system CPU seconds (``os.times``, dead
threads included) and every thread's CPU seconds and context switches (``/proc``, sampled
every 0.5 s so threads that ended are kept). Nothing in the engine is patched."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

OUT = os.environ.get("JSTORM_RECV_PROBE", "")


def _is_worker() -> bool:
    return "worker" in " ".join(map(str, sys.argv))


def _thread_stats() -> dict[int, dict]:
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        out[int(tid)] = {
            "name": names.get(int(tid), status.get("Name", "?").strip()),
            "cpu_s": (int(stat[11]) + int(stat[12])) / tick,
            "voluntary": int(status["voluntary_ctxt_switches"]),
            "involuntary": int(status["nonvoluntary_ctxt_switches"])}
    return out


def _install() -> None:
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
