"""Run the whole benchmark suite with small sizes and print one table.

    python -m bench            # or: python bench/run.py [--only wordcount,recovery] [--json]

Every script in bench/ runs in its own process with ``--json``; the line starting with
``BENCH_JSON`` is collected. Default sizes keep the suite under ~5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# script → arguments giving small sizes (each script's own defaults are larger)
SUITE: list[tuple[str, list[str], float]] = [
    ("wordcount.py", ["--sentences", "150000", "--repeat", "2", "--latency-seconds", "5"], 240),
    ("checkpoint.py", ["--sentences", "150000", "--no-overhead", "--keys", "1000000",
                       "--repeat", "3"], 180),
    ("recovery.py", ["--rounds", "5", "--settle", "2.0"], 150),
    ("transport_bench.py", ["--tuples", "1000000"], 90),
    ("backend_bench.py", ["--keys", "200000", "--repeat", "1"], 90),
    ("incremental_bench.py", ["--keys", "1000000"], 240),
    ("window_bench.py", ["--records", "400000"], 180),
    ("backpressure.py", ["--seconds", "10"], 120),
    ("backpressure.py", ["--seconds", "10", "--queue-capacity", "8"], 120),
]
TARGETS = {
    "wc_amo": 200_000, "wc_eo": 500_000, "overhead": 10.0, "p99": 50.0, "recovery_ms": 3000,
}


def run_script(name: str, extra: list[str], timeout: float) -> dict[str, Any] | None:
    path = HERE / name
    if not path.exists():
        return None
    # as a module of the bench package, from the repository root: scripts that import
    # bench._common work (run as a file, bench/ itself would be the import root)
    cmd = [sys.executable, "-m", f"bench.{path.stem}", "--json", *extra]
    print(f"== {name} {' '.join(extra)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout,
                              cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        print(f"   TIMEOUT after {timeout:.0f} s", file=sys.stderr)
        return {"error": f"timeout after {timeout:.0f} s"}
    for line in proc.stderr.splitlines():
        if not line.startswith(("WARNING", "worker ")):
            print("   " + line, file=sys.stderr)
    data = None
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            data = json.loads(line[len("BENCH_JSON "):])
        else:
            print("   " + line, file=sys.stderr)
    print(f"   ({time.monotonic() - t0:.0f} s, exit {proc.returncode})", file=sys.stderr,
          flush=True)
    if data is None:
        return {"error": f"exit {proc.returncode}, no BENCH_JSON line"}
    return data


def g(d: Any, *keys: Any) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def num(x: Any, unit: str = "", nd: int = 0) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.{nd}f}{unit}"


def verdict(x: Any, target: float, higher_better: bool) -> str:
    if x is None:
        return ""
    ok = x >= target if higher_better else x <= target
    return "meets" if ok else "MISSES"


def machine() -> dict[str, str]:
    model = ""
    try:
        out = subprocess.run(["lscpu"], check=False, capture_output=True, text=True,
                             timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"nproc": str(os.cpu_count()), "cpu": model or platform.processor(),
            "python": platform.python_version(), "load_avg": " ".join(
                f"{x:.1f}" for x in os.getloadavg())}


def table(res: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    wc, cp, rec = res.get("wordcount"), res.get("checkpoint"), res.get("recovery")
    tr, be, win = res.get("transport_bench"), res.get("backend_bench"), res.get("window_bench")
    amo = g(wc, "runs", "at_most_once", "words_per_s")
    eo = g(wc, "runs", "exactly_once", "words_per_s")
    over = g(wc, "eo_overhead_pct")
    rows = [
        ("word count, at-most-once", num(amo, " words/s"), "≥ 200,000 (floor)",
         verdict(amo, TARGETS["wc_amo"], True)),
        ("word count, exactly-once", num(eo, " words/s"), "≥ 500,000",
         verdict(eo, TARGETS["wc_eo"], True)),
        ("exactly-once overhead", num(over, " %", 1), "≤ 10 %",
         verdict(over, TARGETS["overhead"], False)),
        ("physical floor (1-process Python loop)",
         num(g(wc, "physical_floor_words_per_s"), " words/s"), "", ""),
    ]
    for gu, short in (("exactly_once", "eo"), ("at_most_once", "amo")):
        lat = g(wc, "latency", gu)
        if lat:
            rows.append((f"e2e latency p50 / p99 at ½ peak, {short} "
                         f"({num(lat.get('achieved_words_per_s'))} words/s)",
                         f"{num(lat.get('p50'), ' ms', 1)} / {num(lat.get('p99'), ' ms', 1)}",
                         "p99 ≤ 50 ms" if gu == "exactly_once" else "",
                         verdict(lat.get("p99"), TARGETS["p99"], False)
                         if gu == "exactly_once" else ""))
    ck = g(cp, "wordcount_checkpoints")
    if ck:
        rows.append((f"checkpoint duration p50 / p99 (word count at full load, n={ck['n']})",
                     f"{num(ck['p50_ms'], ' ms')} / {num(ck['p99_ms'], ' ms')}", "", ""))
    big = g(cp, "big_state")
    if big:
        rows.append((f"checkpoint of {big['keys']:,} keys of state (forced, median)",
                     f"{num(big['checkpoint_ms_median'], ' ms')} "
                     f"({big['snapshot_bytes'] / 1e6:.0f} MB)", "", ""))
        rows.append(("pickle the same 1M-key dict in-process", num(big["pickle_ms"], " ms"),
                     "", ""))
    inc = res.get("incremental_bench")
    if inc:
        rows.append((f"incremental checkpoint, {inc['keys']:,} keys, "
                     f"{100 * inc['changed']:g} % changed: bytes / duration vs full",
                     f"{num(inc['incremental_bytes_pct'], ' %', 1)} / "
                     f"{num(inc['incremental_duration_pct'], ' %', 1)}", "≤ 10 %",
                     verdict(inc["incremental_duration_pct"], 10.0, False)))
        rows.append((f"restore, full vs base + {inc['chain_length'] - 1} deltas",
                     f"{num(inc['restore_full_s'] * 1000, ' ms')} / "
                     f"{num(inc['restore_incremental_s'] * 1000, ' ms')}", "", ""))
    if rec and "tm_ms" in rec:
        rows.append(("recovery after SIGKILL, TM-side p50 / max",
                     f"{num(rec['tm_ms']['p50'], ' ms')} / {num(rec['tm_ms']['max'], ' ms')}",
                     "≤ 3 s", verdict(rec["tm_ms"]["max"], TARGETS["recovery_ms"], False)))
        rows.append(("recovery, kill → last bolt executing again p50 / max",
                     f"{num(rec['resumed_all_ms']['p50'], ' ms')} / "
                     f"{num(rec['resumed_all_ms']['max'], ' ms')}",
                     "≤ 3 s",
                     verdict(rec["resumed_all_ms"]["max"], TARGETS["recovery_ms"], False)))
    rss = g(wc, "runs", "exactly_once", "worker_rss_bytes")
    if rss:
        rows.append(("worker RSS peak, exactly-once word count",
                     ", ".join(f"w{w} {v / 1e6:.0f} MB" for w, v in sorted(rss.items())), "",
                     ""))
    if big and big.get("worker_rss_bytes"):
        rows.append(("worker RSS peak, 1M keys of state",
                     ", ".join(f"w{w} {v / 1e6:.0f} MB"
                               for w, v in sorted(big["worker_rss_bytes"].items())), "", ""))
    if tr and "tuples_per_s" in tr:
        rows.append((f"transport, 2 processes, batches of {tr['batch']}",
                     f"{num(tr['tuples_per_s'], ' tuples/s')} ({tr['mb_per_s']:.0f} MB/s)", "",
                     ""))
    fb = g(be, "backends", "file://")
    if fb:
        rows.append((f"file:// backend put / get, {be['snapshot_mb']:.0f} MB snapshot",
                     f"{num(fb['put_ms'], ' ms')} / {num(fb['get_ms'], ' ms')}", "", ""))
    if win and "error" not in win:
        rate = next((v for k, v in win.items() if k.endswith("per_s")), None)
        rows.append(("windowed aggregation throughput (60 s / 1 s sliding, 10k keys)",
                     num(rate, " records/s"), "", ""))
    for key in sorted(k for k in res if k.startswith("backpressure")):
        bp = res[key]
        if "error" in bp:
            continue
        qc = bp.get("queue_capacity")
        rows.append((f"memory under backpressure, queue_capacity={qc} (bolt 10x slower, "
                     "RSS growth)",
                     f"{bp['rss_growth_mb']:.1f} MB (peak {bp['rss_peak_mb']:.0f} MB)", "", ""))
        rows.append((f"checkpoint duration under backpressure p50 / p99, queue_capacity={qc}",
                     f"{num(bp['checkpoint_p50_ms'], ' ms')} / "
                     f"{num(bp['checkpoint_p99_ms'], ' ms')}", "", ""))
    rs = res.get("rescale_bench") or {}
    if rs.get("rescales"):
        pauses = ", ".join(f"→ {r['to']}: {r['pause_ms']:.0f} ms" for r in rs["rescales"])
        rows.append((f"in-place rescale pause, {rs['keys']:,} keys of state", pauses, "", ""))
    for name, data in res.items():
        if isinstance(data, dict) and "error" in data:
            rows.append((f"{name}", "FAILED: " + data["error"], "", ""))
    return rows


def print_table(rows: list[tuple[str, str, str, str]], mach: dict[str, str]) -> None:
    print(f"\njstormpy benchmark suite — {mach['nproc']} cores ({mach['cpu']}), Python "
          f"{mach['python']}, load average at the end {mach['load_avg']}\n")
    head = ("figure", "measured", "target", "")
    w = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    print("| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(head)) + " |")
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated script stems to run")
    p.add_argument("--json", action="store_true", help="print all results as JSON at the end")
    args = p.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    t0 = time.monotonic()
    res: dict[str, Any] = {}
    listed = {s for s, _, _ in SUITE}
    extra_scripts = sorted(p.name for p in HERE.glob("*.py")
                           if "--json" in p.read_text()
                           if p.name not in listed and p.name not in
                           ("run.py", "__init__.py", "__main__.py", "_common.py",
                            "profile_wordcount.py"))
    for script, extra, timeout in [*SUITE, *[(s, [], 120.0) for s in extra_scripts]]:
        stem = script[:-3]
        if only and stem not in only:
            continue
        data = run_script(script, extra, timeout)
        if data is not None:
            key = stem
            while key in res:  # the same script run twice with other settings
                key += "+"
            res[key] = data
    mach = machine()
    print_table(table(res), mach)
    print(f"\n(suite took {time.monotonic() - t0:.0f} s)")
    if args.json:
        print(json.dumps({"machine": mach, "results": res}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
