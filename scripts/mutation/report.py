"""Report one mutation sample run in parts (docs/simulation.md, "Mutation testing"): the
union of the cosmic-ray sessions that each ran a part of it.

A sample split with ``sample.py --part K/N`` runs as N sessions in N checkouts; a session
split after it started is copied, and each copy records the other's part as skipped
(``sample.OTHER_PART``). A mutant's result is the one that is not that skipped row. The
sessions are matched by where a mutant is (module, position, operator, occurrence), not by
job id: ``cosmic-ray init`` makes job ids at random, so separately initialised parts do
not share them. Two results of one mutant must agree (the results from before a split are
in both copies); one that does not is reported as a conflict.

    python scripts/mutation/report.py part1.sqlite part2.sqlite [--survivors] [--diff]

The sessions are opened read-only: a running ``cosmic-ray exec`` may write them meanwhile.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

OTHER_PART = "in another part of the sample (scripts/mutation/sample.py --part)"
"""``sample.OTHER_PART``: the row a part records for a mutant of another part."""
TIMEOUT = "timeout"
"""The output cosmic-ray records for a mutant killed by its ``timeout``."""

Where = tuple[str, int, int, int, int, str, int]
"""A mutant's place: module, start row and column, end row and column, operator,
occurrence."""


class ReportError(Exception):
    """A session cannot be read as one part of a sample."""


@dataclass(frozen=True)
class Result:
    """One mutant's result in one session."""

    where: Where
    session: str
    outcome: str
    """``killed``, ``survived``, ``timeout`` (killed by cosmic-ray's timeout), ``skipped``
    (outside the sample: an annotation, not drawn), ``other part``, or another worker
    outcome in lower case (``exception``, ``abnormal``); ``pending`` without a result."""
    diff: str


@dataclass(frozen=True)
class Mutant:
    """One mutant of the sample, its result taken from the sessions."""

    where: Where
    outcome: str
    """As :attr:`Result.outcome`, never ``other part``; ``pending`` if no session ran it
    yet, ``conflict`` if two sessions disagree."""
    sessions: tuple[str, ...]
    """The sessions that hold this result (several for one from before a split)."""
    diff: str

    @property
    def location(self) -> str:
        """``module:row operator``, as the docs' tables name a survivor."""
        return f"{self.where[0]}:{self.where[1]} {self.where[5]}"


def outcome_of(worker: str | None, test: str | None, output: str | None) -> str:
    """A result row's outcome (:attr:`Result.outcome`)."""
    if worker is None:
        return "pending"
    if worker == "SKIPPED":
        return "other part" if output == OTHER_PART else "skipped"
    if worker != "NORMAL":
        return worker.lower()
    if test == "KILLED":
        return TIMEOUT if output == TIMEOUT else "killed"
    if test == "SURVIVED":
        return "survived"
    return (test or "unknown").lower()


def read_session(path: Path) -> list[Result]:
    """Every mutant of the session at ``path`` and its result there, read-only."""
    if not path.is_file():
        raise ReportError(f"{path}: no such session file")
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0) as db:
            rows = db.execute(
                "SELECT m.module_path, m.start_pos_row, m.start_pos_col, m.end_pos_row, "
                "m.end_pos_col, m.operator_name, m.occurrence, r.worker_outcome, "
                "r.test_outcome, r.output, r.diff FROM mutation_specs m "
                "LEFT JOIN work_results r ON r.job_id = m.job_id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"{path}: not a cosmic-ray session ({exc})") from exc
    return [Result((module, srow, scol, erow, ecol, op, occurrence), str(path),
                   outcome_of(worker, test, output), diff or "")
            for module, srow, scol, erow, ecol, op, occurrence, worker, test, output, diff
            in rows]


def union(sessions: Sequence[Sequence[Result]]) -> list[Mutant]:
    """The sample's mutants, each with its result from whichever session ran it.

    Raises:
        ReportError: the sessions are not of the same mutants (another scope or code).
    """
    places = [{r.where for r in results} for results in sessions]
    for i, other in enumerate(places[1:], start=2):
        if other != places[0]:
            raise ReportError(f"session {i} holds other mutants than session 1 "
                              f"({len(other ^ places[0])} differ): not parts of one sample")
    by_where: dict[Where, list[Result]] = {}
    for results in sessions:
        for r in results:
            by_where.setdefault(r.where, []).append(r)
    mutants = []
    for where in sorted(by_where):
        rows = [r for r in by_where[where] if r.outcome != "other part"]
        if rows and all(r.outcome == "skipped" for r in rows):
            continue  # outside the sample (an annotation, not drawn)
        ran = [r for r in rows if r.outcome not in ("pending", "skipped")]
        if not ran:
            mutants.append(Mutant(where, "pending", (), ""))
            continue
        outcomes = {r.outcome for r in ran}
        outcome = outcomes.pop() if len(outcomes) == 1 else "conflict"
        mutants.append(Mutant(where, outcome, tuple(r.session for r in ran), ran[0].diff))
    return mutants


def summary(mutants: Iterable[Mutant]) -> str:
    """The counts of the docs' paragraphs: run, killed (timeouts among them), survived,
    pending, and the kill rate of those run."""
    counts = Counter(m.outcome for m in mutants)
    killed = counts["killed"] + counts[TIMEOUT]
    survived = counts["survived"]
    run = killed + survived
    rate = f"{100 * killed / run:.0f} %" if run else "n/a"
    others = {k: v for k, v in counts.items()
              if k not in ("killed", TIMEOUT, "survived", "pending")}
    line = (f"sample of {sum(counts.values())}: {run} run, {killed} killed "
            f"({counts[TIMEOUT]} by the timeout), {survived} survived ({rate} killed), "
            f"{counts['pending']} pending")
    if others:
        line += ", " + ", ".join(f"{v} {k}" for k, v in sorted(others.items()))
    return line


def by_module(mutants: Iterable[Mutant]) -> list[tuple[str, int, int]]:
    """(module, killed, survived) of the mutants run, most survivors first."""
    killed: Counter[str] = Counter()
    survived: Counter[str] = Counter()
    for m in mutants:
        if m.outcome in ("killed", TIMEOUT):
            killed[m.where[0]] += 1
        elif m.outcome == "survived":
            survived[m.where[0]] += 1
    modules = set(killed) | set(survived)
    return sorted(((mod, killed[mod], survived[mod]) for mod in modules),
                  key=lambda row: (-row[2], -row[1], row[0]))


def by_session(mutants: Iterable[Mutant], paths: Sequence[str]) -> list[tuple[str, int]]:
    """How many results each session holds alone (a part's own since the split)."""
    alone: Counter[str] = Counter()
    for m in mutants:
        if len(m.sessions) == 1:
            alone[m.sessions[0]] += 1
    return [(p, alone[p]) for p in paths]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="+", type=Path,
                        help="the cosmic-ray session (.sqlite) of each part")
    parser.add_argument("--survivors", action="store_true",
                        help="list the survivors (module:row operator)")
    parser.add_argument("--diff", action="store_true", help="with --survivors: their diffs")
    args = parser.parse_args(argv)
    try:
        mutants = union([read_session(p) for p in args.sessions])
    except ReportError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    print(summary(mutants))
    if len(args.sessions) > 1:
        for path, n in by_session(mutants, [str(p) for p in args.sessions]):
            print(f"  {path}: {n} result(s) of its own")
    for module, killed, survived in by_module(mutants):
        print(f"  {module}: {killed} killed, {survived} survived")
    for m in mutants:
        if m.outcome == "conflict":
            print(f"conflict: {m.location}: the sessions disagree")
    if args.survivors:
        for m in mutants:
            if m.outcome == "survived":
                print(m.location)
                if args.diff:
                    print(m.diff)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader stopped early (``| head``): not an error
        sys.stderr.close()
        sys.exit(0)
