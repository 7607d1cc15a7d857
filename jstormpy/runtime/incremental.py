"""Task side of incremental checkpoints: dirty-key tracking, base/delta choice, chains.

With ``Config(incremental_checkpoints=True)``, ``self.state(name)`` returns a
:class:`TrackedState`: a ``dict`` that remembers which keys were written or deleted
since the last checkpoint, with their new values (reads cost what a dict read costs; a
write costs one Python call more). At a barrier :meth:`IncrementalKeyedState.capture`
takes, on the task thread, either that dirty dict as it is (a *delta*: no per-key work)
or copies of the whole dicts (a *base*, at compaction); the snapshot thread then checks
a delta's value types, writes one segment (``jstormpy.state_backends.changelog``) and
records it in the task's chain.

A base is due when the task has no chain yet, after a restore that did not come from a
chain, every ``Config.incremental_compaction_every`` deltas, or once the deltas since the
base add up to more than ``Config.incremental_compaction_ratio`` × the base's bytes.

Values must be replaced, not mutated in place, for a change to be seen: a state dict
that holds a mutable value (list, dict, set, object) stops being incremental and is
written whole at every checkpoint from then on (like a plain state dict); the delta in
which such a value first shows up is declined (:meth:`IncrementalKeyedState.write`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.component import managed_states, use_state_factory
from jstormpy.api.errors import CheckpointError, JStormError
from jstormpy.runtime.snapshots import ATOMIC_TYPES, immutable_values
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.changelog import (
    build_base,
    build_delta,
    encode_refs,
    segment_key,
)

log = logging.getLogger("jstormpy.task")

_MISSING = object()


class _Deleted:
    """Marks a deleted key in a captured delta (pickles as the one instance)."""

    def __reduce__(self) -> str:
        return "DELETED"

    def __repr__(self) -> str:
        return "DELETED"


DELETED = _Deleted()


_dict_set = dict.__setitem__
_dict_del = dict.__delitem__


class TrackedState(dict):  # type: ignore[type-arg]
    """A managed keyed-state dict that records the keys changed since the last checkpoint.

    ``dirty`` maps each key written or deleted since the last checkpoint to its new value
    (:data:`DELETED` for a deletion): at a barrier that dict *is* the delta, so the task
    thread takes it as it is instead of looking every dirty key up again. Recording costs
    one dict store per write, like adding the key to a set. Pickles as a plain ``dict``.
    In-place mutation of a stored value is not seen (replace the value instead); see the
    module docs.
    """

    __slots__ = ("dirty", "whole")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dirty: dict[Any, Any] = {}
        self.whole = False  # written whole at every checkpoint (holds mutable values)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __setitem__(self, key: Any, value: Any) -> None:
        _dict_set(self, key, value)
        self.dirty[key] = value

    def __delitem__(self, key: Any) -> None:
        _dict_del(self, key)
        self.dirty[key] = DELETED

    def pop(self, key: Any, *default: Any) -> Any:  # noqa: D102
        if key in self:
            self.dirty[key] = DELETED
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[Any, Any]:  # noqa: D102
        item = dict.popitem(self)
        self.dirty[item[0]] = DELETED
        return item

    def setdefault(self, key: Any, default: Any = None) -> Any:  # noqa: D102
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def update(self, *args: Any, **kwargs: Any) -> None:  # noqa: D102
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> TrackedState:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:  # noqa: D102
        self.dirty.update(dict.fromkeys(self, DELETED))
        dict.clear(self)


def _immutable_values_of(changes: dict[Any, Any]) -> bool:
    """Whether the values of ``changes`` (a ``TrackedState.dirty``) are all
    atomic-immutable, tuples of such values, or DELETED."""
    types = set(map(type, changes.values()))
    types.discard(_Deleted)
    if types <= ATOMIC_TYPES:
        return True
    if types <= ATOMIC_TYPES | {tuple}:
        return all(v.__class__ in ATOMIC_TYPES for t in changes.values()
                   if t.__class__ is tuple for v in t)
    return False


@dataclass
class IncrementalCapture:
    """What the task thread hands to the snapshot thread for one checkpoint."""

    kind: str
    """"base" (full copies) or "delta" (changed entries, DELETED for deletions)."""
    states: dict[str, dict[Any, Any]]
    unchecked: bool = False
    """The values' types are still to be checked (a delta, on the snapshot thread)."""


@dataclass
class ChainState:
    """The segments the task's latest snapshot references (snapshot thread only)."""

    chain: list[dict[str, Any]] = field(default_factory=list)
    base_bytes: int = 0
    delta_bytes: int = 0
    deltas: int = 0
    carry: IncrementalCapture | None = None
    """A capture whose segment failed to upload: merged into the next one."""
    names: set[str] = field(default_factory=set)
    """The state names the chain holds."""


class IncrementalKeyedState:
    """Per task: turns tracked state dicts into base/delta segments and keeps the chain."""

    def __init__(self, component: Any, task_id: int, key_groups: range,
                 max_parallelism: int, compaction_every: int, compaction_ratio: float,
                 restored: dict[str, Any] | None) -> None:
        self.task_id = task_id
        self.key_groups = key_groups
        self.max_parallelism = max_parallelism
        self.compaction_every = compaction_every
        self.compaction_ratio = compaction_ratio
        self.chain = ChainState()
        states = managed_states(component)
        inc = (restored or {}).get("incremental") or {}
        if inc and inc.get("key_groups") != [key_groups.start, key_groups.stop]:
            inc = {}  # another task's chain (a rescale moved key groups): start a new base
        from_chain = set(inc.get("states", ()))
        self.need_base = not inc or any(
            name not in from_chain for name, d in states.items() if d)
        if inc and not self.need_base:
            self.chain.chain = list(inc["chain"])
            self.chain.names = set(from_chain)
            for seg in self.chain.chain:
                if seg["kind"] == "base":
                    self.chain.base_bytes += seg["bytes"]
                else:
                    self.chain.delta_bytes += seg["bytes"]
                    self.chain.deltas += 1
        for name, d in list(states.items()):
            if type(d) is dict:
                tracked = TrackedState(d)
                tracked.whole = not immutable_values(d)
                states[name] = tracked
        use_state_factory(component, TrackedState)
        self.states = states

    # -- task thread ---------------------------------------------------------------------
    def capture(self, snap: dict[str, Any]) -> IncrementalCapture | None:
        """Move the tracked states out of ``snap["states"]`` into a capture: the dirty
        dicts as they are for a delta (their values' types are checked on the snapshot
        thread, :meth:`write`), copies for a base (chosen here, on the task thread; the new
        values are checked here, as a base's copies share them). None while the task has
        no tracked state at all (nothing to write)."""
        states: dict[str, Any] = snap.get("states") or {}
        tracked: dict[str, TrackedState] = {}
        kept: dict[str, Any] = {}
        for name, d in states.items():
            if isinstance(d, TrackedState) and not d.whole:
                tracked[name] = d
            else:
                kept[name] = d
        base = self._base_due()
        if base:
            for name, d in list(tracked.items()):
                if not _immutable_values_of(d.dirty):
                    self._write_whole(name, d)
                    kept[name] = tracked.pop(name)
        for d in kept.values():
            if isinstance(d, TrackedState):
                d.dirty = {}  # written whole: nothing to remember between checkpoints
        snap["states"] = kept
        if not tracked and not self.chain.chain and self.chain.carry is None:
            return None
        if base:
            self.need_base = False
            # dict.copy clones the table even when it has holes (dict(d) re-inserts then)
            cap = IncrementalCapture("base", {n: dict.copy(d) for n, d in tracked.items()})
        else:  # the dirty dicts are the delta: no per-key work on the task thread
            cap = IncrementalCapture("delta", {n: d.dirty for n, d in tracked.items()},
                                     unchecked=True)
        for d in tracked.values():
            d.dirty = {}
        return cap

    def _write_whole(self, name: str, d: TrackedState) -> None:
        """A mutable value turned up in state ``name``: write it whole from now on."""
        d.whole = True
        log.info("task %s: state %r holds mutable values; it is checkpointed whole from "
                 "now on", self.task_id, name)

    def _check_values(self, cap: IncrementalCapture,
                      value_types: dict[str, set[type]] | None = None) -> None:
        """Snapshot thread: the type check :meth:`capture` left out of a delta
        (``value_types``: the put values' types per state, collected by
        :func:`build_delta`; without it the values are scanned here).

        Raises:
            CheckpointError: a state's new values include a mutable one, which the task may
                change in place after the barrier: the checkpoint is declined, that state is
                written whole from the next checkpoint on (in the task snapshot), and the
                other states' changes are carried into the next segment.
        """
        cap.unchecked = False
        mutable = []
        for name, changes in cap.states.items():
            types = None if value_types is None else value_types.get(name)
            if types is not None and types <= ATOMIC_TYPES:
                continue
            if types is None or types <= ATOMIC_TYPES | {tuple}:  # tuples: scan their items
                if _immutable_values_of(changes):
                    continue
            mutable.append(name)
        if not mutable:
            return
        for name in mutable:
            d = self.states.get(name)
            if isinstance(d, TrackedState) and not d.whole:
                self._write_whole(name, d)
        rest = IncrementalCapture("delta", {n: changes for n, changes in cap.states.items()
                                            if n not in mutable})
        c = self.chain
        c.carry = rest if c.carry is None else _merge(c.carry, rest)
        raise CheckpointError(
            f"state(s) {mutable} now hold mutable values; this checkpoint is declined and "
            f"the next one writes them whole")

    def _base_due(self) -> bool:
        c = self.chain
        if self.need_base or not c.chain:
            return True
        if c.deltas >= self.compaction_every:
            return True
        return c.delta_bytes > self.compaction_ratio * max(c.base_bytes, 1)

    # -- snapshot thread -----------------------------------------------------------------
    def write(self, backend: StateBackend | None, cap: IncrementalCapture, checkpoint_id: int,
              generation: int, attempt: str = "") -> tuple[dict[str, Any], bytes, int]:
        """Write ``cap``'s segment; returns the snapshot's ``incremental`` entry, the
        ``.refs`` body and the bytes written. On failure the capture is carried over into
        the next checkpoint's, so no change is ever dropped."""
        if backend is None:
            raise JStormError("incremental checkpoints need a state backend")
        c = self.chain
        if cap.unchecked and c.carry is not None and c.carry.kind == "base":
            self._check_values(cap)  # merged into a base's copies: check before merging
        unchecked = cap.unchecked
        if c.carry is not None:
            cap = _merge(c.carry, cap)
            c.carry = None
        header = {"checkpoint_id": checkpoint_id, "task_id": self.task_id,
                  "generation": generation, "max_parallelism": self.max_parallelism,
                  "groups": [self.key_groups.start, self.key_groups.stop]}
        key = segment_key(self.task_id, checkpoint_id, generation, cap.kind, attempt)
        value_types: dict[str, set[type]] | None = None
        try:
            if cap.kind == "base":
                data = build_base(cap.states, header)
            else:
                value_types = {n: set() for n in cap.states} if unchecked else None
                data = build_delta(cap.states, DELETED, header, value_types)
        except BaseException:
            c.carry = cap
            raise
        if value_types is not None:
            self._check_values(cap, value_types)  # before anything is uploaded
        try:
            backend.put_object(key, data)
        except BaseException:
            c.carry = cap
            raise
        seg = {"key": key, "cid": checkpoint_id, "kind": cap.kind, "bytes": len(data),
               "groups": header["groups"]}
        if cap.kind == "base":
            c.chain, c.base_bytes, c.delta_bytes, c.deltas = [seg], len(data), 0, 0
            c.names = set(cap.states)
        else:
            c.chain.append(seg)
            c.delta_bytes += len(data)
            c.deltas += 1
            c.names |= set(cap.states)
        entry = {"chain": list(c.chain), "max_parallelism": self.max_parallelism,
                 "states": sorted(c.names),
                 "key_groups": [self.key_groups.start, self.key_groups.stop]}
        return entry, encode_refs(s["key"] for s in c.chain), len(data)


def _merge(old: IncrementalCapture, new: IncrementalCapture) -> IncrementalCapture:
    """A capture equal to writing ``old`` then ``new`` (a failed upload carried over)."""
    if new.kind == "base":
        return new
    states = {n: dict(d) for n, d in old.states.items()}
    for name, entries in new.states.items():
        target = states.setdefault(name, {})
        if old.kind == "base":
            for k, v in entries.items():
                if v is DELETED:
                    target.pop(k, None)
                else:
                    target[k] = v
        else:
            target.update(entries)
    return IncrementalCapture(old.kind, states)


def make_incremental(component: Any, task_id: int, key_groups: Iterable[int],
                     max_parallelism: int, config: Any,
                     restored: dict[str, Any] | None) -> IncrementalKeyedState | None:
    """The task's incremental-state keeper, or None when the config does not ask for it."""
    if not config.incremental():
        return None
    groups = key_groups if isinstance(key_groups, range) else range(
        min(key_groups), max(key_groups) + 1)
    return IncrementalKeyedState(component, task_id, groups, max_parallelism,
                                 config.incremental_compaction_every,
                                 config.incremental_compaction_ratio, restored)


StateFactory = Callable[[], dict[Any, Any]]
