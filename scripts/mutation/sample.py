"""Prepare a cosmic-ray session for issue 37's mutation run (docs/simulation.md,
"Mutation testing"): skip the mutants inside type annotations, then keep a seeded random
sample of the rest and skip the others, as cosmic-ray's own filters do.

* Annotations: every module in scope starts with ``from __future__ import annotations``,
  so an annotation is a string that nothing evaluates at run time; a mutant inside one
  (``int | None`` -> ``int << None``, 9 % of the scope) is equivalent by construction,
  one argument for the whole class.
* The sample: the whole scope takes days of CPU under the issue's test command; a uniform
  sample gives its kill rate with a known error, and the same ``--seed`` and ``--keep``
  give the same sample of the same code: the mutants are drawn in the order of where they
  are (module, position, operator), not of their job ids, which ``cosmic-ray init`` makes
  at random.
* ``--part K/N``: one of N parts of the sample (its mutants in that order, split into N
  runs of equal size), the others skipped, so N sessions of N checkouts run the sample on
  N cores (``cosmic-ray exec`` runs one mutant at a time, in place).

    python scripts/mutation/sample.py mutation.sqlite --keep 200 --seed 37 [--part 1/2]
"""

from __future__ import annotations

import argparse
import ast
import random
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

ANNOTATION = "inside a type annotation (never evaluated: from __future__ import annotations)"
NOT_SAMPLED = "not in the sample (scripts/mutation/sample.py)"
OTHER_PART = "in another part of the sample (scripts/mutation/sample.py --part)"


def part(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(K, N)``, 1 <= K <= N."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--part {text!r}: expected K/N, e.g. 1/2") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--part {text!r}: K must be 1..N")
    return k, n


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every annotation in the module at ``path``."""
    tree = ast.parse(path.read_text())
    source = path.read_text()
    if "from __future__ import annotations" not in source:
        return []  # annotations are evaluated here: their mutants are real
    spans = []
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
        elif isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        spans += [((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0))
                  for a in found if a is not None]
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session")
    parser.add_argument("--keep", type=int, required=True)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--part", type=part, default=(1, 1), metavar="K/N")
    args = parser.parse_args()
    spans: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    with use_db(args.session, WorkDB.Mode.open) as db:
        in_annotation: list[str] = []
        rest: list[str] = []
        where: dict[str, tuple[str, tuple[int, ...], tuple[int, ...], str, int]] = {}
        for item in db.pending_work_items:
            mutation = item.mutations[0]
            path = str(mutation.module_path)
            if path not in spans:
                spans[path] = annotation_spans(Path(path))
            pos = tuple(mutation.start_pos)
            inside = any(start <= pos < end for start, end in spans[path])
            (in_annotation if inside else rest).append(item.job_id)
            where[item.job_id] = (path, pos, tuple(mutation.end_pos), mutation.operator_name,
                                  mutation.occurrence)
        rest.sort(key=where.__getitem__)
        sample = random.Random(args.seed).sample(rest, min(args.keep, len(rest)))
        sample.sort(key=where.__getitem__)
        kept = set(sample)
        k, n = args.part
        mine = set(sample[(k - 1) * len(sample) // n:k * len(sample) // n])
        db.set_multiple_results(in_annotation, WorkResult(
            worker_outcome=WorkerOutcome.SKIPPED, output=ANNOTATION))
        db.set_multiple_results([job for job in rest if job not in kept], WorkResult(
            worker_outcome=WorkerOutcome.SKIPPED, output=NOT_SAMPLED))
        db.set_multiple_results([job for job in sample if job not in mine], WorkResult(
            worker_outcome=WorkerOutcome.SKIPPED, output=OTHER_PART))
    print(f"{len(in_annotation) + len(rest)} mutants: {len(in_annotation)} inside "
          f"annotations (skipped), {len(sample)} of the other {len(rest)} kept "
          f"(seed {args.seed}), part {k}/{n}: {len(mine)} to run")


if __name__ == "__main__":
    main()
