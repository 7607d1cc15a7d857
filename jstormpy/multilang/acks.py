"""Exactly-once for a multilang spout, I/O-free: which message ids to ack, fail or drop.

A multilang spout cannot be snapshotted or rewound, but Storm's reliability API gives what
is needed, as Flink's message-acknowledging sources use it:

- the ids a spout emits between barrier n-1 and barrier n belong to checkpoint n; the host
  acks them to the spout only when checkpoint n completes (``complete``);
- a task snapshot holds every id emitted up to its barrier and not yet acked to the spout;
  restored, those ids are *covered*: the checkpoint holds their tuples, so a re-emit of one
  is dropped (and acked, so the spout forgets it) instead of emitted twice;
- at a rollback the host keeps the spout's subprocess if its worker survived: every id the
  old task had emitted and not acked is acked if the restored checkpoint covers it, and
  failed otherwise, so the spout re-emits it (``adopt``).

Example:
    >>> ledger = AckLedger()
    >>> ledger.emitted("a"), ledger.emitted("b")
    (True, True)
    >>> ledger.barrier(1); ledger.emitted("c")
    True
    >>> snap = ledger.snapshot()          # checkpoint 1 covers a and b
    >>> ledger.complete(1)
    ['a', 'b']
    >>> after = AckLedger(); after.restore(snap)
    >>> after.adopt(["c"])                # the old task emitted c after checkpoint 1
    AdoptSteps(acks=[], fails=['c'])
    >>> after.emitted("a"), after.emitted("c")   # a re-emitted a is dropped
    (False, True)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AdoptSteps:
    """What to tell an adopted spout subprocess after a rollback, in this order."""

    acks: list[Any]
    """Ids the restored checkpoint covers (its output holds them)."""
    fails: list[Any]
    """Ids emitted after the restored checkpoint: the spout re-emits them."""


def _key(msg_id: Any) -> Hashable:
    """A message id as a set member (JSON ids may be lists or objects)."""
    if isinstance(msg_id, list):
        return ("__list__", *map(_key, msg_id))
    if isinstance(msg_id, dict):
        return ("__dict__", *sorted((k, _key(v)) for k, v in msg_id.items()))
    return msg_id  # type: ignore[no-any-return]


class AckLedger:
    """The message ids of one spout task, by checkpoint."""

    def __init__(self) -> None:
        self.open: list[Any] = []
        """Ids emitted since the last barrier (the next checkpoint's)."""
        self.pending: dict[int, list[Any]] = {}
        """Checkpoint id -> the ids of its batch, until the checkpoint completes."""
        self.covered: dict[Hashable, Any] = {}
        """Ids the restored checkpoint holds that the spout has not been acked for."""

    def emitted(self, msg_id: Any) -> bool:
        """The spout emitted ``msg_id``: True to emit the tuple, False to drop it (the
        restored checkpoint covers it; ack it to the spout at once)."""
        if self.covered and self.covered.pop(_key(msg_id), _MISSING) is not _MISSING:
            return False
        self.open.append(msg_id)
        return True

    def barrier(self, checkpoint_id: int) -> None:
        """Barrier ``checkpoint_id`` goes out: the open ids are its batch."""
        self.pending.setdefault(checkpoint_id, []).extend(self.open)
        self.open = []

    def snapshot(self) -> dict[str, list[Any]]:
        """At a barrier: every id up to it not acked yet (what a restore covers)."""
        ids = [i for batch in self.pending.values() for i in batch]
        return {"unacked": ids + list(self.covered.values())}

    def restore(self, snap: dict[str, Any] | None) -> None:
        """Before the task opens: the restored checkpoint covers these ids."""
        self.open, self.pending = [], {}
        self.covered = {_key(i): i for i in (snap or {}).get("unacked", ())}

    def complete(self, checkpoint_id: int) -> list[Any]:
        """Checkpoint ``checkpoint_id`` completed: the ids to ack to the spout now."""
        done = sorted(c for c in self.pending if c <= checkpoint_id)
        return [i for c in done for i in self.pending.pop(c)]

    def in_flight(self) -> list[Any]:
        """Every id emitted and not acked, oldest first (what a parked subprocess owes)."""
        return [i for c in sorted(self.pending) for i in self.pending[c]] + self.open

    def adopt(self, old_in_flight: Iterable[Any]) -> AdoptSteps:
        """A rollback kept the subprocess: split what the old task owed it."""
        acks, fails = [], []
        for msg_id in old_in_flight:
            if self.covered.pop(_key(msg_id), _MISSING) is not _MISSING:
                acks.append(msg_id)
            else:
                fails.append(msg_id)
        return AdoptSteps(acks, fails)


_MISSING = object()
