"""``jstorm simulate``: run seeds of the deterministic simulation, print failing ones."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from jstormpy.api.errors import ConfigError
from jstormpy.testing.simulation.faults import ALL_FAULTS, Fault
from jstormpy.testing.simulation.holes import HOLES, reintroduced
from jstormpy.testing.simulation.judging import ReachTally
from jstormpy.testing.simulation.scenario import SINK_KINDS, run_seed, run_seeds
from jstormpy.testing.simulation.world import TRACE_EVENTS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", type=int, default=1000, metavar="N",
                   help="how many seeds to run, from --first (default 1000)")
    p.add_argument("--first", type=int, default=0, metavar="S",
                   help="the first seed of the range (default 0)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="replay one seed and print its event trace")
    p.add_argument("--faults", default="", metavar="LIST",
                   help="comma-separated fault kinds to draw from (default: all of "
                        f"{', '.join(f.value for f in ALL_FAULTS)})")
    p.add_argument("--sink", default=None, choices=SINK_KINDS,
                   help="every seed's sink kind (default: each seed draws log, files or "
                        "staged); the seed's other draws stay as they are")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="stop after this many seconds of wall time")
    p.add_argument("--hole", type=int, default=None, choices=sorted(HOLES),
                   help="re-introduce a known hole (holes.py: issues 23, 25, 27) into "
                        "the real code first (shows the simulator finds it)")
    p.add_argument("--show", type=int, default=10, metavar="K",
                   help="failing seeds to print (default 10)")
    p.add_argument("--trace", type=int, default=TRACE_EVENTS, metavar="N",
                   help=f"with --seed: print the last N events (default {TRACE_EVENTS}; "
                        "0: every event)")


def _faults(text: str) -> tuple[Fault, ...]:
    if not text:
        return ALL_FAULTS
    out = []
    for name in text.split(","):
        try:
            out.append(Fault(name.strip()))
        except ValueError:
            known = ", ".join(f.value for f in ALL_FAULTS)
            raise ConfigError(f"unknown fault {name.strip()!r} (known: {known})") from None
    return tuple(out)


def run_from_args(args: argparse.Namespace) -> int:
    allowed = _faults(args.faults)
    hole: Any = reintroduced(args.hole) if args.hole else contextlib.nullcontext()
    with hole:
        if args.seed is not None:
            result = run_seed(args.seed, allowed, args.trace or None, sink=args.sink)
            print(f"seed {result.seed}: {result.outcome} ({result.faults}; "
                  f"{result.steps} events)")
            for v in result.violations:
                print(f"  violation: {v}")
            print("events:" if not args.trace else "last events:")
            for line in result.trace:
                print(f"  {line}")
            return 0 if result.ok else 1
        seeds = range(args.first, args.first + args.seeds)
        tally = ReachTally()
        failures, ran, secs = run_seeds(seeds, allowed, budget_s=args.budget, tally=tally,
                                        sink=args.sink)
    rate = ran / secs if secs else 0.0
    print(f"simulate: {ran} seeds in {secs:.1f} s ({rate:.0f} seeds/s), "
          f"{len(failures)} failing" + (f" (hole {args.hole} re-introduced)"
                                        if args.hole else ""))
    print("reached, per fault kind (seeds that drew it; of those, seeds that reached each "
          "step it tests):")
    for line in tally.lines():
        print(f"  {line}")
    for f in failures[:args.show]:
        print(f"  seed {f.seed}: {f.outcome} [{f.faults}] {f.violations[0][:160]}")
        print(f"    replay: jstorm simulate --seed {f.seed}"
              + (f" --hole {args.hole}" if args.hole else "")
              + (f" --faults {args.faults}" if args.faults else "")
              + (f" --sink {args.sink}" if args.sink else ""))
    sys.stdout.flush()
    return 1 if failures else 0
