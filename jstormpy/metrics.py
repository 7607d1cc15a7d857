"""Metric definitions shared by workers and the Topology Master (the wire contract)."""

from __future__ import annotations

LATENCY_BUCKETS_MS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0,
                      float("inf"))
"""Upper bounds of the execute-latency histogram buckets (ms)."""


def percentile_from_buckets(buckets: list[int], q: float) -> float | None:
    """Upper bound (ms) of the bucket holding quantile ``q`` (0..1), or None if empty."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q * total
    acc = 0
    for bound, count in zip(LATENCY_BUCKETS_MS, buckets, strict=False):
        acc += count
        if acc >= rank:
            return bound
    return LATENCY_BUCKETS_MS[-1]
