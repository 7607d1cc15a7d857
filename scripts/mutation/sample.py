"""Prepare a cosmic-ray session for issue 37's mutation run (docs/simulation.md,
"Mutation testing"): skip the mutants inside type annotations, then keep a seeded random
sample of the rest and skip the others, as cosmic-ray's own filters do.

* Annotations: every module in scope starts with ``from __future__ import annotations``,
  so an annotation is a string that nothing evaluates at run time; a mutant inside one
  (``int | None`` -> ``int << None``, 9 % of the scope) is equivalent by construction,
  one argument for the whole class.
* The sample: the whole scope takes days of CPU under the issue's test command; a uniform
  sample gives its kill rate with a known error, and the same ``--seed`` and ``--keep``
  give the same sample of the same code.

    python scripts/mutation/sample.py mutation.sqlite --keep 200 --seed 37
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
    args = parser.parse_args()
    spans: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    with use_db(args.session, WorkDB.Mode.open) as db:
        in_annotation, rest = [], []
        for item in db.pending_work_items:
            mutation = item.mutations[0]
            path = str(mutation.module_path)
            if path not in spans:
                spans[path] = annotation_spans(Path(path))
            pos = tuple(mutation.start_pos)
            inside = any(start <= pos < end for start, end in spans[path])
            (in_annotation if inside else rest).append(item.job_id)
        rest.sort()
        keep = set(random.Random(args.seed).sample(rest, min(args.keep, len(rest))))
        db.set_multiple_results(in_annotation, WorkResult(
            worker_outcome=WorkerOutcome.SKIPPED, output=ANNOTATION))
        db.set_multiple_results([job for job in rest if job not in keep], WorkResult(
            worker_outcome=WorkerOutcome.SKIPPED, output=NOT_SAMPLED))
    print(f"{len(in_annotation) + len(rest)} mutants: {len(in_annotation)} inside "
          f"annotations (skipped), {len(keep)} of the other {len(rest)} kept "
          f"(seed {args.seed})")


if __name__ == "__main__":
    main()
