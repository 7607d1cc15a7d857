"""Throughput of the worker-to-worker transport between two OS processes.

A sender process pushes ``--tuples`` small tuples, in batches of ``--batch`` (one DATA frame
per batch, shaped like the engine's ``(src_task, kind, stream, [values...])``), to a receiver
process over 127.0.0.1. The clock runs from the first send to the receiver's last delivery.

Usage::

    python bench/transport_bench.py [--tuples 2000000] [--batch 512]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import threading
import time
from typing import Any

from jstormpy.runtime.transport import Transport

SECRET = b"bench-secret"
log = logging.getLogger("transport_bench")


def _receiver(port_q: Any, result_q: Any, total_tuples: int) -> None:
    done = threading.Event()
    count = 0

    def deliver(_task: int, item: Any) -> None:
        nonlocal count
        count += len(item[3])
        if count >= total_tuples:
            done.set()

    t = Transport(2, SECRET, deliver)
    port_q.put(t.start())
    done.wait()
    end = time.monotonic()
    result_q.put((end, t.stats))
    t.close()


def _sender(port: int, start_q: Any, total_tuples: int, batch: int) -> None:
    t = Transport(1, SECRET, lambda *_: None)
    t.start()
    t.set_peers({2: ("127.0.0.1", port)})
    # warm-up connection outside the clock: an empty batch
    t.send(2, 0, (0, "data", "default", []))
    sent = 0
    seq = 0
    start = time.monotonic()
    while sent < total_tuples:
        n = min(batch, total_tuples - sent)
        values = [(seq + i, "word", 1.0) for i in range(n)]
        if not t.send(2, seq % 8, (7, "data", "default", values)):
            raise RuntimeError("send() dropped a frame during the benchmark")
        sent += n
        seq += n
    start_q.put(start)
    # wait until the receiver has everything before closing (close drops the queue)
    deadline = time.monotonic() + 120
    while t.pending_bytes(2) and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    start_q.put(t.stats)
    threading.Event().wait(1.0)
    t.close()


def main() -> None:
    """Run the benchmark and log tuples/s and MB/s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--json", action="store_true",
                        help="also print a BENCH_JSON line (for bench/run.py)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("jstormpy").setLevel(logging.WARNING)

    ctx = mp.get_context("spawn")
    port_q, result_q, start_q = ctx.Queue(), ctx.Queue(), ctx.Queue()
    recv = ctx.Process(target=_receiver, args=(port_q, result_q, args.tuples))
    recv.start()
    port = port_q.get(timeout=30)
    send = ctx.Process(target=_sender, args=(port, start_q, args.tuples, args.batch))
    send.start()
    start = start_q.get(timeout=600)
    end, rstats = result_q.get(timeout=600)
    start_q.get(timeout=120)
    send.join(30)
    recv.join(30)
    elapsed = end - start
    mb = rstats["bytes_received"] / 1e6
    log.info("%d tuples in batches of %d: %.2f s, %.0f tuples/s, %.1f MB/s "
             "(%d frames, %.1f MB on the wire)", args.tuples, args.batch, elapsed,
             args.tuples / elapsed, mb / elapsed, rstats["frames_received"], mb)
    if args.json:
        print("BENCH_JSON " + json.dumps({
            "tuples": args.tuples, "batch": args.batch, "elapsed_s": elapsed,
            "tuples_per_s": args.tuples / elapsed, "mb_per_s": mb / elapsed}), flush=True)


if __name__ == "__main__":
    main()
