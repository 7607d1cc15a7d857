"""Package discovery for the one ``jstormpy`` distribution (metadata: pyproject.toml).

DESIGN §1 keeps the project's top-level folders (``master/``, ``barrier/``, ...) and
installs each as a subpackage of ``jstormpy``. ``[tool.setuptools.packages.find]`` cannot
rename a folder, so this file maps each folder once and lets ``find_namespace_packages``
discover everything below it: a new module or subpackage ships without anyone listing it
(a hand-kept list once left ``jstormpy.testing.chaos`` out of the wheel, and every
``jstorm`` command failed on import).
"""

from setuptools import find_namespace_packages, setup

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


setup(package_dir=dict(ROOTS), packages=discover())
