"""CLI for in-place rescaling (docs/rescaling.md).

    jstorm rescale NAME COMPONENT=N [COMPONENT=N ...] [--workers N]
                                                       change running parallelisms
    jstorm upgrade NAME --code PKG --rescale           new code at its declared parallelism
"""

from __future__ import annotations

import argparse
from typing import Any

from jstormpy.api.errors import JStormError
from jstormpy.cli.client import MasterClient, Registration


def parse_changes(items: list[str], workers: int = 0) -> dict[str, int]:
    """``["count=4", "split=1"]`` -> ``{"count": 4, "split": 1}``.

    Raises:
        JStormError: an item is not COMPONENT=N with N an int >= 1.
    """
    changes: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit() or int(value) < 1:
            raise JStormError(f"rescale: {item!r} is not COMPONENT=PARALLELISM "
                              "(e.g. count=4, parallelism an int >= 1)")
        changes[name] = int(value)
    if not changes and not workers:
        raise JStormError("rescale needs at least one COMPONENT=PARALLELISM (e.g. count=4) "
                          "or --workers N")
    return changes


def cmd_rescale(args: argparse.Namespace) -> int:
    """``jstorm rescale NAME COMPONENT=N ...``: returns once the new layout runs."""
    if args.workers < 0:
        raise JStormError(f"rescale: --workers must be >= 1, got {args.workers}")
    changes = parse_changes(args.changes, args.workers)
    client = MasterClient.for_registration(Registration.load(args.name))
    state = client.rescale(changes, args.workers)
    if args.no_wait:
        print(f"rescale of {args.name} to {changes} started ({state['phase']})")
        return 0
    record = client.wait_rescale(int(state["requested"]), changes, args.timeout, args.workers)
    shown = ", ".join([f"{n}={p}" for n, p in changes.items()]
                      + ([f"{args.workers} workers"] if args.workers else []))
    extra = (f": spouts paused {record['pause_ms']:.0f} ms, total {record['total_ms']:.0f} ms"
             if "pause_ms" in record else "")
    print(f"rescaled {args.name} to {shown}{extra}")
    return 0


def upgrade_with_rescale(args: argparse.Namespace, client: MasterClient, package: bytes,
                         entry: str) -> int:
    """``jstorm upgrade NAME --code PKG --rescale``: every worker switches to the package at
    the parallelism it declares, in one in-place rescale; returns once it runs."""
    state = client.upgrade("rescale", package, entry)
    rescale = state["rescale"]
    changes = {str(n): int(p) for n, p in rescale["changes"].items()}
    shown = ", ".join(f"{n}={p}" for n, p in changes.items())
    print(f"upgrade --rescale of {args.name} to {rescale['code']} at {shown} started",
          flush=True)
    record = client.wait_rescale(int(rescale["requested"]), changes, args.timeout)
    upgrade = client.status(timeout=5.0)["upgrade"]
    extra = (f": spouts paused {record['pause_ms']:.0f} ms, total {record['total_ms']:.0f} ms"
             if "pause_ms" in record else "")
    print(f"upgraded {args.name} to {upgrade['stable_version']} at {shown}{extra}")
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``rescale`` to the CLI."""
    r = sub.add_parser("rescale", help="change the parallelism of running components")
    r.add_argument("name")
    r.add_argument("changes", nargs="*", metavar="COMPONENT=N")
    r.add_argument("--workers", type=int, default=0,
                   help="also change the number of worker processes (local launcher)")
    r.add_argument("--no-wait", action="store_true", help="return once the rescale started")
    r.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS",
                   help="how long to wait for the new layout to run (default 180)")
    r.set_defaults(func=cmd_rescale)
