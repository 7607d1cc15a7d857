"""The leader lease: how long a Topology Master elected through ZooKeeper may still commit.

With ``jstorm run FILE --ha zk://...`` (docs/cluster.md, "A standby Topology Master") the
launcher that won the election renews a lease file in the run directory every time
ZooKeeper answers it. A standby can only be elected after ZooKeeper expired the leader's
session, which happens no earlier than ``session_timeout`` after the leader's last request
reached the server; so a lease that ends ``session_timeout * LEASE_FRACTION`` after a
request was *sent* ends before any other leader can exist.

The Topology Master checks the lease before it writes a checkpoint's commit point and
again before it tells the sinks to commit. Both clocks are ``CLOCK_MONOTONIC``
(``time.monotonic``), which is one clock for every process of the machine and keeps
running while a process is stopped (SIGSTOP): a leader frozen past the session timeout
finds its lease expired the moment it runs again, before its launcher has even noticed
that its ZooKeeper session is gone.

Example:
    >>> import tempfile, pathlib, time
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "leader.lease"
    >>> LeaderLease(path).renew(sent_at=time.monotonic(), session_timeout_s=10.0)
    >>> LeaderLease(path).remaining_s() > 0
    True
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FENCED_EXIT_CODE", "LEADER_LEASE_ENV", "LEASE_FILE", "LEASE_FRACTION",
           "LeaderLease", "LeaseState"]

LEADER_LEASE_ENV = "JSTORM_LEADER_LEASE"
"""The environment variable naming the lease file a Topology Master must hold to commit
(set by an ``--ha`` launcher for the TM it starts)."""

LEASE_FILE = "leader.lease"
"""The lease's file name in a run directory."""

FENCED_EXIT_CODE = 76
"""The exit status of a Topology Master that found itself fenced (lease expired, or a
newer epoch in the state backend): it committed nothing more and stopped."""

LEASE_FRACTION = 0.6
"""The share of the ZooKeeper session timeout a renewal is good for (the rest is margin
for clock-rate differences and the time between the check and the write it guards)."""


@dataclass(frozen=True)
class LeaseState:
    """One reading of the lease: valid until ``until`` (``time.monotonic()`` seconds)."""

    until: float
    epoch: int

    def remaining_s(self, now: float | None = None) -> float:
        """Seconds left (negative once expired)."""
        return self.until - (time.monotonic() if now is None else now)


class LeaderLease:
    """The lease file of one run directory: the launcher renews it, the TM reads it.

    A missing or unreadable file counts as an expired lease (the TM was told to check one:
    without it, it must not commit)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def renew(self, sent_at: float, session_timeout_s: float, epoch: int = 0) -> None:
        """Extend the lease after ZooKeeper answered a request sent at ``sent_at``
        (monotonic). Atomic: a reader sees the old or the new lease, never half of one."""
        state = {"until": sent_at + session_timeout_s * LEASE_FRACTION, "epoch": epoch}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)

    def revoke(self) -> None:
        """End the lease now (leadership given up or lost)."""
        self.path.unlink(missing_ok=True)

    def read(self) -> LeaseState | None:
        """The lease as written last, or None (none, or unreadable)."""
        try:
            data = json.loads(self.path.read_text())
            return LeaseState(float(data["until"]), int(data.get("epoch", 0)))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remaining_s(self) -> float:
        """Seconds the lease is still good for; ``-inf`` without a lease."""
        state = self.read()
        return state.remaining_s() if state is not None else float("-inf")

    def valid(self) -> bool:
        """True while the lease has not expired."""
        return self.remaining_s() > 0
