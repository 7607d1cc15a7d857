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


PAUSE_MS = "pause_ms"
"""Checkpoint-history key (and ``CheckpointAck`` field): how long a checkpoint stopped a
task thread — from the barrier's arrival at the task until it processes again (the
snapshot's synchronous part), plus the time the task waited afterwards for that barrier's
RocksDB apply (a full write cache, a scan). The history entry holds the longest over the
tasks; :data:`TASK_PAUSE_MS` holds each task's."""

TASK_PAUSE_MS = "task_pause_ms"
"""Checkpoint-history key: task id (a string) -> that task's :data:`PAUSE_MS`."""

CHECKPOINT_BUCKETS_MS = (10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
                         float("inf"))
"""Upper bounds of the checkpoint-duration histogram buckets (ms)."""


class CumulativeHistogram:
    """A Prometheus-style histogram: counts and sum only ever grow (never roll over).

    Args:
        bounds: Increasing upper bounds, the last one ``inf``.
    """

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count one observation in the first bucket whose bound is >= ``value``."""
        self.sum += value
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                return

    @property
    def count(self) -> int:
        """How many values were observed."""
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= bound)`` pairs, as Prometheus ``_bucket`` lines."""
        out, acc = [], 0
        for bound, n in zip(self.bounds, self.counts, strict=True):
            acc += n
            out.append((bound, acc))
        return out
