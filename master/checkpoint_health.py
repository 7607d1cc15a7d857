"""Whether checkpoints keep up with their interval, in words a user can act on.

Pure: :func:`assess` reads the coordinator's checkpoint history and its count of
timeouts in a row. ``jstorm status``, the UI (``/api/status``) and the Topology Master's
log show the result (docs/checkpointing.md, "Checkpoints slower than their interval").
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

RECENT = 5
"""Completed checkpoints whose median duration is compared with the interval."""


class CheckpointPace(str, Enum):
    """How checkpoints keep up."""

    NONE_YET = "none_yet"
    """No checkpoint completed or timed out yet."""
    KEEPING_UP = "keeping_up"
    """Each starts on its interval."""
    BACK_TO_BACK = "back_to_back"
    """They take the whole interval (less the minimum pause): each starts as soon as the
    one before it ends."""
    TIMING_OUT = "timing_out"
    """The last one or more in a row timed out."""


@dataclass(frozen=True)
class CheckpointHealth:
    """A checkpoint's duration against the interval, and what to change."""

    pace: CheckpointPace
    interval_ms: int
    min_pause_ms: int
    timeout_ms: int
    recent_duration_ms: float | None
    """Median duration of the last :data:`RECENT` completed checkpoints."""
    last_duration_ms: float | None
    timed_out_in_a_row: int
    recovery_after: int
    """Timeouts in a row that start a recovery (``tolerable_failed_checkpoints + 1``)."""
    advice: str

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["pace"] = self.pace.value
        return out


def assess(history: Iterable[Mapping[str, Any]], timed_out_in_a_row: int, *,
           interval_ms: int, min_pause_ms: int, timeout_ms: int,
           tolerable_timeouts: int) -> CheckpointHealth:
    """The health of the checkpoints in ``history`` (oldest first, as the coordinator
    keeps it) given the settings in force."""
    entries = list(history)
    done = [e["duration_ms"] for e in entries if e.get("status") == "completed"]
    recent = statistics.median(done[-RECENT:]) if done else None
    last = done[-1] if done else None
    recovery_after = tolerable_timeouts + 1
    if timed_out_in_a_row:
        pace = CheckpointPace.TIMING_OUT
        left = recovery_after - timed_out_in_a_row
        advice = (
            f"{timed_out_in_a_row} checkpoint(s) in a row timed out after "
            f"checkpoint_timeout_ms={timeout_ms}; {left} more in a row start a recovery "
            f"(tolerable_failed_checkpoints={tolerable_timeouts}). A barrier waits behind "
            f"full input queues (see backpressure) and a full checkpoint writes every "
            f"entry: keep incremental_checkpoints at its default with "
            f"state_store='rocksdb', raise checkpoint_timeout_ms, or relieve the "
            f"slowest component")
    elif recent is None:
        pace = CheckpointPace.NONE_YET
        advice = ""
    elif recent + min_pause_ms >= interval_ms:
        pace = CheckpointPace.BACK_TO_BACK
        advice = (
            f"checkpoints take {recent:.0f} ms (median of the last {min(RECENT, len(done))}) "
            f"against checkpoint_interval_ms={interval_ms}: they run back to back. Set "
            f"min_pause_between_checkpoints_ms to give processing time between them, "
            f"raise checkpoint_interval_ms, or make them cheaper (incremental "
            f"checkpoints; less backpressure)")
    else:
        pace = CheckpointPace.KEEPING_UP
        advice = ""
    return CheckpointHealth(pace, interval_ms, min_pause_ms, timeout_ms, recent, last,
                            timed_out_in_a_row, recovery_after, advice)
