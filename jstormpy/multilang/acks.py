"""Exactly-once for a multilang spout, I/O-free: which message ids to ack, fail or drop.

A multilang spout cannot be snapshotted or rewound, but Storm's reliability API gives what
is needed, as Flink's message-acknowledging sources use it:

- the ids a spout emits between barrier n-1 and barrier n belong to checkpoint n; the host
  acks them to the spout only once no recovery can restore a checkpoint before n: when n
  is the oldest of the ``retained`` (``Config.checkpoints_retained``) newest completed
  checkpoints (``complete``). A recovery may fall back past the newest completed
  checkpoint (its files lost, simulator seed 10179): ids acked at its completion could
  then never be replayed;
- a task snapshot holds every id emitted up to its barrier and not yet acked to the spout;
  restored, those ids are *covered*: the checkpoint holds their tuples, so a re-emit of one
  is dropped instead of emitted twice (and acked once the restored checkpoint is old
  enough, as above);
- at a rollback the host keeps the spout's subprocess if its worker survived: every id the
  old task had emitted and not acked is failed unless the restored checkpoint covers it,
  so the spout re-emits it (``adopt``); a covered one is acked as a dropped re-emit is.

Example:
    >>> ledger = AckLedger()
    >>> ledger.emitted("a"), ledger.emitted("b")
    (True, True)
    >>> ledger.barrier(1); ledger.emitted("c")
    True
    >>> snap = ledger.snapshot()          # checkpoint 1 covers a and b
    >>> ledger.complete(1)                # retained=1: nothing can restore before 1
    ['a', 'b']
    >>> after = AckLedger(); after.restore(snap)
    >>> after.adopt(["c"])                # the old task emitted c after checkpoint 1
    AdoptSteps(fails=['c'])
    >>> after.emitted("a"), after.emitted("c")   # a re-emitted a is dropped
    (False, True)
    >>> two = AckLedger(retained=2); two.emitted("x"); two.barrier(1)
    True
    >>> two.complete(1), two.complete(2)  # 1 is acked once 2 completed too
    ([], ['x'])
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AdoptSteps:
    """What to tell an adopted spout subprocess after a rollback, in this order."""

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

    def __init__(self, retained: int = 1) -> None:
        self.retained = max(1, retained)
        """``Config.checkpoints_retained``: how many completed checkpoints a recovery
        may restore (falling back past the newer ones)."""
        self.completed: list[int] = []
        """The newest :attr:`retained` completed checkpoints seen, oldest first."""
        self.last_barrier = 0
        """The id of the last barrier (the checkpoint a snapshot belongs to)."""
        self.restored_at = 0
        """The checkpoint the restore covered (its covered ids are acked with it)."""
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
            self.pending.setdefault(self.restored_at, []).append(msg_id)
            return False
        self.open.append(msg_id)
        return True

    def barrier(self, checkpoint_id: int) -> None:
        """Barrier ``checkpoint_id`` goes out: the open ids are its batch."""
        self.pending.setdefault(checkpoint_id, []).extend(self.open)
        self.open = []
        self.last_barrier = checkpoint_id

    def snapshot(self) -> dict[str, Any]:
        """At a barrier: every id up to it not acked yet (what a restore covers)."""
        ids = [i for batch in self.pending.values() for i in batch]
        return {"unacked": ids + list(self.covered.values()), "checkpoint": self.last_barrier}

    def restore(self, snap: dict[str, Any] | None) -> None:
        """Before the task opens: the restored checkpoint covers these ids."""
        self.open, self.pending, self.completed = [], {}, []
        self.covered = {_key(i): i for i in (snap or {}).get("unacked", ())}
        self.restored_at = int((snap or {}).get("checkpoint", 0))

    def complete(self, checkpoint_id: int) -> list[Any]:
        """Checkpoint ``checkpoint_id`` completed: the ids to ack to the spout now (those
        of the checkpoints up to the oldest of the :attr:`retained` newest completed)."""
        if checkpoint_id not in self.completed:
            self.completed = sorted([*self.completed, checkpoint_id])[-self.retained:]
        if len(self.completed) < self.retained:
            return []
        horizon = self.completed[0]
        done = sorted(c for c in self.pending if c <= horizon)
        return [i for c in done for i in self.pending.pop(c)]

    def in_flight(self) -> list[Any]:
        """Every id emitted and not acked, oldest first (what a parked subprocess owes)."""
        return [i for c in sorted(self.pending) for i in self.pending[c]] + self.open

    def adopt(self, old_in_flight: Iterable[Any]) -> AdoptSteps:
        """A rollback kept the subprocess: split what the old task owed it."""
        fails = []
        for msg_id in old_in_flight:
            if self.covered.pop(_key(msg_id), _MISSING) is not _MISSING:
                # acked with the restored checkpoint, once no recovery can go before it
                self.pending.setdefault(self.restored_at, []).append(msg_id)
            else:
                fails.append(msg_id)
        return AdoptSteps(fails)


_MISSING = object()
