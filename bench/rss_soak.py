"""A worker's memory over a long run: issue 36's RSS target.

The word count of ``bench/wordcount.py`` (sentences → split → count with managed state →
report, 2 workers, exactly-once, 1 s checkpoints) runs rate-limited for ``--minutes``; each
worker's RSS is read every ``--every`` seconds. The rate is ``--load`` × the peak of an
unthrottled run measured first, or ``--rate`` words/s. It prints, per worker, the RSS at
one minute and at the end and their ratio; the target is the end within 10 % of the
minute. The word counts are checked at the end.

    python -m bench.rss_soak                       # 10 minutes at half of the peak
    python -m bench.rss_soak --minutes 2 --rate 200000
"""

from __future__ import annotations

import argparse
import json
import os
import time

import psutil

from bench._common import (
    WORDS_PER_SENTENCE,
    bench_home,
    build_wordcount,
    fmt_rate,
    mb,
    read_results,
    run_wordcount,
)
from jstormpy import Config, LocalCluster


def soak(rate_words: float, minutes: float, every_s: float,
         checkpoint_interval_ms: int = 1000) -> dict:
    """Run the word count at ``rate_words`` for ``minutes``; RSS samples per worker."""
    n_sentences = int(rate_words / WORDS_PER_SENTENCE * minutes * 60)
    samples: dict[int, list[tuple[float, int]]] = {}
    with bench_home() as home:
        result_dir = str(home / "results")
        os.makedirs(result_dir)
        topo = build_wordcount("bench-rss-soak", result_dir, n_sentences,
                               rate_words / WORDS_PER_SENTENCE)
        conf = Config(workers=2, guarantee="exactly_once",
                      checkpoint_interval_ms=checkpoint_interval_ms, log_level="WARNING")
        with LocalCluster() as cluster:
            handle = cluster.submit(topo, conf)
            t0 = time.monotonic()
            procs: dict[int, psutil.Process] = {}
            next_at = t0
            while True:
                state = handle.status()["state"]
                if state == "drained":
                    break
                if state in ("failed", "killed"):
                    raise RuntimeError(f"topology {state}")
                if time.monotonic() - t0 > minutes * 60 * 3 + 120:
                    raise TimeoutError("the soak did not drain")
                for w in handle.workers():
                    if w.pid and w.alive and w.id not in procs:
                        procs[w.id] = psutil.Process(w.pid)
                now = time.monotonic()
                if now >= next_at:
                    for wid, proc in procs.items():
                        try:
                            samples.setdefault(wid, []).append(
                                (now - t0, proc.memory_info().rss))
                        except psutil.NoSuchProcess:
                            pass
                    next_at = now + every_s
                time.sleep(0.2)  # the polling interval of the drained/sampling loop
        reports = read_results(result_dir, "report")
    words = reports[-1]["words"] if reports else 0
    return {"rate_words_per_s": rate_words, "minutes": minutes, "samples": samples,
            "words": words, "words_ok": words == n_sentences * WORDS_PER_SENTENCE}


def at(samples: list[tuple[float, int]], t: float) -> int:
    """The RSS sample nearest ``t`` seconds into the run."""
    return min(samples, key=lambda s: abs(s[0] - t))[1]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--load", type=float, default=0.5, help="x the measured peak")
    p.add_argument("--rate", type=float, default=None, help="fixed words/s instead")
    p.add_argument("--every", type=float, default=5.0, help="seconds between RSS samples")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.rate is None:
        peak = run_wordcount(100_000, "exactly_once")["words_per_s"]
        rate = peak * args.load
        print(f"peak {fmt_rate(peak)} words/s; soaking at {args.load:.0%}: "
              f"{fmt_rate(rate)} words/s for {args.minutes:g} min", flush=True)
    else:
        rate = args.rate
        print(f"soaking at {fmt_rate(rate)} words/s for {args.minutes:g} min", flush=True)
    result = soak(rate, args.minutes, args.every)
    result["per_worker"] = {}
    for wid, s in sorted(result["samples"].items()):
        first, last = at(s, 60.0), s[-1][1]
        ratio = last / first if first else float("nan")
        result["per_worker"][wid] = {"rss_1min": first, "rss_end": last, "ratio": ratio,
                                     "rss_max": max(r for _, r in s)}
        print(f"worker {wid}: RSS at 1 min {mb(first)}, at {s[-1][0] / 60:.1f} min "
              f"{mb(last)} ({(ratio - 1) * 100:+.1f} %), max {mb(max(r for _, r in s))}"
              f" [{'within' if abs(ratio - 1) <= 0.10 else 'OUTSIDE'} 10 %]")
    print(f"words: {result['words']:,} ({'ok' if result['words_ok'] else 'COUNT MISMATCH'})")
    if args.json:
        print("BENCH_JSON " + json.dumps({k: v for k, v in result.items() if k != "samples"}))
    return result


if __name__ == "__main__":
    main()
