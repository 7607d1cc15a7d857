"""Retention's decision: which checkpoints a garbage collection keeps and deletes.

Free of I/O: the callers read the facts (the completed checkpoints, the checkpoint ids
with objects in storage, the pinned ones) and delete what it names.
:meth:`StateBackend.garbage_collect <jstormpy.state_backends.base.StateBackend.garbage_collect>`
performs it on a real backend, the simulator (``jstorm simulate``) on its simulated
storage: one rule, not a copy per runtime (issue 37).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Retention:
    """What one garbage collection does."""

    keep: frozenset[int]
    """The completed checkpoints kept (the newest ``keep`` eligible ones, and pinned ones)."""
    doomed: tuple[int, ...]
    """The checkpoint ids whose objects are deleted, in order: every one with objects in
    storage at or below the newest eligible checkpoint that is not kept (incomplete ones
    too)."""
    newest: int
    """The newest eligible completed checkpoint (shared files above it are not touched)."""


def eligible(completed: Iterable[int], bad: Collection[int] = (),
             upto: int | None = None) -> list[int]:
    """The completed checkpoints that count among the newest, oldest first: not ``bad``
    (the Topology Master will never restore them) and not above ``upto`` (a deposed or
    dead TM's commit point that landed late may carry an id above every checkpoint of
    the TM that runs now; as the newest it would crowd out the ones it restores from,
    issue 27)."""
    return sorted(c for c in completed if c not in bad and (upto is None or c <= upto))


def plan_retention(done: list[int], completed: Iterable[int], present: Iterable[int],
                   keep: int, pinned: Iterable[int] = ()) -> Retention:
    """Retention over ``done`` (:func:`eligible`, not empty), ``completed`` (every
    completed checkpoint), ``present`` (every checkpoint id with objects in storage) and
    the ``pinned`` checkpoints (a savepoint copying one)."""
    keep_ids = set(done[-keep:]) if keep > 0 else set()
    keep_ids |= set(pinned) & set(completed)
    newest = done[-1]
    doomed = tuple(sorted(c for c in set(present) if c not in keep_ids and c <= newest))
    return Retention(frozenset(keep_ids), doomed, newest)
