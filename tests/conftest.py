"""Shared fixtures. Long chaos and Spark tests are marked ``slow``: skip them locally with
``JSTORM_FAST=1`` (or ``-m 'not slow'``); CI runs everything."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("JSTORM_FAST") == "1":
        skip = pytest.mark.skip(reason="JSTORM_FAST=1 skips slow chaos/Spark tests")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _jstorm_home(tmp_path, monkeypatch):
    """Every test gets its own JSTORM_HOME (registry, runs, default checkpoints)."""
    monkeypatch.setenv("JSTORM_HOME", str(tmp_path / "jstorm-home"))
