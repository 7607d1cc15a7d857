#!/usr/bin/env bash
# Create .venv and install jstormpy (idempotent). Prints one line per step; the tools' own
# output goes to .venv/setup.log (shown on failure).
#   bash scripts/setup.sh runtime   the engine and its CLI only (what the demo needs)
#   bash scripts/setup.sh [test]    plus the test tools (pytest, pyspark, mypy, ...) and, as
#                                   root, the Debian servers the tests run against
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case "$mode" in
  runtime|test) ;;
  *) echo "setup: unknown mode '$mode' (runtime or test)" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
log=.venv/setup.log
step() {  # step "what" command...: one line, the command's output in $log
  local what=$1
  shift
  echo "setup: $what"
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: FAILED: $what (last lines of $log):" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}
if [ ! -x .venv/bin/python ]; then
  mkdir -p .venv
  step "create .venv" "$PY" -m venv .venv
fi
: >"$log"
stamp=.venv/.jstorm-installed-$mode
if [ "$mode" = runtime ] && [ -f .venv/.jstorm-installed-test ] && \
    ! [ pyproject.toml -nt .venv/.jstorm-installed-test ] && \
    ! [ setup.py -nt .venv/.jstorm-installed-test ]; then
  stamp=.venv/.jstorm-installed-test  # the test install includes the runtime
fi
# setup.py lists the compiled modules: a new one (or a changed build) reinstalls, so the
# editable install's extensions are built again
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  step "upgrade pip" .venv/bin/python -m pip install -q --upgrade pip
  if [ "$mode" = runtime ]; then
    step "install jstormpy and its runtime dependencies (editable)" \
      .venv/bin/python -m pip install -q -e .
  else
    step "install jstormpy with its test tools: pytest, pyspark, mypy, ruff, playwright (editable)" \
      .venv/bin/python -m pip install -q -e '.[test]'
  fi
  touch "$stamp"
else
  echo "setup: .venv is up to date ($mode)"
fi
if [ "$mode" = runtime ]; then
  exit 0
fi
# apt-get with retries: another process (unattended upgrades, a parallel setup) may hold
# the dpkg lock for a while.
apt_install() {
  local i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    if (apt-get update -q && apt-get install -y -q "$@") >/dev/null 2>&1; then
      return 0
    fi
    sleep 6
  done
  return 1
}
# Real servers for the connector tests (tests/connectors, docs/connectors.md): Debian's
# PostgreSQL (initdb + pg_ctl, run as an unprivileged user) and Redis (Redis Streams).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing postgresql and redis-server (apt): the connector tests run against real servers"
    apt_install postgresql redis-server || \
      echo "setup: could not install postgresql/redis-server; connector server tests will be skipped" >&2
  else
    echo "setup: postgresql/redis-server not installed (needs root: apt-get install -y postgresql redis-server)" >&2
  fi
fi
# ZooKeeper for the standby Topology Master tests (tests/ha, `jstorm run --ha`): Debian's
# server jar, started by jstormpy/testing/servers/zookeeper.py in a temp dir (the package's own
# service is not used).
if ! [ -f /usr/share/java/zookeeper.jar ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing zookeeper (apt): the standby Topology Master tests elect through it"
    apt_install zookeeper || \
      echo "setup: could not install zookeeper; the standby Topology Master tests will be skipped" >&2
  else
    echo "setup: zookeeper not installed (needs root: apt-get install -y zookeeper)" >&2
  fi
fi
# Headless Chromium for the web-UI browser test (tests/ops/test_ui_browser.py skips without it).
# Debian's package; Playwright drives it and never downloads a browser of its own.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing chromium (apt): the web UI test drives a real browser"
    apt_install chromium || \
      echo "setup: could not install chromium; the browser UI test will be skipped" >&2
  else
    echo "setup: chromium not installed (needs root: apt-get install -y chromium)" >&2
  fi
fi
