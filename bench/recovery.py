"""Recovery time after SIGKILL of a worker (exactly-once word count, rate-limited spout).

Each round: let the topology run ``--settle`` s, SIGKILL one worker (alternating), then
measure
* TM-side: ``status()["recoveries"][-1]["duration_ms"]`` (failure detected → all workers
  prepared and started), and
* wall time from the kill until the last stateful bolt ("count") executes again, seen via
  ``handle.metrics()``: its per-task executed counter restarts from 0 in the new generation,
  so "resumed" = the generation advanced and a count task reports 0 < executed < before.

    python bench/recovery.py [--rounds 5] [--rate 20000] [--settle 2.5] [--json]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import bench_home, build_wordcount, emit_json, median  # noqa: E402

from jstormpy import Config, LocalCluster  # noqa: E402


def count_tasks(handle) -> dict[str, int]:
    m = handle.metrics("count")
    return {t: int(v["executed"]) for t, v in m.get("tasks", {}).items()}


def wait_state(handle, state: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        st = handle.status()
        if st["state"] == state:
            return st
        if time.monotonic() > deadline:
            raise TimeoutError(f"state {st['state']!r}, wanted {state!r}")
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rate", type=float, default=20_000, help="sentences/s offered")
    p.add_argument("--settle", type=float, default=2.5, help="s of running before each kill")
    p.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=60.0, help="per round")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = sys.stderr if args.json else sys.stdout

    def say(*a):
        print(*a, file=out, flush=True)

    rounds = []
    with bench_home() as home:
        result_dir = str(home / "results")
        os.makedirs(result_dir)
        topo = build_wordcount("bench-recovery", result_dir, 0, rate=args.rate)
        conf = Config(workers=2, guarantee="exactly_once",
                      checkpoint_interval_ms=args.checkpoint_interval_ms,
                      heartbeat_interval_ms=100, log_level="WARNING",
                      max_restarts=args.rounds + 10)
        with LocalCluster() as cluster:
            handle = cluster.submit(topo, conf)
            wait_state(handle, "running", args.timeout)
            for rnd in range(args.rounds):
                time.sleep(args.settle)
                st = handle.status()
                if st["state"] != "running":
                    st = wait_state(handle, "running", args.timeout)
                gen0 = st["generation"]
                n_rec0 = len(st["recoveries"])
                last_cp = (st.get("last_completed_checkpoint") or {}).get("id")
                before = count_tasks(handle)
                wid = rnd % 2
                proc = handle._launcher.workers[wid]
                t_kill = time.monotonic()
                os.kill(proc.pid, signal.SIGKILL)
                resumed_any = resumed_all = None
                deadline = t_kill + args.timeout
                while time.monotonic() < deadline:
                    st = handle.status()
                    if st["generation"] > gen0 and st["state"] == "running":
                        now = count_tasks(handle)
                        fresh = [t for t, v in now.items() if 0 < v < before.get(t, 1 << 62)]
                        if fresh and resumed_any is None:
                            resumed_any = time.monotonic() - t_kill
                        if len(fresh) == len(before) and before:
                            resumed_all = time.monotonic() - t_kill
                            break
                    time.sleep(0.01)
                else:
                    raise TimeoutError(f"round {rnd}: processing did not resume in "
                                       f"{args.timeout} s")
                st = handle.status()
                rec = st["recoveries"][-1] if len(st["recoveries"]) > n_rec0 else {}
                r = {"round": rnd, "worker": wid, "tm_ms": rec.get("duration_ms"),
                     "resumed_any_ms": resumed_any * 1000 if resumed_any else None,
                     "resumed_all_ms": resumed_all * 1000 if resumed_all else None,
                     "restored_checkpoint": rec.get("checkpoint"), "last_cp_before": last_cp}
                rounds.append(r)
                say(f"round {rnd}: killed worker {wid}; TM recovery {r['tm_ms']} ms; count "
                    f"executing again after {r['resumed_any_ms']:.0f} ms (all count tasks "
                    f"{r['resumed_all_ms']:.0f} ms); restored checkpoint "
                    f"{r['restored_checkpoint']}")

    def stats(key: str) -> dict:
        xs = [r[key] for r in rounds if r[key] is not None]
        return {"p50": median(xs), "max": max(xs) if xs else None}

    result = {"rounds": rounds, "tm_ms": stats("tm_ms"),
              "resumed_any_ms": stats("resumed_any_ms"), "resumed_all_ms": stats("resumed_all_ms"),
              "rate_sentences_per_s": args.rate}
    say(f"recovery over {len(rounds)} kills: TM-side p50 {result['tm_ms']['p50']:.0f} ms, max "
        f"{result['tm_ms']['max']:.0f} ms; kill → last bolt executing again p50 "
        f"{result['resumed_all_ms']['p50']:.0f} ms, max {result['resumed_all_ms']['max']:.0f} ms")
    if args.json:
        emit_json(result)
    return result


if __name__ == "__main__":
    main()
