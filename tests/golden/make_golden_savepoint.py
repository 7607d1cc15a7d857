"""Write the golden savepoint: ``python -m tests.golden.make_golden_savepoint DIR``.

Run once with the release whose format it pins (0.1.0, main at 671f61b) and checked in;
never regenerated to make a failing test pass. It runs the golden topology at a low rate,
stops it with a savepoint part-way, and keeps the savepoint under DIR/savepoint.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jstormpy import Config, LocalCluster
from tests.golden.components import golden
from tests.integration.helpers import committed_count, wait_until


def main(target: Path) -> None:
    work = target / "work"
    with LocalCluster() as cluster:
        handle = cluster.submit(golden(work / "sums", work / "windows", rate=1500),
                                Config(workers=2, checkpoint_interval_ms=300))
        wait_until(lambda: committed_count(work / "sums") >= 1500, 60, "committed output")
        uri = handle.savepoint(f"file://{target / 'savepoint'}", stop=True)
    print(uri)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
