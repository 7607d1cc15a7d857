#!/usr/bin/env bash
# Create .venv and install jstormpy with its test dependencies (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.jstorm-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
# Headless Chromium for the web-UI browser test (tests/ops/test_ui_browser.py skips without it).
# Debian's package; Playwright drives it and never downloads a browser of its own.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -q && apt-get install -y -q chromium) >/dev/null 2>&1 || \
      echo "setup: could not install chromium; the browser UI test will be skipped" >&2
  else
    echo "setup: chromium not installed (needs root: apt-get install -y chromium)" >&2
  fi
fi
