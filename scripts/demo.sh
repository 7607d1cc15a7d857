#!/usr/bin/env bash
# The main job: a windowed, stateful, exactly-once topology on the embedded default,
# with a worker SIGKILLed mid-run and the committed result verified.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh runtime
exec .venv/bin/jstorm run examples/sensor_windows.py --chaos "${SEED:-7}" --kills "${KILLS:-1}" "$@"
