"""`jstorm --help` and every subcommand's help read well (issue 28 item 17)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from jstormpy.cli.main import build_parser


def subparsers(parser: argparse.ArgumentParser, path: str = "jstorm"):
    yield path, parser
    for action in parser._actions:  # argparse keeps no public list of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subparsers(sub, f"{path} {name}")


def test_every_option_has_help():
    missing = [f"{path} {'/'.join(a.option_strings)}"
               for path, parser in subparsers(build_parser())
               for a in parser._actions
               if a.option_strings and not a.help and not isinstance(a, argparse._HelpAction)]
    assert missing == []


def help_text(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "jstormpy.cli.main", *args, "--help"],
                          capture_output=True, text=True, timeout=60, check=True).stdout


def test_the_header_has_no_rest_markup():
    assert "``" not in help_text()


def test_testing_help_shows_no_stray_rest_argument():
    text = help_text("testing")
    assert "rest" not in text.split(), text
    assert "jstorm testing webhdfs --help" in text


def test_run_help_says_what_the_file_must_define_and_where_state_lives():
    text = " ".join(help_text("run").split())
    assert "must define `topology`" in text, text
    assert "JSTORM_HOME" in text, text


@pytest.mark.parametrize("name", ["list", "status", "kill", "forget"])
def test_positional_arguments_have_help(name):
    parser = dict(subparsers(build_parser()))[f"jstorm {name}"]
    assert all(a.help for a in parser._actions if not a.option_strings), name


def test_ui_open_says_when_no_browser_can_be_started(tmp_path):
    import os

    from jstormpy.cli.client import Registration, jstorm_home

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "ui.port").write_text("41233")
    Registration("shown", "127.0.0.1:40000", "s", str(run_dir), os.getpid()).save()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(BROWSER=str(tmp_path / "no-such-browser"), PATH=str(tmp_path),
               JSTORM_HOME=str(jstorm_home()))
    res = subprocess.run([sys.executable, "-m", "jstormpy.cli.main", "ui", "shown", "--open"],
                         capture_output=True, text=True, timeout=60, env=env, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("http://127.0.0.1:41233/")
    assert "no web browser could be started" in res.stdout, res.stdout


def test_the_cli_package_runs_as_the_jstorm_command():
    """``python -m`` on the CLI package (its old module path) is still ``jstorm``."""
    package = build_parser.__module__.rsplit(".", 1)[0]  # the package holding main.py
    out = subprocess.run([sys.executable, "-m", package, "--help"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out == help_text()
