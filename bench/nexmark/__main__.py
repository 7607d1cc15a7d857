"""``python -m bench.nexmark generate | run | suite`` (docs/nexmark.md)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.nexmark import queries as Q
from bench.nexmark.check import Verdict, compare, read_output
from bench.nexmark.engines import ENGINES, Engine
from bench.nexmark.generator import (
    DEFAULT_DELAY_MS,
    DEFAULT_RATE,
    GeneratorConfig,
    write_events,
)
from bench.nexmark.reference import events_for_checks

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Outcome:
    """One run of one query on one engine."""

    status: str                 # "ok", "failed", "not expressible", "not installed", "error"
    seconds: float | None = None
    guarantee: str = ""
    detail: str = ""
    verdict: Verdict | None = None


def run_engine(engine: Engine, query: str, events: str, out: str, delay_ms: int,
               parallelism: int, timeout_s: float = 3600) -> Outcome:
    """Run ``query`` on ``engine`` into ``out`` (emptied first); not checked."""
    python = engine.python()
    if python is None:
        return Outcome("not installed", detail=f"no interpreter (${engine.python_env})")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [python, "-m", engine.module, "--query", query, "--events", os.path.abspath(events),
           "--out", os.path.abspath(out), "--delay-ms", str(delay_ms),
           "--parallelism", str(parallelism)]
    # Its own process group: on a timeout, the engine's children (Bytewax's processes,
    # Flink's JVM) go too.
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome("error", detail=f"timed out after {timeout_s:.0f} s")
    fields = dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line
                  and line.split("=", 1)[0].isupper())
    if "NOT_EXPRESSIBLE" in fields:
        return Outcome("not expressible", detail=fields["NOT_EXPRESSIBLE"])
    if proc.returncode != 0 or "PROCESSING_SECONDS" not in fields:
        tail = (stderr or stdout).strip().splitlines()[-5:]
        return Outcome("error", detail=f"exit {proc.returncode}: " + " | ".join(tail))
    return Outcome("ok", float(fields["PROCESSING_SECONDS"]), fields.get("GUARANTEE", ""))


def run_and_check(engine: Engine, query: str, events_path: str, events: list[dict],
                  out: str, delay_ms: int, parallelism: int,
                  timeout_s: float = 3600) -> Outcome:
    """Run, then compare the committed output with the reference."""
    o = run_engine(engine, query, events_path, out, delay_ms, parallelism, timeout_s)
    if o.status != "ok":
        return o
    v = compare(query, events, read_output(out))
    return Outcome("ok" if v.ok else "failed", o.seconds, o.guarantee, v.detail, v)


def cmd_generate(a: argparse.Namespace) -> int:
    n = write_events(GeneratorConfig(a.events, a.seed, a.rate, a.delay_ms), a.out)
    print(f"wrote {n} events to {a.out}")
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    events = events_for_checks(a.events)
    o = run_and_check(ENGINES[a.engine], a.query, a.events, events, a.out, a.delay_ms,
                      a.parallelism)
    rate = f", {len(events) / o.seconds:,.0f} events/s" if o.seconds else ""
    print(f"{a.query} on {a.engine}: {o.status}{rate}"
          + (f" ({o.seconds:.2f} s)" if o.seconds else "")
          + (f", {o.verdict.rows} rows" if o.verdict else "")
          + (f"; {o.detail}" if o.detail else "") + (f"; {o.guarantee}" if o.guarantee else ""))
    return 0 if o.status in ("ok", "not expressible", "not installed") else 1


def cmd_suite(a: argparse.Namespace) -> int:
    work = tempfile.mkdtemp(prefix="nexmark-suite-")
    events_path = a.events_file or os.path.join(work, "events.jsonl")
    if not a.events_file:
        write_events(GeneratorConfig(a.events, a.seed, DEFAULT_RATE, a.delay_ms), events_path)
    events = events_for_checks(events_path)
    queries = a.queries.split(",") if a.queries else list(Q.QUERIES)
    engines = a.engines.split(",") if a.engines else list(ENGINES)
    results: dict[tuple[str, str], list[Outcome]] = {}
    for query in queries:
        for name in engines:
            runs = []
            for i in range(a.runs):
                o = run_and_check(ENGINES[name], query, events_path, events,
                                  os.path.join(work, f"{name}-{query}-{i}"), a.delay_ms,
                                  a.parallelism, a.timeout)
                runs.append(o)
                print(f"# {query} {name} run {i + 1}: {o.status}"
                      + (f" {o.seconds:.2f} s" if o.seconds else "")
                      + (f" {o.detail}" if o.detail else ""), file=sys.stderr, flush=True)
                if o.status != "ok":
                    break
            results[(query, name)] = runs
    table = render(results, queries, engines, len(events), a)
    print(table)
    if a.table:
        Path(a.table).write_text(table + "\n", encoding="utf-8")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _cell(runs: list[Outcome], events: int) -> str:
    last = runs[-1]
    if last.status != "ok":
        return {"failed": "FAILED", "error": "error", "not expressible": "not expressible",
                "not installed": "not installed"}[last.status]
    return f"{statistics.median(events / o.seconds for o in runs if o.seconds):,.0f}"


def _guarantee(results: dict[tuple[str, str], list[Outcome]], engine: str) -> str:
    return next((o.guarantee for (_q, n), runs in results.items() for o in runs
                 if n == engine and o.guarantee), "n/a")


def render(results: dict[tuple[str, str], list[Outcome]], queries: list[str],
           engines: list[str], events: int, a: argparse.Namespace) -> str:
    """The markdown table: events/s (median of the runs) per query per engine."""
    lines = [f"Nexmark, {events:,} events (seed {a.seed}, delay {a.delay_ms} ms), "
             f"parallelism {a.parallelism}, median events/s of {a.runs} runs",
             "", "| query | " + " | ".join(ENGINES[e].label for e in engines) + " |",
             "|---|" + "---:|" * len(engines)]
    for q in queries:
        lines.append(f"| {q} {Q.QUERIES[q].title} | "
                     + " | ".join(_cell(results[(q, e)], events) for e in engines) + " |")
    lines.append("")
    lines.append("Guarantees: " + "; ".join(
        f"{ENGINES[e].label}: {_guarantee(results, e)}" for e in engines))
    if "bytewax" in engines:
        lines.append("Bytewax reads the file as one input partition for q5, q7, q8 and q11 "
                     "(its per-key watermark drops a second partition's records as late).")
    if "pyflink" in engines:
        lines.append("PyFlink DataStream's q11 is a keyed process function: its Python "
                     "session-window operator fails its checkpoints.")
    notes = sorted({f"{e} {q}: {rs[-1].status}: {rs[-1].detail}"
                    for (q, e), rs in results.items() if rs[-1].status != "ok"
                    or (q == "q12" and rs[-1].detail)})
    if notes:
        lines += ["", *("- " + n for n in notes)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.nexmark",
                                description="Nexmark on jstormpy, Bytewax and PyFlink")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write a deterministic events file")
    g.add_argument("--events", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True)
    g.add_argument("--rate", type=int, default=DEFAULT_RATE,
                   help="events per second of event time")
    g.add_argument("--delay-ms", type=int, default=DEFAULT_DELAY_MS,
                   help="out-of-order delivery bound")
    r = sub.add_parser("run", help="run one query on one engine and check it")
    r.add_argument("--query", required=True, choices=list(Q.QUERIES))
    r.add_argument("--events", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--engine", default="jstormpy", choices=list(ENGINES))
    r.add_argument("--delay-ms", type=int, default=DEFAULT_DELAY_MS,
                   help="the watermark bound: the delay the events file was made with")
    r.add_argument("--parallelism", type=int, default=2)
    s = sub.add_parser("suite", help="every query on every engine, one table")
    s.add_argument("--events", type=int, default=1_000_000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--delay-ms", type=int, default=DEFAULT_DELAY_MS)
    s.add_argument("--events-file", help="use this events file instead of generating one")
    s.add_argument("--runs", type=int, default=3)
    s.add_argument("--parallelism", type=int, default=2)
    s.add_argument("--queries", help="comma-separated subset, e.g. q0,q5")
    s.add_argument("--engines", help="comma-separated subset of " + ",".join(ENGINES))
    s.add_argument("--timeout", type=float, default=3600,
                   help="seconds one run may take before it is reported as an error")
    s.add_argument("--table", help="also write the table to this file")
    s.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args(argv)
    return {"generate": cmd_generate, "run": cmd_run, "suite": cmd_suite}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
