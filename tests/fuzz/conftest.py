"""Fuzz budget: ``JSTORM_FUZZ_EXAMPLES`` examples per target (CI default 300; the long
run in docs/security.md uses 200000). Regression inputs live in ``corpus.py``."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "fuzz", max_examples=int(os.environ.get("JSTORM_FUZZ_EXAMPLES", "300")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no slow explain
    derandomize=os.environ.get("JSTORM_FUZZ_RANDOM", "") == "")
