"""gRPC's C core logs quietly in every jstormpy process (jstormpy/grpc_logging.py): a CI
run's `jstorm run` printed gRPC's INFO line about a GOAWAY from the stopping TM on the
user's console. A setting the user made wins."""

from __future__ import annotations

import os
import subprocess
import sys

SHOW = "import jstormpy, os; print(os.environ['GRPC_VERBOSITY'], os.environ['GLOG_minloglevel'])"


def without_grpc_settings() -> dict[str, str]:
    """This environment without the two variables, as a user who never set them has it."""
    return {k: v for k, v in os.environ.items()
            if k not in ("GRPC_VERBOSITY", "GLOG_minloglevel")}


def run(code: str, env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, timeout=120).stdout.strip()


def test_importing_jstormpy_keeps_grpc_to_its_errors() -> None:
    assert run(SHOW, without_grpc_settings()).split() == ["ERROR", "2"]


def test_the_users_grpc_verbosity_wins() -> None:
    env = {**os.environ, "GRPC_VERBOSITY": "DEBUG", "GLOG_minloglevel": "0"}
    assert run(SHOW, env).split() == ["DEBUG", "0"]


def test_the_setting_is_made_before_grpc_is_imported() -> None:
    """gRPC reads it once, when it loads: the package sets it before its first import."""
    code = (
        "import os, sys\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'grpc':\n"
        "            seen.append(os.environ.get('GRPC_VERBOSITY'))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import jstormpy\n"
        "print(seen[0])\n")
    assert run(code, without_grpc_settings()) == "ERROR"
