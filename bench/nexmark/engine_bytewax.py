"""The Nexmark queries on Bytewax 0.21: launches ``bench.nexmark.bytewax_flows``.

Run with Bytewax's interpreter (``$NEXMARK_BYTEWAX_PYTHON``) from the repository's root:

    python -m bench.nexmark.engine_bytewax --query q5 --events events.jsonl --out DIR

As the peer harness runs Bytewax: ``--parallelism`` processes of one worker each
(``python -m bytewax.run -i I -a ADDRS``), with recovery (a SQLite recovery store made
by ``python -m bytewax.recovery``, snapshots every 1 s, ``-b 0``). Bytewax's recovery
restores state exactly once, but its sinks are not transactional: output is at least
once. Processing time = the latest process exit minus the latest "flow built", both
recorded inside the Bytewax processes (interpreter start and imports excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

EVENT_TIME_QUERIES = ("q5", "q7", "q8", "q11")
"""Queries with event-time windows read the file as one input partition.

Bytewax's watermark is per key, over the records of every input partition: with two
partitions, the one that runs ahead makes the other's records late, and they are
dropped (q11 lost about half its bids on 20k events). One partition keeps each key's
records within the generator's delay; the windows still run on every worker."""


def free_ports(n: int) -> list[int]:
    """``n`` free ports on 127.0.0.1 (also used by ``bench/bytewax_running_counts.py``)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until something listens on 127.0.0.1:``port``: Timely's process 0 listens, and a
    process that dials before it retries only once a second."""
    want = f"0100007F:{port:04X}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with open("/proc/net/tcp", encoding="ascii") as fh:
            rows = [ln.split() for ln in fh.readlines()[1:]]
            if any(f[1] == want and f[3] == "0A" for f in rows):
                return
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--query", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--parallelism", type=int, default=2)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="nexmark-bytewax-")
    try:
        rdir = os.path.join(work, "recovery")
        os.makedirs(rdir)
        py = sys.executable
        parts = 1 if a.query in EVENT_TIME_QUERIES else a.parallelism
        env = dict(os.environ, NEXMARK_QUERY=a.query, NEXMARK_EVENTS=a.events,
                   NEXMARK_OUT=a.out, NEXMARK_DELAY_MS=str(a.delay_ms),
                   NEXMARK_PARTS=str(parts))
        subprocess.run([py, "-m", "bytewax.recovery", rdir, str(a.parallelism)], check=True,
                       env=env)
        common = ["-w", "1", "-r", rdir, "-s", "1", "-b", "0"]
        target = "bench.nexmark.bytewax_flows:flow"
        if a.parallelism == 1:
            cmds = [[py, "-m", "bytewax.run", target, *common]]
            ports: list[int] = []
        else:
            ports = free_ports(a.parallelism)
            addrs = ";".join(f"127.0.0.1:{port}" for port in ports)
            cmds = [[py, "-m", "bytewax.run", target, "-i", str(i), "-a", addrs, *common]
                    for i in range(a.parallelism)]
        procs = []
        for i, cmd in enumerate(cmds):
            procs.append(subprocess.Popen(cmd, env=dict(env, NEXMARK_PROC_ID=str(i))))
            if ports and i < len(cmds) - 1:
                wait_listening(ports[i], procs[-1])
        codes = [proc.wait() for proc in procs]
        if any(codes):
            sys.exit(f"bytewax process(es) failed: exit codes {codes}")
        timings = []
        for i in range(len(cmds)):
            path = os.path.join(a.out, f".timing-p{i}.json")
            with open(path, encoding="utf-8") as fh:
                timings.append(json.load(fh))
            os.unlink(path)
        elapsed = max(t["t_exit"] for t in timings) - max(t["t_ready"] for t in timings)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("GUARANTEE=at-least-once output (recovery: state snapshots every 1 s; "
          "Bytewax sinks are not transactional)")
    print(f"PROCESSING_SECONDS={elapsed:.6f}")


if __name__ == "__main__":
    main()
