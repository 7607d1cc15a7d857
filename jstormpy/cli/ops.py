"""Operations subcommands of ``jstorm`` and readable metrics tables.

    jstorm ui NAME [--open]                    print (and open) the web UI's URL
    jstorm loglevel NAME COMPONENT LEVEL       set a component's task log level ("*" = all)
    jstorm config NAME KEY VALUE               change a live-safe setting

Hooked into :func:`jstormpy.cli.main.build_parser` by :func:`add_parsers`.
"""

from __future__ import annotations

import argparse
import json
import webbrowser
from pathlib import Path
from typing import Any

from jstormpy.api.config import LOG_LEVELS
from jstormpy.api.errors import JStormError
from jstormpy.cli.client import MasterClient, Registration
from jstormpy.master.http_auth import TOKEN_HEADER, read_ui_token

LIVE_KEYS = ("checkpoint_interval_ms", "batch_linger_ms", "backpressure_high_watermark",
             "backpressure_low_watermark")


def _client(name: str) -> MasterClient:
    reg = Registration.load(name)
    return MasterClient.for_registration(reg)


def ui_url(name: str) -> str:
    """The web UI URL of a running topology (from ``run_dir/ui.port``)."""
    reg = Registration.load(name)
    port_file = Path(reg.run_dir) / "ui.port"
    try:
        port = int(port_file.read_text().strip())
    except (OSError, ValueError):
        raise JStormError(f"topology {name!r} has no web UI port yet ({port_file} missing); "
                          "is its Topology Master running?") from None
    host = reg.address.rsplit(":", 1)[0]
    return f"http://{host}:{port}/"


# ------------------------------------------------------------------------- tables
def human(n: float | None, unit: str = "") -> str:
    """1234567 → '1.23M' (None → '-')."""
    if n is None:
        return "-"
    a = abs(n)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{n / div:.2f}{suffix}{unit}" if a < div * 100 else \
                f"{n / div:.0f}{suffix}{unit}"
    return f"{n:.0f}{unit}" if float(n).is_integer() or a >= 100 else f"{n:.1f}{unit}"


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return "inf" if v == float("inf") else f"≤{v:g}"


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A plain-text table: the first ``left`` columns left-aligned, the rest right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


_AGG_HEAD = ["emitted", "executed", "emit/s", "exec/s", "queue", "busy", "p50 ms", "p99 ms",
             "errors", "buffered"]


def _agg_cells(a: dict[str, Any]) -> list[str]:
    busy = a.get("cpu_busy")  # cores the tasks keep busy (absent from an older TM)
    return [human(a["emitted"]), human(a["executed"]), human(a["emit_rate"]),
            human(a["execute_rate"]), f"{a['max_queue_fill'] * 100:.0f}%",
            "-" if busy is None else f"{busy * 100:.0f}%",
            _ms(a["latency_ms_p50"]), _ms(a["latency_ms_p99"]), str(a["errors"]),
            # records held in state (a dataflow join's buffered sides); absent: older TM
            human(a["state_records"]) if "state_records" in a else "-"]


_SUMMARY_OPTIONAL = (("late", "late_records"), ("errors", "errors"),
                     ("buffered", "state_records"))
"""End-of-run columns shown only when some component has a count in them."""


def format_run_summary(m: dict[str, Any]) -> str:
    """What each component did in a run that is over: counts and latencies, no rates (they
    are of the last interval, 0 once the input ended), one line for the workers; the
    late, error and buffered columns only when some component has such records."""
    comps = {**m.get("components", {}), "(topology)": m["topology"]}
    extra = [(head, key) for head, key in _SUMMARY_OPTIONAL
             if any(a.get(key) for a in comps.values())]
    rows = [[name, human(a["emitted"]), human(a["executed"]), _ms(a["latency_ms_p50"]),
             _ms(a["latency_ms_p99"]), *(human(a.get(key, 0)) for _, key in extra)]
            for name, a in comps.items()]
    text = table(["component", "emitted", "executed", "p50 ms", "p99 ms",
                  *(head for head, _ in extra)], rows)
    procs = m.get("workers_process", {})
    if procs:
        text += "\nworkers    " + ", ".join(
            f"{wid}: {human(p['rss_bytes'], 'B') if p.get('rss_bytes') else '-'} RSS"
            for wid, p in procs.items())
    return text


def format_metrics(m: dict[str, Any], tasks: bool = False) -> str:
    """Metrics as readable tables (components, workers, topology; tasks if asked)."""
    out = []
    rows = [[name, *_agg_cells(a)] for name, a in m.get("components", {}).items()]
    rows.append(["(topology)", *_agg_cells(m["topology"])])
    out.append(table(["component", *_AGG_HEAD], rows))
    procs = m.get("workers_process", {})
    wrows = []
    for wid, a in m.get("workers", {}).items():
        p = procs.get(wid, {})
        rss = human(p.get("rss_bytes"), "B") if p.get("rss_bytes") else "-"
        cpu = f"{p['cpu_percent']:.0f}%" if p.get("cpu_percent") is not None else "-"
        alive = "up" if p.get("alive", True) else "down"
        wrows.append([f"worker {wid}", alive, rss, cpu, *_agg_cells(a)])
    if wrows:
        out.append(table(["worker", "state", "rss", "cpu", *_AGG_HEAD], wrows))
    if tasks:
        trows = [[tid, str(t["component"]), str(t["worker"]), *_agg_cells(t)]
                 for tid, t in m.get("tasks", {}).items()]
        out.append(table(["task", "component", "worker", *_AGG_HEAD], trows, left=2))
    return "\n\n".join(out)


def print_metrics(m: dict[str, Any], tasks: bool = False) -> None:
    """Print :func:`format_metrics`."""
    print(format_metrics(m, tasks))


# ------------------------------------------------------------------------- commands
def cmd_ui(args: argparse.Namespace) -> int:
    url = ui_url(args.name)
    print(url)
    token = read_ui_token(Registration.load(args.name).run_dir)
    if token:  # POST /api/... needs it (docs/security.md); reading does not
        print(f"token for state-changing requests (header {TOKEN_HEADER}): {token}")
    if args.open and not webbrowser.open(url):
        print("no web browser could be started here (none installed, or no display): "
              "open the URL above yourself, e.g. through an SSH tunnel")
    return 0


def cmd_loglevel(args: argparse.Namespace) -> int:
    component = "" if args.component in ("*", "all") else args.component
    n = _client(args.name).set_log_level(component, args.level)
    print(f"log level of {component or 'every component'} set to {args.level.upper()} "
          f"on {n} worker(s)")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    value, scope = _client(args.name).set_config(args.key, args.value)
    where = "Topology Master" if scope == "master" else "every worker"
    print(f"{args.key} = {json.dumps(value)} (applied by the {where})")
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``ui``, ``loglevel`` and ``config`` (and ``metrics --tasks``) to the CLI."""
    u = sub.add_parser("ui", help="print the web UI URL of a topology")
    u.add_argument("name", help="the topology's name (see `jstorm list`)")
    u.add_argument("--open", action="store_true", help="also open it in a browser")
    u.set_defaults(func=cmd_ui)
    lv = sub.add_parser("loglevel", help="set a component's task log level at run time")
    lv.add_argument("name")
    lv.add_argument("component", help='component name, or "*" for every component')
    lv.add_argument("level", type=str.upper,
                    choices=LOG_LEVELS)
    lv.set_defaults(func=cmd_loglevel)
    c = sub.add_parser("config", help="change a live-safe setting: " + ", ".join(LIVE_KEYS))
    c.add_argument("name")
    c.add_argument("key", choices=LIVE_KEYS)
    c.add_argument("value")
    c.set_defaults(func=cmd_config)
    metrics = sub.choices.get("metrics")
    if metrics is not None:
        metrics.add_argument("--tasks", action="store_true", help="also show every task")
