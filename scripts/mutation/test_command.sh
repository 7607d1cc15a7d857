#!/usr/bin/env bash
# The mutation test command of issue 37 (docs/simulation.md, "Mutation testing"), run by
# cosmic-ray in the checkout it mutates. A mutant is killed when this fails. Cheapest
# stages first: a stage that fails ends the run, and each stage is part of the whole
# command, so stopping early kills exactly the mutants the whole command kills.
#   1. jstorm simulate, seeds 0-299 of every fault kind
#   2. the protocol's unit tests (UNIT_TESTS below: the files that exist in the code of
#      the issue's day and after, so the command is the same before and after)
#   3. jstorm simulate, seeds 300-2999 of every fault kind
#   4. the hunts: for each planted hole's fault kinds (holes.HOLE_FAULTS of the code under
#      test), 300 seeds of those kinds
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
UNIT_TESTS=(
  tests/unit/test_aligner.py tests/unit/test_coordinator.py tests/unit/test_deposed_leader.py
  tests/unit/test_inflight_commit_point.py tests/unit/test_keygroups.py
  tests/unit/test_one_commit_path.py tests/unit/test_rescale_commit.py
  tests/unit/test_rescale_state.py tests/unit/test_restore_plan.py
  tests/unit/test_savepoint_task_state.py tests/unit/test_savepoints.py
  tests/unit/test_sink_transactions.py tests/unit/test_snapshot_generation.py
  tests/unit/test_task_snapshots.py tests/unit/test_upgrade_quiescence.py
  tests/unit/test_upgrade_restore_off_lock.py
)
simulate() { "$PY" -m jstormpy.cli.main simulate --show 1 "$@" > /dev/null; }
simulate --seeds 300
JSTORM_FAST=1 "$PY" -m pytest -q -x -p no:cacheprovider "${UNIT_TESTS[@]}" > /dev/null
simulate --first 300 --seeds 2700
for kinds in $("$PY" -c "
from jstormpy.testing.simulation.holes import HOLE_FAULTS
for kinds in sorted({','.join(f.value for f in fs) for fs in HOLE_FAULTS.values()}):
    print(kinds)"); do
  simulate --seeds 300 --faults "$kinds"
done
