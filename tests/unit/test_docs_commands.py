"""Every ``jstorm`` command shown in README.md and docs/ parses with the real CLI parser.

Commands in fenced shell blocks and in inline code are collected, placeholders
(NAME, FILE, ``[--opt X]``, ``a|b``) are filled in, and each one goes through
``jstormpy.cli.main.build_parser`` (and, for ``jstorm testing``, the test server's own
parser), so a documented command that the CLI would reject fails here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from jstormpy.cli.main import build_parser
from jstormpy.cli.main import testing_module as module_of_testing_command

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # how-to/, reference/ too
PLACEHOLDERS = {"NAME": "wordcount", "FILE": "app.py", "ID": "3", "S": "1", "C": "count",
                "DIR": "/tmp/jstorm-docs", "NEW": "new.zip", "SEED": "7"}
FENCE = re.compile(r"```(?:bash|sh|console|shell)\n(.*?)```", re.S)
INLINE = re.compile(r"`((?:\.venv/bin/)?jstorm [^`]+)`")


def _first_alternative(match: re.Match[str]) -> str:
    return re.split(r"\s*\|\s*", match.group(1))[0]


def _normalise(line: str) -> str | None:
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:]
    line = re.sub(r"^\.venv/bin/", "", line)
    if not line.startswith("jstorm ") or "..." in line:
        return None
    line = re.sub(r"\s+#.*$", "", line)
    line = re.sub(r"\[([^\]]*)\]", _first_alternative, line)
    return line.strip()


def documented_commands() -> list[tuple[str, str, bool]]:
    """(where, command, complete) for each documented jstorm command line."""
    found: list[tuple[str, str, bool]] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in FENCE.findall(text):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                cmd = _normalise(line)
                if cmd:
                    found.append((doc.name, cmd, True))
        for snippet in INLINE.findall(re.sub(r"\n", " ", text)):
            cmd = _normalise(snippet)
            if cmd:
                # a bare `jstorm status` in prose names the subcommand, not a full call
                found.append((doc.name, cmd, len(cmd.split()) > 2))
    return found


COMMANDS = documented_commands()


def test_docs_show_commands() -> None:
    # the collector must keep finding the README's commands, or this file tests nothing
    names = {cmd.split()[1] for _w, cmd, _c in COMMANDS}
    assert {"run", "status", "metrics", "upgrade", "testing", "ui", "loglevel"} <= names


def _parse(argv: list[str]) -> argparse.Namespace:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"jstorm {' '.join(argv)!s}: {err.getvalue().strip()}") from exc


@pytest.mark.parametrize(("where", "command", "complete"), COMMANDS,
                         ids=[f"{w}:{c}" for w, c, _ in COMMANDS])
def test_documented_command_parses(where: str, command: str, complete: bool) -> None:
    argv = [PLACEHOLDERS.get(tok, tok) for tok in shlex.split(command)[1:]]
    subcommands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert argv[0] in subcommands, f"{where}: unknown subcommand in {command!r}"
    if not complete:
        return
    args = _parse(argv)
    if args.command == "testing":
        module = module_of_testing_command(args.server)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                module.build_parser(f"jstorm testing {args.server}").parse_args(args.rest)
        except SystemExit as exc:
            raise AssertionError(f"{where}: {command!r}: {err.getvalue().strip()}") from exc
