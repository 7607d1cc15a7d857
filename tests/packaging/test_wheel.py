"""The wheel a user installs works: built, installed non-editable into a fresh virtual
environment, and exercised from a directory outside the checkout.

The rest of the suite runs against the editable install, which hides packaging mistakes:
a hand-kept package list once left ``jstormpy.testing.chaos`` out of the wheel, and every
``jstorm`` subcommand failed on import. This test is what a user meets after
``pip install jstormpy-*.whl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[2]

# Run inside the fresh venv: import every module of the installed package and list every
# CLI command path (subcommands of subcommands included).
PROBE = r"""
import argparse, importlib, importlib.util, itertools, json, pkgutil, sys
import heronpy, jstormpy
from jstormpy.cli.main import build_parser

failed = {}
modules = []
for info in itertools.chain(pkgutil.walk_packages(jstormpy.__path__, "jstormpy."),
                            pkgutil.walk_packages(heronpy.__path__, "heronpy.")):
    modules.append(info.name)
    if info.name.endswith(".__main__"):  # importing runs it: only check that it is there
        if importlib.util.find_spec(info.name) is None:
            failed[info.name] = "not found"
        continue
    try:
        importlib.import_module(info.name)
    except Exception as exc:  # noqa: BLE001 - every failure is reported by name
        failed[info.name] = f"{type(exc).__name__}: {exc}"

def command_paths(parser, prefix=()):
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from command_paths(sub, (*prefix, name))

print(json.dumps({"file": jstormpy.__file__, "modules": modules, "failed": failed,
                  "commands": [list(p) for p in command_paths(build_parser())]}))
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} exited {proc.returncode}\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(venv bin dir, a working directory outside the checkout, its environment)."""
    root = tmp_path_factory.mktemp("wheel")
    outside = root / "user"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["JSTORM_HOME"] = str(root / "home")
    # the example leaves its output in the temp directory for its user: here, the test's
    (root / "tmp").mkdir()
    env["TMPDIR"] = str(root / "tmp")
    dist = root / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist),
          str(CHECKOUT)], outside, env, 600)
    wheels = list(dist.glob("jstormpy-*.whl"))
    assert len(wheels) == 1, wheels
    venv.create(root / "venv", with_pip=True)
    bin_dir = root / "venv" / "bin"
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
          str(wheels[0])], outside, env, 900)
    return bin_dir, outside, env


def test_every_module_imports_from_the_wheel(installed: tuple[Path, Path, dict[str, str]]) -> None:
    bin_dir, outside, env = installed
    probe = json.loads(_run([str(bin_dir / "python"), "-c", PROBE], outside, env, 300))
    assert Path(probe["file"]).is_relative_to(bin_dir.parent), probe["file"]
    assert probe["failed"] == {}
    # every source module of the checkout is in the wheel (no folder left out)
    shipped = set(probe["modules"])
    roots = {"jstormpy": "jstormpy", "master": "jstormpy.master",
             "barrier": "jstormpy.barrier", "window": "jstormpy.window",
             "state_backends": "jstormpy.state_backends", "deploy": "jstormpy.deploy",
             "heronpy": "heronpy"}  # the heronpy API jstormpy serves (docs/coming-from.md)
    for folder, package in roots.items():
        for source in (CHECKOUT / folder).rglob("*.py"):
            parts = source.relative_to(CHECKOUT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                assert ".".join((package, *parts)) in shipped, source
    # the web UI's static files ship with it
    ui = bin_dir.parent.glob("lib/python*/site-packages/jstormpy/master/ui/index.html")
    assert list(ui), "the web UI's index.html is missing from the wheel"


def test_every_cli_command_answers_help(installed: tuple[Path, Path, dict[str, str]]) -> None:
    bin_dir, outside, env = installed
    probe = json.loads(_run([str(bin_dir / "python"), "-c", PROBE], outside, env, 300))
    commands = probe["commands"]
    assert ["run"] in commands and ["savepoint"] in commands and ["chaos"] in commands
    for path in commands:
        out = _run([str(bin_dir / "jstorm"), *path, "--help"], outside, env, 120)
        assert out.startswith("usage: jstorm"), (path, out[:200])


def test_an_example_runs_to_drained(installed: tuple[Path, Path, dict[str, str]]) -> None:
    bin_dir, outside, env = installed
    example = outside / "wordcount.py"  # a user's copy, away from the checkout
    example.write_text((CHECKOUT / "examples" / "wordcount.py").read_text())
    out = _run([str(bin_dir / "jstorm"), "run", str(example), "--timeout", "240"],
               outside, env, 300)
    assert "drained" in out, out[-2000:]


def test_the_wheel_runs_the_compiled_record_path(
        installed: tuple[Path, Path, dict[str, str]]) -> None:
    """The wheel step compiled the record path (``jstormpy/compiled.py``) and the
    installed package imports the extension modules, not their sources."""
    bin_dir, outside, env = installed
    site = next(bin_dir.parent.glob("lib/python*/site-packages/jstormpy/runtime"))
    for name in ("routing", "combine"):
        assert list(site.glob(f"{name}.cpython-*.so")), f"{name} not compiled into the wheel"
    out = _run([str(bin_dir / "jstorm"), "version"], outside, env, 120)
    assert "record path compiled (Cython): routing, combine, jsonl_rows, codec" in out, out


def test_an_sdist_installs_without_a_compiler_as_pure_python(
        installed: tuple[Path, Path, dict[str, str]],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """No C compiler (``CC=/bin/false``): the sdist still installs, runs its record path as
    pure Python, and a run says so in one line, once."""
    wheel_bin, outside, env = installed
    root = tmp_path_factory.mktemp("sdist")
    _run([sys.executable, "setup.py", "-q", "sdist", "-d", str(root / "dist")], CHECKOUT,
         env, 300)
    sdists = list((root / "dist").glob("jstormpy-*.tar.gz"))
    assert len(sdists) == 1, sdists
    venv.create(root / "venv", with_pip=True)
    bin_dir = root / "venv" / "bin"
    # the dependencies: the wheel's venv's (only jstormpy itself comes from the sdist)
    deps = next(wheel_bin.parent.glob("lib/python*/site-packages"))
    own = next((root / "venv").glob("lib/python*/site-packages"))
    (own / "zz_wheel_venv_deps.pth").write_text(f"{deps}\n")
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps",
          "--disable-pip-version-check", str(sdists[0])], outside, {**env, "CC": "/bin/false"},
         600)
    assert not list(own.glob("jstormpy/runtime/*.so"))
    out = _run([str(bin_dir / "jstorm"), "version"], outside, env, 120)
    assert "record path pure Python (not compiled" in out, out
    example = outside / "wordcount_sdist.py"
    example.write_text((CHECKOUT / "examples" / "wordcount.py").read_text())
    proc = subprocess.run([str(bin_dir / "jstorm"), "run", str(example), "--timeout", "240"],
                          cwd=outside, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0 and "drained" in proc.stdout, proc.stderr[-2000:]
    notices = [line for line in proc.stderr.splitlines() if "pure Python" in line]
    assert len(notices) == 1, proc.stderr[-2000:]
