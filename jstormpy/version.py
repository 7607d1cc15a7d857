"""The engine's version (written into savepoint manifests; ``jstormpy.__version__``).

A module of its own so that a module low in the import order (DESIGN §1) can read it
without importing the package's top, which imports the launchers."""

__version__ = "0.1.0"
