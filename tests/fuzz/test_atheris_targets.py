"""The atheris harness (``atheris_fuzz.py``, the long runs of docs/security.md) keeps
working: every target runs on its seed inputs, the inputs libFuzzer starts from, and
holds its property on them, with or without atheris installed."""

from __future__ import annotations

import pytest

from tests.fuzz.atheris_fuzz import TARGETS, seeds


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_target_holds_on_its_seeds(target: str) -> None:
    inputs = seeds(target)
    assert inputs
    for data in inputs:
        TARGETS[target](data)  # raises (AssertionError, or any other error) on a finding


def test_targets_flag_what_they_must() -> None:
    """Control: a target is not a no-op; a read past the frame limit is a finding."""
    from tests.fuzz.atheris_fuzz import MAX_FRAME, LimitedReader

    with pytest.raises(AssertionError, match="beyond the frame limit"):
        LimitedReader(b"x").read(MAX_FRAME + 1)
