#!/usr/bin/env bash
# The whole test suite: unit, integration (real processes), chaos (SIGKILL), Spark.
# JSTORM_FAST=1 skips the slow chaos/Spark tests locally; CI runs everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q --durations=25 "$@"
