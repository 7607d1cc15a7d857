"""Key groups: the unit in which keyed state and fields grouping are partitioned.

A topology has ``max_parallelism`` key groups (``Config.max_parallelism``; by default
Flink's rule ``max(128, roundUpPow2(1.5 × largest parallelism))``, capped at 32768).
A key goes to key group ``key_hash(key) % max_parallelism``; task ``i`` of a component
with parallelism ``n`` owns the contiguous range :func:`key_group_range` (``i``), so
key group ``g`` belongs to task index ``g * n // max_parallelism``. Fields grouping
routes key -> key group -> task, and managed keyed state (``self.state(...)``) is split
by the same function, so a task can take over any set of key groups when the
parallelism changes.

:func:`key_hash` is stable across processes, restarts and Python versions (unlike the
salted built-in ``hash`` of ``str``): it hashes a canonical encoding of the key with
CRC-32 followed by the MurmurHash3 finaliser. Keys that compare equal in a ``dict``
(``1``, ``1.0``, ``True``) encode alike, so routing and state agree on them.
"""

from __future__ import annotations

import itertools
import math
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jstormpy.api.errors import ConfigError, JStormError

MIN_MAX_PARALLELISM = 128
UPPER_MAX_PARALLELISM = 32768
_CACHE_LIMIT = 65536


def default_max_parallelism(parallelism: int) -> int:
    """Flink's default: ``max(128, roundUpPow2(1.5 × parallelism))``, at most 32768."""
    want = max(1, math.ceil(1.5 * max(parallelism, 1)))
    pow2 = 1 << (want - 1).bit_length()
    return min(max(MIN_MAX_PARALLELISM, pow2), UPPER_MAX_PARALLELISM)


def resolve_max_parallelism(configured: int, parallelisms: Iterable[int]) -> int:
    """The number of key groups of a topology: ``configured`` or the default.

    Raises:
        ConfigError: a component's parallelism exceeds ``configured``.
    """
    largest = max(parallelisms, default=1)
    if not configured:
        return default_max_parallelism(largest)
    if largest > configured:
        raise ConfigError(f"Config.max_parallelism={configured} is below the largest "
                          f"component parallelism {largest}: every task needs a key group")
    return configured


def _encode(value: Any, out: list[bytes]) -> None:
    if isinstance(value, str):
        out.append(b"s%d:" % len(value))
        out.append(value.encode("utf-8", "surrogatepass"))
    elif isinstance(value, (bool, int)):
        out.append(b"i%d;" % int(value))
    elif isinstance(value, float):
        if value.is_integer():
            out.append(b"i%d;" % int(value))
        else:
            out.append(b"f" + value.hex().encode() + b";")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        out.append(b"b%d:" % len(raw))
        out.append(raw)
    elif value is None:
        out.append(b"n")
    elif isinstance(value, tuple):
        out.append(b"(%d:" % len(value))
        for item in value:
            _encode(item, out)
    else:
        text = f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"
        out.append(b"r%d:" % len(text))
        out.append(text.encode("utf-8", "surrogatepass"))


def _key_crc(key: Any) -> int:
    """CRC-32 of the canonical encoding of ``key`` (:func:`key_hash` before its finaliser)."""
    parts: list[bytes] = []
    _encode(key, parts)
    return zlib.crc32(b"".join(parts))


def key_hash(key: Any) -> int:
    """A 32-bit hash of ``key`` that every process and Python version agrees on.

    Strings, ints, floats, bytes, None and tuples of these are encoded canonically; any
    other type by its type name and ``repr`` (give such keys a stable ``__repr__``).
    """
    h = _key_crc(key)
    # MurmurHash3 fmix32: spreads CRC-32's linear structure over the low bits
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


_PREFIX_CRC = tuple(zlib.crc32(b"s%d:" % n) for n in range(256))
"""CRC-32 of a ``str`` key's encoding prefix ``s<length>:``, by length (continued with
``zlib.crc32(utf8, prefix_crc)``, so no prefixed copy of the key is built)."""
_LANE_BATCH = 65536
"""Keys per batch of :func:`_fmix_lanes` (bounds the big integers, and hands the GIL back
to the task thread between batches when the snapshot thread hashes a delta)."""
_ORDER = sys.byteorder  # array("Q") bytes are in the machine's order


def _lane_mask(value: int, lanes: int) -> int:
    """``value`` in each of ``lanes`` 64-bit lanes of one integer (~0.1 ms for 65536)."""
    return int.from_bytes(array("Q", [value]).tobytes() * lanes, _ORDER)


def _fmix_lanes(crcs: list[int], max_parallelism: int) -> list[int]:
    """``[fmix32(c) % max_parallelism for c in crcs]`` without a Python step per key.

    Every CRC sits in its own 64-bit lane of one big integer, so the finaliser's shifts,
    XORs and multiplications by 32-bit constants run once over the whole batch in C: a
    product of a 32-bit lane and a 32-bit constant fits its 64-bit lane (no carry into
    the next one), and masking each lane to 32 bits after a multiplication or a right
    shift drops what overflowed or came down from the lane above. About 4x faster than a
    Python loop over the keys.
    """
    n = len(crcs)
    if n == 0:
        return []
    low = _lane_mask(0xFFFFFFFF, n)
    x = int.from_bytes(array("Q", crcs).tobytes(), _ORDER)
    x ^= x >> 16 & low
    x = x * 0x85EBCA6B & low
    x ^= x >> 13 & low
    x = x * 0xC2B2AE35 & low
    x ^= x >> 16 & low
    if max_parallelism & (max_parallelism - 1) == 0:  # a power of two (the default)
        x &= _lane_mask(max_parallelism - 1, n)
        return array("Q", x.to_bytes(8 * n, _ORDER)).tolist()
    return [h % max_parallelism for h in array("Q", x.to_bytes(8 * n, _ORDER))]


def key_groups_of(keys: Iterable[Any], max_parallelism: int) -> list[int]:
    """``[key_group(k, max_parallelism) for k in keys]``, computed in batches.

    ``str`` and ``int`` keys are encoded inline (the same canonical encoding as
    :func:`key_hash`, without a Python call per key) and the finaliser runs over a whole
    batch at once (:func:`_fmix_lanes`): about a quarter of the cost of calling
    :func:`key_group` per key. Other keys go through :func:`key_hash`'s encoder.
    """
    crc = zlib.crc32
    pre = _PREFIX_CRC
    out: list[int] = []
    it = iter(keys)
    while True:
        batch = list(itertools.islice(it, _LANE_BATCH))
        if not batch:
            return out
        crcs = [crc(k.encode("utf-8", "surrogatepass"), pre[len(k)])
                if k.__class__ is str and len(k) < 256 else
                crc(b"i%d;" % k) if k.__class__ is int else _key_crc(k)
                for k in batch]
        out += _fmix_lanes(crcs, max_parallelism)


def key_group(key: Any, max_parallelism: int) -> int:
    """The key group of ``key`` (``0 .. max_parallelism - 1``).

    ``str`` and ``int`` keys (the common ones: one per state read) are encoded inline, as
    :func:`key_groups_of` does, without building the encoding's parts: about half the
    cost of :func:`key_hash`, same result."""
    cls = key.__class__
    if cls is int:
        h = zlib.crc32(b"i%d;" % key)
    elif cls is str and len(key) < 256:
        h = zlib.crc32(key.encode("utf-8", "surrogatepass"), _PREFIX_CRC[len(key)])
    else:
        return key_hash(key) % max_parallelism
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return (h ^ h >> 16) % max_parallelism


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> range:
    """The contiguous key groups owned by task ``index`` of ``parallelism`` tasks."""
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def task_index_for_key_group(max_parallelism: int, parallelism: int, group: int) -> int:
    """The task index (``0 .. parallelism - 1``) that owns key group ``group``."""
    return group * parallelism // max_parallelism


class KeyRouter:
    """key -> task index for one fields-grouped route, with a bounded memo.

    The hot path is ``cache.get(key)`` (one C call, like ``hash``); a miss calls
    :meth:`miss`, which hashes the key and fills the memo.
    """

    __slots__ = ("max_parallelism", "n", "owner", "cache")

    def __init__(self, max_parallelism: int, n: int) -> None:
        self.max_parallelism = max_parallelism
        self.n = n
        self.owner = [task_index_for_key_group(max_parallelism, n, g)
                      for g in range(max_parallelism)]
        self.cache: dict[Any, int] = {}

    def miss(self, key: Any) -> int:
        """Compute (and remember) the task index of a key not in the memo."""
        i = self.owner[key_hash(key) % self.max_parallelism]
        cache = self.cache
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = i
        return i

    def __call__(self, key: Any) -> int:
        i = self.cache.get(key)
        return self.miss(key) if i is None else i


def split_by_key_group(states: Mapping[str, Mapping[Any, Any]],
                       max_parallelism: int) -> dict[int, dict[str, dict[Any, Any]]]:
    """Managed keyed state ``{state_name: {key: value}}`` split into key groups."""
    out: dict[int, dict[str, dict[Any, Any]]] = {}
    for name, entries in states.items():
        for (key, value), g in zip(entries.items(), key_groups_of(entries, max_parallelism),
                                   strict=True):
            out.setdefault(g, {}).setdefault(name, {})[key] = value
    return out


def misplaced_key(states: Mapping[str, Mapping[Any, Any]], max_parallelism: int,
                  parallelism: int, index: int) -> tuple[str, Any, int] | None:
    """The first ``(state name, key, key group)`` of task ``index``'s managed state whose
    key group that task does not own, or ``None`` when the state is partitioned by key
    group (keyed by the fields grouping that feeds the component, as it must be to move
    with a parallelism change). A shuffle-fed bolt's state usually is not: every task
    holds a partial value for keys that other tasks hold too."""
    owned = key_group_range(max_parallelism, parallelism, index)
    for name, entries in states.items():
        for key, g in zip(entries, key_groups_of(entries, max_parallelism), strict=True):
            if g not in owned:
                return name, key, g
    return None


def task_partitioned_state_error(component: str, state: str, key: Any, group: int,
                                 index: int, parallelism: int, max_parallelism: int,
                                 new_parallelism: int) -> JStormError:
    """The refusal to split managed state that is not partitioned by key group: task
    ``index`` of ``parallelism`` holds ``key`` (of ``state``) whose ``group`` another task
    owns. The message names the component, the state, the key and what to do."""
    owner = task_index_for_key_group(max_parallelism, parallelism, group)
    return JStormError(
        f"component {component!r}: its managed state {state!r} holds key {key!r} in task "
        f"index {index}, but that key's group {group} belongs to task index {owner}: the "
        f"state is not partitioned by its fields grouping (a shuffle-fed bolt keeps a "
        f"partial value per task), so it cannot be split over {new_parallelism} tasks "
        f"without losing values. Feed the component with fields_grouping on that key, "
        f"or keep its parallelism at {parallelism}")


def merge_key_groups(groups: Mapping[int, Mapping[str, Mapping[Any, Any]]],
                     wanted: Iterable[int]) -> dict[str, dict[Any, Any]]:
    """The keyed state of the key groups ``wanted``, as ``{state_name: {key: value}}``."""
    states: dict[str, dict[Any, Any]] = {}
    for g in wanted:
        for name, entries in groups.get(g, {}).items():
            states.setdefault(name, {}).update(entries)
    return states


def check_max_parallelism(stored: int | None, current: int, where: str = "") -> None:
    """Refuse restoring state written with another number of key groups.

    Raises:
        JStormError: ``stored`` is set and differs from ``current``.
    """
    if stored is not None and stored != current:
        at = f" ({where})" if where else ""
        raise JStormError(
            f"state{at} was written with max_parallelism={stored} but this run has "
            f"max_parallelism={current}: the number of key groups is fixed for the life of "
            f"the job's state; set Config(max_parallelism={stored}) to restore it")


RedistributeHook = Callable[[list[Any], int], Sequence[Any]]


class KeyPlacement:
    """key -> index of the new task that owns its key group, for ``parallelism`` tasks:
    what a ``redistribute_keyed_state`` hook splits a whole-task snapshot with.

    Example:
        >>> place = KeyPlacement(128, 3)
        >>> place("k1") == task_index_for_key_group(128, 3, key_group("k1", 128))
        True
    """

    __slots__ = ("max_parallelism", "owner", "parallelism")

    def __init__(self, max_parallelism: int, parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.owner = [task_index_for_key_group(max_parallelism, parallelism, g)
                      for g in range(max_parallelism)]

    def __call__(self, key: Any) -> int:
        return self.owner[key_hash(key) % self.max_parallelism]


def redistribution_hook(cls: type, max_parallelism: int) -> RedistributeHook | None:
    """The hook that splits ``cls``'s non-keyed snapshot (``custom``) over new tasks.

    * ``redistribute_state(old_states, new_parallelism)``: the component splits it itself;
    * ``redistribute_keyed_state(old_states, new_parallelism, place)``: the snapshot holds
      per-key state (a window operator's windows), and ``place`` (:class:`KeyPlacement`)
      names the new task owning each key, so it moves by key group like managed state.

    None when the class has neither (a parallelism change of it is refused).
    """
    hook = getattr(cls, "redistribute_state", None)
    if callable(hook):
        return hook  # type: ignore[no-any-return]
    keyed = getattr(cls, "redistribute_keyed_state", None)
    if not callable(keyed):
        return None

    def by_key_group(old_states: list[Any], new_parallelism: int) -> Sequence[Any]:
        return keyed(old_states, new_parallelism,  # type: ignore[no-any-return]
                     KeyPlacement(max_parallelism, new_parallelism))
    return by_key_group


def redistribute(component: str, snapshots: Sequence[dict[str, Any]], new_parallelism: int,
                 max_parallelism: int, hook: RedistributeHook | None = None,
                 keyed_state: bool = True) -> list[dict[str, Any]]:
    """Snapshots of ``component``'s old tasks (in task-index order) -> one per new task.

    Managed keyed state moves by key group. Non-keyed ``custom`` state (``snapshot()``)
    can only move through ``hook(old_customs, new_parallelism) -> new_customs`` (the
    component's ``redistribute_state`` static method); without one a parallelism change
    is refused, naming the component. Other per-task fields are taken from old task 0.

    ``keyed_state=False`` (two-phase-commit sinks) skips the check that managed state is
    partitioned by key group: a sink keeps its transactions keyed by checkpoint id, and a
    rescale only moves them once every sink task committed the quiescent checkpoint, so
    what moves are committed leftovers its ``recover`` drops.

    Raises:
        JStormError: custom state and no hook, or the hook returned the wrong count, or
            a snapshot was written with another ``max_parallelism``, or managed state is
            not partitioned by key group (:func:`task_partitioned_state_error`).
    """
    old_n = len(snapshots)
    if old_n == new_parallelism:
        return [dict(s) for s in snapshots]
    for i, snap in enumerate(snapshots):
        check_max_parallelism(snap.get("max_parallelism"), max_parallelism,
                              f"{component} task index {i}")
    customs = [s.get("custom") for s in snapshots]
    new_customs: Sequence[Any] | None = None
    if any("custom" in s for s in snapshots):
        if hook is None:
            raise JStormError(
                f"component {component!r} keeps non-keyed state (snapshot()/restore()) and "
                f"defines no redistribute_state(old_states, new_parallelism) hook: its "
                f"parallelism cannot change from {old_n} to {new_parallelism}")
        new_customs = list(hook(customs, new_parallelism))
        if len(new_customs) != new_parallelism:
            raise JStormError(f"{component}.redistribute_state returned {len(new_customs)} "
                              f"states for {new_parallelism} tasks")
    # every key straight to the new task owning its key group (no per-group dicts); the
    # same pass checks that each key sat with the old task owning its group (unless the
    # component's state is not keyed: sinks), so keys are hashed once
    owner = [task_index_for_key_group(max_parallelism, new_parallelism, g)
             for g in range(max_parallelism)]
    old_owner = [task_index_for_key_group(max_parallelism, old_n, g)
                 for g in range(max_parallelism)]
    parts: list[dict[str, dict[Any, Any]]] = [{} for _ in range(new_parallelism)]
    for index, snap in enumerate(snapshots):
        for name, entries in snap.get("states", {}).items():
            targets = [p.setdefault(name, {}) for p in parts]
            for (key, value), g in zip(entries.items(),
                                       key_groups_of(entries, max_parallelism), strict=True):
                if keyed_state and old_owner[g] != index:
                    raise task_partitioned_state_error(component, name, key, g, index, old_n,
                                                       max_parallelism, new_parallelism)
                targets[owner[g]][key] = value
    base = dict(snapshots[0]) if snapshots else {}
    out = []
    for i in range(new_parallelism):
        snap = dict(base)
        snap["states"] = {name: entries for name, entries in parts[i].items() if entries}
        snap["max_parallelism"] = max_parallelism
        if new_customs is not None:
            snap["custom"] = new_customs[i]
        out.append(snap)
    return out
