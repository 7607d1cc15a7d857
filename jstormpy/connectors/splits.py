"""Replayable sources: splits with offsets held in the checkpoint (the source half of the
connector contract, docs/connectors.md).

A *split* is the unit a source reads in order: a Kafka partition, a Redis stream key.
:class:`SplitOffsets` is the bookkeeping every replayable spout needs:

* which splits this task owns (``index % parallelism == task_index`` over the sorted list);
* the offset reached on each split (what the spout's ``snapshot()`` returns, so a rollback
  rewinds to it);
* which snapshot belongs to which checkpoint, so that offsets are *released* to the external
  system (e.g. a consumer-group commit, for monitoring) only once the checkpoint that holds
  them has completed -- never ahead of it;
* per-split event time and idleness: the watermark is the minimum over the splits that are
  not idle of ``max event time - max_lag_ms``; a split that delivered nothing for
  ``idle_timeout_ms`` marks itself idle and stops holding the watermark back until it
  delivers again.

:class:`ReplayableSpout` composes it into a spout: a subclass only says how to list splits,
read a split after an offset, and (optionally) release offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jstormpy.api.component import Spout, TopologyContext
from jstormpy.api.errors import SourceError, UnavailableError

_log = logging.getLogger(__name__)

__all__ = ["ReplayableSpout", "SplitOffsets", "SplitRecord"]


def owned_splits(splits: Iterable[Hashable], task_index: int, parallelism: int) -> list[Any]:
    """The splits task ``task_index`` of ``parallelism`` reads: every ``parallelism``-th of
    the sorted list, starting at ``task_index``.

    Example:
        >>> owned_splits(["s2", "s0", "s1"], 1, 2)
        ['s1']
    """
    ordered = sorted(splits, key=str)
    return [s for i, s in enumerate(ordered) if i % parallelism == task_index]


class SplitOffsets:
    """Offsets, event time and idleness of the splits one source task owns.

    Args:
        idle_timeout_ms: A split that delivered nothing for this long (processing time) is
            idle; ``None`` = never.
        max_lag_ms: Bounded out-of-orderness of event time within a split.

    Example:
        >>> so = SplitOffsets(idle_timeout_ms=None)
        >>> so.assign(["a", "b"], initial=0)
        >>> so.advance("a", 5, event_ms=1000.0)
        >>> so.snapshot()
        {'offsets': {'a': 5, 'b': 0}}
    """

    def __init__(self, idle_timeout_ms: float | None = 10_000.0, max_lag_ms: float = 0.0) -> None:
        if idle_timeout_ms is not None and not idle_timeout_ms > 0:
            raise SourceError(f"idle_timeout_ms={idle_timeout_ms!r} must be > 0 or None")
        if max_lag_ms < 0:
            raise SourceError(f"max_lag_ms={max_lag_ms!r} must be >= 0")
        self.idle_timeout_ms = idle_timeout_ms
        self.max_lag_ms = max_lag_ms
        self.offsets: dict[Any, Any] = {}
        self._max_event: dict[Any, float] = {}
        self._last_active: dict[Any, float] = {}
        self._pending: list[tuple[int, dict[Any, Any]]] = []

    def assign(self, splits: Sequence[Any], initial: Any) -> None:
        """Own ``splits``; a split without a restored offset starts at ``initial``."""
        now = time.monotonic()
        restored = self.offsets
        self.offsets = {s: restored.get(s, initial) for s in splits}
        for s in splits:
            self._last_active.setdefault(s, now)

    def advance(self, split: Any, offset: Any, event_ms: float | None = None) -> None:
        """Record that ``split`` was read up to ``offset`` (and saw ``event_ms``)."""
        self.offsets[split] = offset
        self._last_active[split] = time.monotonic()
        if event_ms is not None and event_ms > self._max_event.get(split, float("-inf")):
            self._max_event[split] = event_ms

    def idle_splits(self) -> frozenset[Any]:
        """Splits that delivered nothing for ``idle_timeout_ms``."""
        if self.idle_timeout_ms is None:
            return frozenset()
        limit = time.monotonic() - self.idle_timeout_ms / 1000.0
        return frozenset(s for s in self.offsets if self._last_active.get(s, 0.0) <= limit)

    def watermark(self) -> float | None:
        """Minimum over the non-idle splits of ``max event time - max_lag_ms``; ``None``
        while a non-idle split has seen no event (it may still deliver an old one) or when
        every split is idle."""
        idle = self.idle_splits()
        live = [s for s in self.offsets if s not in idle]
        if not live or any(s not in self._max_event for s in live):
            return None
        return min(self._max_event[s] for s in live) - self.max_lag_ms

    # -- checkpoints -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"offsets": {split: offset}}``: the position a rollback rewinds to."""
        return {"offsets": dict(self.offsets)}

    def restore(self, snap: Mapping[str, Any]) -> None:
        """Rewind to a :meth:`snapshot`; pending (unreleased) positions are dropped."""
        self.offsets = dict(snap.get("offsets", {}))
        self._pending.clear()
        self._max_event.clear()

    def note_checkpoint(self, checkpoint_id: int) -> None:
        """Remember the current offsets as those of checkpoint ``checkpoint_id``."""
        self._pending.append((checkpoint_id, dict(self.offsets)))

    def release(self, checkpoint_id: int) -> dict[Any, Any] | None:
        """Checkpoint ``checkpoint_id`` completed: the offsets it holds (now safe to commit to
        the external system), or ``None`` if this task snapshotted nothing for it."""
        done = [p for p in self._pending if p[0] <= checkpoint_id]
        self._pending = [p for p in self._pending if p[0] > checkpoint_id]
        return done[-1][1] if done else None


@dataclass(frozen=True)
class SplitRecord:
    """One record read from a split: the values to emit, the offset *after* it, its event time."""

    values: Sequence[Any]
    offset: Any
    event_ms: float | None = None


class ReplayableSpout(Spout):
    """A spout over splits whose offsets live in the checkpoint.

    Subclasses implement :meth:`list_splits`, :meth:`initial_offset`, :meth:`read_splits`,
    and optionally :meth:`connect`, :meth:`release_offsets` and :meth:`close`. The engine
    calls ``restore`` (before ``open``) on recovery, so a restored spout resumes right after
    the last record the restored checkpoint covers.

    Class attributes a subclass (or instance) may set: ``batch`` (most records per
    ``next_tuple``), ``idle_timeout_ms``, ``max_lag_ms``, ``bounded`` (call ``finish()`` the
    first time every owned split has nothing more to read: a finite job over what the
    source holds when it gets there).
    """

    batch: int = 500
    bounded: bool = False
    redistribute_state = Spout.redistribute_splits  # the split contract: rescalable
    idle_timeout_ms: float | None = 10_000.0
    max_lag_ms: float = 0.0
    connect_timeout_ms: float = 30_000.0
    """How long ``open`` waits for the source (connect, list the splits, read their first
    offsets), retrying once a second and logging what it waits for; then it gives up with
    an UnavailableError, which fails the topology (docs/errors.md)."""

    def describe_source(self) -> str:
        """What the spout reads, for messages (a connector names its broker and topic)."""
        return type(self).__name__

    # -- what a connector implements -------------------------------------------------------
    def connect(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open connections (called in ``open``, in the task's process)."""

    def list_splits(self) -> list[Any]:
        """Every split of the source (all tasks), in any order."""
        raise NotImplementedError(f"{type(self).__name__} must implement list_splits")

    def initial_offset(self, split: Any) -> Any:
        """Where reading starts on a split no checkpoint holds an offset for."""
        raise NotImplementedError(f"{type(self).__name__} must implement initial_offset")

    def read_splits(self, offsets: Mapping[Any, Any],
                    limit: int) -> list[tuple[Any, SplitRecord]]:
        """Up to ``limit`` records after ``offsets`` as ``(split, record)``, in order per split.
        Must not block for long (return ``[]`` when nothing is there)."""
        raise NotImplementedError(f"{type(self).__name__} must implement read_splits")

    def release_offsets(self, offsets: Mapping[Any, Any]) -> None:
        """Offsets held by a *completed* checkpoint (e.g. commit them for monitoring)."""

    # -- the engine's side -----------------------------------------------------------------
    def _splits_state(self) -> SplitOffsets:
        so = self.__dict__.get("_splits")
        if so is None:
            so = SplitOffsets(self.idle_timeout_ms, self.max_lag_ms)
            self.__dict__["_splits"] = so
        return so

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Connect and take this task's share of the splits (keeps a restored position);
        waits up to ``connect_timeout_ms`` for the source."""
        wait_s = self.connect_timeout_ms / 1000.0
        deadline = time.monotonic() + wait_s
        connected = False
        while True:
            try:
                if not connected:
                    self.connect(conf, context)
                    connected = True
                mine = owned_splits(self.list_splits(), context.task_index,
                                    context.parallelism)
                so = self._splits_state()
                so.assign(mine, None)
                for s, off in so.offsets.items():
                    if off is None:
                        so.offsets[s] = self.initial_offset(s)
                break
            except Exception as exc:
                left = deadline - time.monotonic()
                # every failed try is logged, the last one too: a slow first try (a
                # consumer created on a busy machine) may use up the whole wait
                _log.warning("waiting for %s (%s: %s); giving up in %.0f s",
                             self.describe_source(), type(exc).__name__, exc, max(0.0, left))
                if left <= 0:
                    raise UnavailableError(
                        f"{self.describe_source()}: no answer within connect_timeout_ms="
                        f"{self.connect_timeout_ms:.0f} ({type(exc).__name__}: {exc}); check "
                        f"that it runs and is reachable, or raise connect_timeout_ms") from exc
                time.sleep(min(1.0, left))
        self.__dict__["_last_wm"] = float("-inf")

    def next_tuple(self) -> None:
        """Emit the next records of the owned splits, then the watermark if it advanced."""
        so = self._splits_state()
        if self.finished:
            return
        records = self.read_splits(so.offsets, self.batch) if so.offsets else []
        for split, rec in records:
            self.emit(rec.values)
            so.advance(split, rec.offset, rec.event_ms)
        if self.bounded and not records:
            self.finish()
            return
        wm = so.watermark()
        if wm is not None and wm > self.__dict__.get("_last_wm", float("-inf")):
            self.__dict__["_last_wm"] = wm
            self.emit_watermark(wm)

    def idle_splits(self) -> frozenset[Any]:
        """Owned splits currently idle (no record for ``idle_timeout_ms``)."""
        return self._splits_state().idle_splits()

    def snapshot(self) -> dict[str, Any]:
        """``{"offsets": {split: offset}}`` of the owned splits."""
        return self._splits_state().snapshot()

    def restore(self, snap: dict[str, Any]) -> None:
        """Rewind to a :meth:`snapshot` (runs before ``open``)."""
        self._splits_state().restore(snap)
        self.__dict__["_last_wm"] = float("-inf")

    def before_snapshot(self, checkpoint_id: int) -> None:
        """Engine hook: the snapshot about to be taken is that of ``checkpoint_id``."""
        self._splits_state().note_checkpoint(checkpoint_id)

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Release the offsets of the completed checkpoint (never those of a later one)."""
        offsets = self._splits_state().release(checkpoint_id)
        if offsets is not None:
            self.release_offsets(offsets)
