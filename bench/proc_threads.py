"""Every thread of this process with its CPU seconds and context switches, from
``/proc/self/task``: what the probes loaded as ``sitecustomize`` (``bench/handoff_site``,
``bench/recv_site``) sample in the worker processes. They run this file by its path
(``runpy.run_path``): a ``sitecustomize`` runs before the repository is importable."""

from __future__ import annotations

import os
import threading


def thread_stats() -> dict[int, dict]:
    """Thread id -> its name, ``cpu_s`` (user + system), ``voluntary`` and ``involuntary``
    context switches; threads that end while they are read are left out."""
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

