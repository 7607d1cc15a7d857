"""The chaos soak: many seeded scenarios, one row each, totals per fault class.

``jstorm chaos`` and ``python -m jstormpy.testing.chaos`` run :func:`main`::

    jstorm chaos -n 30 --seed 1                  # 30 scenarios, seeds 1..30
    jstorm chaos -n 9 --fault stall --topology windowed

Scenario ``i`` has seed ``seed + i``; unless ``--fault`` is given, the fault classes are
taken in turn (scenario ``i`` gets class ``i mod len(FAULT_KINDS)``) so every class is
covered, and the seed draws the topology and the fault's parameters. The exit code is 1
if any scenario lost, duplicated or reordered an event, ended with state different from a
batch recomputation, or did not drain.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TextIO

from jstormpy.testing.chaos.scenarios import FAULT_KINDS, Scenario, ScenarioResult, run_scenario
from jstormpy.testing.chaos.topologies import ALL_TOPOLOGIES

_ROW = ("{seed:>6} {topology:<10} {fault:<40} {lost:>5} {dup:>5} {reord:>6} {state:>6} "
        "{rec:>9} {secs:>6}")


def plan_scenarios(count: int, seed: int = 1, fault: str | None = None,
                   topology: str | None = None,
                   kinds: Sequence[str] = FAULT_KINDS) -> list[Scenario]:
    """``count`` scenarios from seeds ``seed .. seed+count-1``, cycling through the fault
    classes ``kinds`` (default: all of :data:`FAULT_KINDS`) unless ``fault`` fixes one."""
    return [Scenario.draw(seed + i, topology=topology, kind=fault or kinds[i % len(kinds)])
            for i in range(count)]


def format_header() -> str:
    """The table's header line."""
    return _ROW.format(seed="seed", topology="topology", fault="fault", lost="lost",
                       dup="dup", reord="reord", state="state", rec="recovery",
                       secs="run")


def format_row(result: ScenarioResult) -> str:
    """One scenario as a table row (recovery in seconds; ``-`` if the fault never fired)."""
    v = result.verdict
    rec = "-" if result.recovery_s is None else f"{result.recovery_s:.2f}s"
    state = "ok" if not v.state_problems else "WRONG"
    if not result.drained:
        state = "HUNG" if not result.error.startswith("not drained") else "STUCK"
    return _ROW.format(seed=result.scenario.seed, topology=result.scenario.topology,
                       fault=result.scenario.fault.describe()[:40], lost=v.lost,
                       dup=v.duplicated, reord=v.reordered, state=state, rec=rec,
                       secs=f"{result.seconds:.0f}s")


def format_summary(results: Sequence[ScenarioResult]) -> list[str]:
    """Totals, and recovery p50/max per fault class."""
    lines = [f"total: {len(results)} scenarios, "
             f"{sum(r.verdict.lost for r in results)} lost, "
             f"{sum(r.verdict.duplicated for r in results)} duplicated, "
             f"{sum(r.verdict.reordered for r in results)} reordered, "
             f"{sum(1 for r in results if r.verdict.state_problems)} with wrong state, "
             f"{sum(1 for r in results if not r.drained)} not drained, "
             f"{sum(1 for r in results if not r.fired)} where the fault did not fire"]
    lines.append(f"{'fault class':<26} {'runs':>4} {'failed':>6} {'recovery p50':>13} "
                 f"{'max':>7}")
    for kind in FAULT_KINDS:
        runs = [r for r in results if r.scenario.fault.kind == kind]
        if not runs:
            continue
        times = [r.recovery_s for r in runs if r.recovery_s is not None]
        p50 = f"{statistics.median(times):.2f}s" if times else "-"
        top = f"{max(times):.2f}s" if times else "-"
        lines.append(f"{kind:<26} {len(runs):>4} {sum(1 for r in runs if not r.ok):>6} "
                     f"{p50:>13} {top:>7}")
    return lines


def run_soak(scenarios: Iterable[Scenario], out: TextIO = sys.stdout,
             run: Callable[[Scenario], ScenarioResult] = run_scenario,
             verbose: bool = False) -> list[ScenarioResult]:
    """Run each scenario, printing its row as it finishes; returns the results."""
    results: list[ScenarioResult] = []
    print(format_header(), file=out, flush=True)
    for scenario in scenarios:
        try:
            result = run(scenario)
        except KeyboardInterrupt:  # Ctrl-C: the totals of the scenarios finished so far
            print(f"interrupted during seed {scenario.seed}", file=out)
            break
        results.append(result)
        print(format_row(result), file=out, flush=True)
        if verbose or not result.ok:
            for event in result.events:
                print(f"{'':>7} {event}", file=out)
            if result.verdict.detail:
                print(f"{'':>7} {result.verdict.detail}", file=out)
            for problem in result.verdict.state_problems[:3]:
                print(f"{'':>7} state: {problem}", file=out)
            if result.error:
                print(f"{'':>7} error: {result.error}", file=out)
            if result.workdir and not result.ok:
                print(f"{'':>7} kept: {result.workdir}", file=out)
    for line in format_summary(results):
        print(line, file=out)
    return results


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The soak's options (shared by ``jstorm chaos`` and ``python -m``)."""
    p.add_argument("-n", "--scenarios", type=int, default=len(FAULT_KINDS),
                   help=f"how many scenarios (default {len(FAULT_KINDS)}: one per fault class)")
    p.add_argument("--seed", type=int, default=1, help="seed of the first scenario")
    p.add_argument("--fault", choices=FAULT_KINDS, default=None,
                   help="only this fault class (default: every class in turn)")
    p.add_argument("--topology", choices=ALL_TOPOLOGIES, default=None,
                   help="only this topology (default: drawn from each seed; "
                        "rescale_unkeyed_state always runs on 'shuffled')")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print what the injector did for every scenario")
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="run scenario SEED in DIR/seed-SEED and keep that directory "
                        "(output, checkpoints, TM and worker logs) when the scenario fails")


def keeping_failed(keep: Path,
                   run: Callable[..., ScenarioResult] = run_scenario
                   ) -> Callable[[Scenario], ScenarioResult]:
    """A scenario runner that works in ``keep/seed-SEED`` and removes that directory
    again unless the scenario failed (so its logs can be read afterwards)."""

    def run_and_keep(scenario: Scenario) -> ScenarioResult:
        work = keep / f"seed-{scenario.seed}"
        shutil.rmtree(work, ignore_errors=True)
        result = run(scenario, workdir=work)
        if result.ok:
            shutil.rmtree(work, ignore_errors=True)
        return result

    return run_and_keep


def run_from_args(args: argparse.Namespace) -> int:
    """Run the soak ``args`` describe; 0 if every scenario was exactly-once and drained."""
    if args.scenarios < 1:
        print("jstorm chaos: -n must be >= 1", file=sys.stderr)
        return 2
    run: Callable[[Scenario], ScenarioResult] = run_scenario
    if not args.verbose:
        # the launchers' "worker N was killed ...; restarting it" lines are the faults this
        # soak injects on purpose: the table reports them, one row per scenario
        logging.getLogger("jstormpy.deploy").setLevel(logging.ERROR)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        run = keeping_failed(args.keep)
    results = run_soak(plan_scenarios(args.scenarios, args.seed, args.fault, args.topology),
                       run=run, verbose=args.verbose)
    return 0 if all(r.ok for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m jstormpy.testing.chaos``."""
    p = argparse.ArgumentParser(prog="python -m jstormpy.testing.chaos",
                                description="seeded exactly-once chaos soak")
    add_arguments(p)
    return run_from_args(p.parse_args(argv))
