"""The receiving thread's CPU per frame, taken apart (issue 36).

One receiver :class:`~jstormpy.runtime.transport.Transport` in this process, one sender
Transport in a child process sending ``--frames`` DATA frames of ``--words``-word batches
(the per-tuple word count's frames: ``(src, 0, "default", [(word,), ...])``), in bursts of
``--burst`` frames every ``--gap-ms`` ms (the running count sends about 3 frames every
10 ms each way). The receiver's ``deliver`` counts the item and drops it (a task
consumes its input at once). With ``--busy``, a Python thread of the receiver loops all
the time (a task thread that always has work, as the count task has). Prints the
receiving thread's CPU per frame (``pthread_getcpuclockid``; user and system from
``/proc`` in clock ticks), its voluntary context switches (``/proc``) and what the same
frames cost through ``InboundChannels.read`` from memory (the work alone). The worker's
collector policy (young collections every ``collector.YOUNG_THRESHOLD`` allocations) is
applied.

    python bench/recv_probe.py [--tls] [--busy] [--switch 0.02] [--frames 3000]
"""

from __future__ import annotations

import argparse
import gc
import io
import multiprocessing as mp
import os
import random
import sys
import tempfile
import threading
import time
from typing import Any

from jstormpy.runtime.codec import encode_item
from jstormpy.runtime.collector import YOUNG_THRESHOLD
from jstormpy.runtime.frames import HEADER, MAGIC, SEQ, VERSION, FrameType
from jstormpy.runtime.transport import Transport

SECRET = b"recv-probe"


def make_batches(n: int, words: int, seed: int = 1) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(2, 8)))
             for _ in range(5000)]
    return [(7, 0, "default", [(rnd.choice(vocab),) for _ in range(words)]) for _ in range(n)]


def sender(port: int, tls_dir: str, frames: int, words: int, burst: int, gap_ms: float) -> None:
    t = Transport(2, SECRET, lambda *a: None, tls_dir=tls_dir, handshake_timeout_s=60.0)
    t.start()
    t.set_peers({1: ("127.0.0.1", port)})
    batches = make_batches(64, words)
    sent = 0
    nxt = time.monotonic()
    while sent < frames:
        for _ in range(min(burst, frames - sent)):
            t.send(1, 9, batches[sent % len(batches)])
            sent += 1
        nxt += gap_ms / 1000.0
        pause = nxt - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    while t.pending_bytes(1):
        time.sleep(0.01)
    time.sleep(0.5)  # the last ACKs
    t.close()


def thread_cpu(th: threading.Thread) -> float:
    assert th.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(th.ident))


def user_sys(th: threading.Thread) -> tuple[float, float]:
    """The thread's user and system CPU seconds (``/proc``, clock ticks)."""
    with open(f"/proc/self/task/{th.native_id}/stat") as f:
        stat = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(stat[11]) / tick, int(stat[12]) / tick


def voluntary(th: threading.Thread) -> int:
    with open(f"/proc/self/task/{th.native_id}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])
    return 0


def from_memory(frames: int, words: int) -> float:
    """CPU µs per frame of the same frames through ``InboundChannels.read`` from memory."""
    t = Transport(1, SECRET, lambda task, item: None)
    buf = bytearray()
    for i, b in enumerate(make_batches(64, words)[:1] * frames):
        payload = SEQ.pack(5, i + 1) + encode_item(9, b)
        buf += HEADER.pack(MAGIC, VERSION, FrameType.DATA, 0, len(payload)) + payload
    reader = io.BufferedReader(io.BytesIO(bytes(buf)), 256 << 10)  # type: ignore[arg-type]
    t0 = time.thread_time()
    t.inbound.read(reader, "memory", None, 2)
    return (time.thread_time() - t0) / frames * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--words", type=int, default=430)
    ap.add_argument("--burst", type=int, default=3)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--switch", type=float, default=0.02)
    ap.add_argument("--memory-only", action="store_true",
                    help="only the frames through InboundChannels.read from memory")
    a = ap.parse_args()
    sys.setswitchinterval(a.switch)
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])  # the worker's "tuned" policy
    if a.memory_only:
        print(f"from memory: {from_memory(a.frames, a.words):.1f} us/frame")
        return
    with tempfile.TemporaryDirectory(prefix="recv-probe-") as tmp:
        tls_dir = ""
        if a.tls:
            from jstormpy.security.tls import create_topology_tls
            tls_dir = str(create_topology_tls(os.path.join(tmp, "tls"), "probe"))
        got = [0]
        done = threading.Event()

        def deliver(task: int, item: Any) -> None:  # consumed at once, as a task does
            got[0] += 1
            if got[0] >= a.frames:
                done.set()

        rx = Transport(1, SECRET, deliver, tls_dir=tls_dir, handshake_timeout_s=60.0)
        port = rx.start()
        stop = False

        def busy() -> None:
            d: dict[int, int] = {}
            while not stop:
                for i in range(1000):
                    d[i] = d.get(i, 0) + 1

        bt = threading.Thread(target=busy, daemon=True)
        if a.busy:
            bt.start()
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=sender, args=(port, tls_dir, a.frames, a.words, a.burst,
                                             a.gap_ms))
        p.start()
        def reader() -> list[threading.Thread]:
            return [th for th in threading.enumerate()
                    if th.name.startswith("jstorm-recv") and th.ident is not None
                    and th.native_id is not None]

        while not reader():
            time.sleep(0.01)
        (rt,) = reader()
        c0, v0, us0 = thread_cpu(rt), voluntary(rt), user_sys(rt)
        if not done.wait(300):
            raise SystemExit(f"only {got[0]} of {a.frames} frames arrived")
        c1, v1, us1 = thread_cpu(rt), voluntary(rt), user_sys(rt)
        stop = True
        p.join()
        rx.close()
    mem = from_memory(a.frames, a.words)
    print(f"tls={a.tls} busy={a.busy} switch={a.switch} burst={a.burst} gap={a.gap_ms}ms: "
          f"recv thread {(c1 - c0) / a.frames * 1e6:.1f} us/frame (user "
          f"{(us1[0] - us0[0]) / a.frames * 1e6:.0f}, system "
          f"{(us1[1] - us0[1]) / a.frames * 1e6:.0f}), "
          f"{(v1 - v0) / a.frames:.2f} voluntary switches/frame; from memory {mem:.1f} us/frame")


if __name__ == "__main__":
    main()
