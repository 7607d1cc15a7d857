"""Keep a seeded random sample of a cosmic-ray session's pending mutants; mark the rest
skipped, as cosmic-ray's own filters do (docs/simulation.md, "Mutation testing").

The whole scope takes days of CPU under the issue's test command; a uniform sample gives
its kill rate with a known error, and the same ``--seed`` and ``--keep`` give the same
sample of the same code.

    python scripts/mutation/sample.py mutation.sqlite --keep 150 --seed 37
"""

from __future__ import annotations

import argparse
import random

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session")
    parser.add_argument("--keep", type=int, required=True)
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    with use_db(args.session, WorkDB.Mode.open) as db:
        pending = sorted(item.job_id for item in db.pending_work_items)
        keep = set(random.Random(args.seed).sample(pending, min(args.keep, len(pending))))
        skipped = [job for job in pending if job not in keep]
        db.set_multiple_results(skipped, WorkResult(
            worker_outcome=WorkerOutcome.SKIPPED,
            output="not in the sample (scripts/mutation/sample.py)"))
    print(f"{len(pending)} mutants, {len(keep)} kept (seed {args.seed}), "
          f"{len(skipped)} skipped")


if __name__ == "__main__":
    main()
