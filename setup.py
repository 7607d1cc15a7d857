"""Package discovery for the one ``jstormpy`` distribution (metadata: pyproject.toml).

DESIGN §1 keeps the project's top-level folders (``master/``, ``barrier/``, ...) and
installs each as a subpackage of ``jstormpy``. ``[tool.setuptools.packages.find]`` cannot
rename a folder, so this file maps each folder once and lets ``find_namespace_packages``
discover everything below it: a new module or subpackage ships without anyone listing it
(a hand-kept list once left ``jstormpy.testing.chaos`` out of the wheel, and every
``jstorm`` command failed on import).

It also compiles the record path's modules with Cython 3 (``jstormpy/compiled.py`` lists
them and says why): the same ``.py`` sources, each built into an extension module beside
its source, which Python imports in its place. The build is optional: without Cython or a
working C compiler it warns and installs pure Python, which behaves the same (a one-line
notice says so when a cluster starts).
"""

import os
import sys

from setuptools import find_namespace_packages, setup
from setuptools.command.build_ext import build_ext

# import name -> folder: the layout of DESIGN §1, the only hand-written part
ROOTS = {
    "jstormpy": "jstormpy",
    "jstormpy.master": "master",
    "jstormpy.barrier": "barrier",
    "jstormpy.window": "window",
    "jstormpy.state_backends": "state_backends",
    "jstormpy.deploy": "deploy",
    # the heronpy API, served by jstormpy (heronpy topologies run unmodified, docs/coming-from.md)
    "heronpy": "heronpy",
}


def discover() -> list[str]:
    """Every package under every root, named by its import path."""
    packages = []
    for name, folder in ROOTS.items():
        packages.append(name)
        found = find_namespace_packages(folder, exclude=["*__pycache__*"])
        packages += [f"{name}.{sub}" for sub in found]
    return sorted(packages)


# the modules compiled, as in jstormpy/compiled.py (COMPILED; a unit test keeps them equal)
COMPILED = ("jstormpy.runtime.routing", "jstormpy.runtime.combine",
            "jstormpy.connectors.jsonl_rows", "jstormpy.runtime.codec",
            "jstormpy.key_filter")

# Cython reads the modules as plain Python: annotations are not type declarations (a
# ``list[Any]`` parameter must still accept a tuple) and no local gets a builtin type by
# inference (a local bound to a list may later take a slice assignment from a tuple)
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "infer_types": False,
              "binding": True}


def source_of(module: str) -> str:
    """``jstormpy.runtime.routing`` -> ``jstormpy/runtime/routing.py`` (through ROOTS)."""
    for name in sorted(ROOTS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            rest = module[len(name):].lstrip(".").split(".")
            return os.path.join(ROOTS[name], *rest) + ".py"
    raise ValueError(module)


def extensions() -> list:
    """The compiled modules, or none (no Cython: pure Python, with a warning)."""
    if os.environ.get("JSTORM_PURE_PYTHON") == "1":  # the fallback, asked for at build time
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:
        print("jstormpy: Cython is not installed; installing the pure-Python record path",
              file=sys.stderr)
        return []
    exts = [Extension(m, [source_of(m)]) for m in COMPILED]
    return cythonize(exts, compiler_directives=DIRECTIVES, build_dir="build/cython",
                     quiet=True)


class OptionalBuildExt(build_ext):
    """build_ext where an extension that cannot be compiled (no compiler, no Python
    headers) is left out with a warning: its ``.py`` source is installed and used."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - no compiler at all: pure Python
            self._skip("the C compiler could not run", exc)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - this module stays pure Python
            self._skip(f"{ext.name} did not compile", exc)

    @staticmethod
    def _skip(what: str, exc: Exception) -> None:
        print(f"jstormpy: {what} ({type(exc).__name__}: {exc}); installing the pure-Python "
              f"record path instead (same results, slower)", file=sys.stderr)


setup(package_dir=dict(ROOTS), packages=discover(), ext_modules=extensions(),
      cmdclass={"build_ext": OptionalBuildExt})
