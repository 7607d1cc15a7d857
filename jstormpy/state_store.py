"""State stores: where a task's managed state (``self.state(name)``) lives while it runs.

``Config(state_store="memory")`` (the default) keeps each named state as a Python ``dict``
in the worker's heap, as always. ``Config(state_store="rocksdb")`` keeps it in an embedded
RocksDB (``rocksdict``) on local disk, so a task's state is bounded by disk, not RAM:

- one database per task (a fresh directory under ``Config.state_store_dir``, by default
  under the run directory), one column family per named state;
- keys are key-group-major: the key group id (2 bytes, big-endian) first, then the
  serialised key, so a task's key groups are contiguous key ranges;
- keys and values are serialised by :func:`encode` (str, bytes, int and float in a tagged
  raw form, anything else with pickle protocol 5).

Both stores hand out a ``MutableMapping`` with the same behaviour (get / [] / set / del /
in / iteration / len), so user code does not change. Checkpoints are unchanged too: a
RocksDB-backed state pickles as a plain ``dict`` of its entries (the format the memory
store writes), so savepoints stay self-contained, rescale splits it by key group as
before, and a snapshot restores into either store. A restore writes the restored entries
into a fresh database (:meth:`RocksDBStore.adopt`).

**TTL.** ``self.state(name, ttl_ms=...)`` stores the write time with each value (a
:class:`Stamped` entry): an entry not written for ``ttl_ms`` is invisible at once, and a
sweep (at most once per ``ttl_ms``, on access) removes expired entries. Checkpoints keep
the write time, so a restore never brings an expired entry back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import random
import shutil
import struct
import threading
import time
import weakref
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    ValuesView,
)
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from jstormpy.api.errors import CheckpointError, ConfigError
from jstormpy.keygroups import key_group, key_groups_of
from jstormpy.state_keys import INITIAL_CAPACITY, StateKeys, enabled

log = logging.getLogger("jstormpy.state_store")

STATE_STORES = ("memory", "rocksdb")
"""The values of ``Config.state_store``."""

Clock = Callable[[], float]
"""Wall-clock milliseconds (TTL write times and expiry)."""


def wall_ms() -> float:
    """Milliseconds since the epoch (the default TTL clock)."""
    return time.time() * 1000.0


class Stamped(NamedTuple):
    """An entry of a state with a TTL, as checkpoints hold it: the value and the wall-clock
    millisecond it was last written."""

    written_ms: float
    value: Any


def check_ttl(ttl_ms: Any) -> int | None:
    """``ttl_ms`` if it is None or an int > 0; a ConfigError naming it otherwise."""
    if ttl_ms is None:
        return None
    if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms <= 0:
        raise ConfigError(f"state ttl_ms must be an int > 0 (milliseconds) or None, "
                          f"got {ttl_ms!r}")
    return ttl_ms


def state_ttl(state: Any) -> int | None:
    """The TTL a managed state was opened with (None for a plain one)."""
    return getattr(state, "ttl_ms", None)


# -- the codec ----------------------------------------------------------------------------------
_INT = struct.Struct(">q")
_FLOAT = struct.Struct(">d")
_STAMP = struct.Struct(">d")
_S, _B, _I, _F, _P, _T = b"s", b"b", b"i", b"f", b"p", b"T"
_TAG_S, _TAG_B, _TAG_I, _TAG_F, _TAG_P, _TAG_T = (t[0] for t in (_S, _B, _I, _F, _P, _T))
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


def encode(obj: Any) -> bytes:
    """``obj`` as bytes: a tag byte, then UTF-8 for str, the bytes, 8-byte big-endian for an
    int that fits and a float, pickle protocol 5 for anything else."""
    cls = obj.__class__
    if cls is str:
        return _S + obj.encode("utf-8", "surrogatepass")
    if cls is int and _INT_MIN <= obj <= _INT_MAX:
        return _I + _INT.pack(obj)
    if cls is bytes:
        return _B + obj
    if cls is float:
        return _F + _FLOAT.pack(obj)
    return _P + pickle.dumps(obj, protocol=5)


def decode(data: bytes) -> Any:
    """The object :func:`encode` wrote."""
    tag = data[0]
    if tag == _TAG_S:
        return data[1:].decode("utf-8", "surrogatepass")
    if tag == _TAG_I:
        return _INT.unpack_from(data, 1)[0]
    if tag == _TAG_B:
        return data[1:]
    if tag == _TAG_F:
        return _FLOAT.unpack_from(data, 1)[0]
    if tag == _TAG_P:
        return pickle.loads(data[1:])
    raise ValueError(f"not an encoded state value (tag {tag!r})")


def encode_key(key: Any) -> bytes:
    """A state key as stored: keys that compare equal in a ``dict`` (``1``, ``1.0``,
    ``True``) encode alike, as :func:`jstormpy.keygroups.key_hash` hashes them alike."""
    cls = key.__class__
    if cls is bool or (cls is float and key.is_integer()):
        key = int(key)
    return encode(key)


def encode_stamped(written_ms: float, value: Any) -> bytes:
    """A TTL entry: tag, write time, then the value's encoding."""
    return _T + _STAMP.pack(written_ms) + encode(value)


def decode_entry(data: bytes) -> Any:
    """A stored value: a :class:`Stamped` for a TTL entry, else the value."""
    if data[0] == _TAG_T:
        return Stamped(_STAMP.unpack_from(data, 1)[0], decode(data[9:]))
    return decode(data)


# -- TTL over the memory store --------------------------------------------------------------------
class TtlState(MutableMapping[Any, Any]):
    """A memory-store state with a TTL: a dict of :class:`Stamped` entries underneath.

    Pickles as that dict without its expired entries (what a checkpoint stores)."""

    def __init__(self, entries: dict[Any, Any] | None, ttl_ms: int,
                 clock: Clock = wall_ms) -> None:
        self.entries: dict[Any, Any] = {} if entries is None else entries
        self.ttl_ms = ttl_ms
        self.clock = clock
        self.next_sweep = 0.0
        for k, v in self.entries.items():  # a state written before it had a TTL
            if v.__class__ is not Stamped:
                self.entries[k] = Stamped(clock(), v)

    def _now(self) -> float:
        now = self.clock()
        if now >= self.next_sweep:
            self.sweep(now)
        return now

    def sweep(self, now: float | None = None) -> int:
        """Remove expired entries; returns how many."""
        now = self.clock() if now is None else now
        self.next_sweep = now + self.ttl_ms
        horizon = now - self.ttl_ms
        dead = [k for k, s in self.entries.items() if s[0] <= horizon]
        for k in dead:
            del self.entries[k]
        return len(dead)

    def __getitem__(self, key: Any) -> Any:
        s = self.entries[key]
        if s[0] <= self._now() - self.ttl_ms:
            raise KeyError(key)
        return s[1]

    def get(self, key: Any, default: Any = None) -> Any:
        s = self.entries.get(key)
        if s is None or s[0] <= self._now() - self.ttl_ms:
            return default
        return s[1]

    def __contains__(self, key: Any) -> bool:
        s = self.entries.get(key)
        return s is not None and s[0] > self._now() - self.ttl_ms

    def __setitem__(self, key: Any, value: Any) -> None:
        self.entries[key] = Stamped(self._now(), value)

    def __delitem__(self, key: Any) -> None:
        live = key in self
        self.entries.pop(key, None)
        if not live:
            raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        horizon = self._now() - self.ttl_ms
        return iter([k for k, s in self.entries.items() if s[0] > horizon])

    def __len__(self) -> int:
        horizon = self._now() - self.ttl_ms
        return sum(1 for s in self.entries.values() if s[0] > horizon)

    def __reduce__(self) -> tuple[Any, ...]:
        self.sweep()
        return (dict, (dict(self.entries),))

    def __repr__(self) -> str:
        return f"TtlState(ttl_ms={self.ttl_ms}, {dict(self.items())!r})"


class MemoryStore:
    """Today's managed state: a dict per name (``factory``: ``dict``, or the incremental
    checkpoints' tracking dict), a :class:`TtlState` over one with a TTL."""

    kind = "memory"

    def __init__(self, factory: Callable[[], dict[Any, Any]] = dict,
                 clock: Clock = wall_ms) -> None:
        self.factory = factory
        self.clock = clock

    def open(self, name: str, ttl_ms: int | None, current: Any) -> MutableMapping[Any, Any]:
        """State ``name`` with ``ttl_ms``, keeping the entries of ``current`` (a restored
        dict, or the same state opened with another TTL)."""
        if isinstance(current, TtlState):
            current = {k: s[1] for k, s in current.entries.items()} if ttl_ms is None \
                else current.entries
        if ttl_ms is None:
            if current is None:
                return self.factory()
            return current
        if current is not None and type(current) is not dict:
            current = dict(current)  # e.g. an incremental tracking dict: a TTL state is whole
        return TtlState(current, ttl_ms, self.clock)

    def adopt(self, states: dict[str, Any]) -> None:
        """Restored states stay the dicts they were restored as."""

    def close(self) -> None:
        """Nothing to release."""


# -- RocksDB ------------------------------------------------------------------------------------
def rocksdict_module() -> Any:
    """The ``rocksdict`` module (a ConfigError naming it if it is not installed)."""
    try:
        import rocksdict
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ConfigError("state_store='rocksdb' needs the rocksdict package "
                          "(pip install rocksdict)") from exc
    return rocksdict


_GROUP = struct.Struct(">H")
_GROUP_INT = struct.Struct(">HBq")  # key group, the int tag, the int
_GROUP_TAG_S = struct.Struct(">HB")  # key group, the str tag
LOAD_BATCH = 10_000
"""Entries per write batch when a restore fills a fresh database."""


def db_key(key: Any, max_parallelism: int) -> bytes:
    """A state key's bytes in its column family: its key group (big-endian, so one group's
    keys sort together and a rescale reads a range), then :func:`encode_key` (inlined for
    the common ``int`` and ``str`` keys: one per state read)."""
    cls = key.__class__
    if cls is int and _INT_MIN <= key <= _INT_MAX:
        return _GROUP_INT.pack(key_group(key, max_parallelism), _TAG_I, key)
    if cls is str:
        return (_GROUP_TAG_S.pack(key_group(key, max_parallelism), _TAG_S)
                + key.encode("utf-8", "surrogatepass"))
    return _GROUP.pack(key_group(key, max_parallelism)) + encode_key(key)


_sample = random.Random().random
"""READ_CACHE_ADMISSION's draw: a generator of the store's own, so a state read never takes
a number from the one the user's code may seed (``random.seed``) and draw from."""


class RocksState(MutableMapping[Any, Any]):
    """One named state in a task's RocksDB: a column family, keys prefixed with their key
    group. ``ttl_ms``: entries older than it are invisible (and swept, at most once per
    ``ttl_ms``, on access). Pickles as a plain dict of its live entries (:class:`Stamped`
    ones with a TTL), which is what a checkpoint stores.

    Writes go to a per-state write cache (a dict of the entries written since the last
    flush, shared by every view of the state) that is written to RocksDB in one write batch
    when it holds :data:`WRITE_CACHE_ENTRIES` entries, at every barrier (before the native
    checkpoint) and before a scan (iteration, ``len``); a read looks in it first."""

    def __init__(self, store: RocksDBStore, name: str, cf: Any,
                 ttl_ms: int | None = None) -> None:
        self.store = store
        self.name = name
        self.cf = cf
        self.ttl_ms = ttl_ms
        store.add_view(self)  # its column family handle is replaced if the store reopens
        self.cache: dict[Any, Any] = store.caches.setdefault(name, {})
        self.key_filters: StateKeys | None = store.state_keys.get(name)
        """The state's key filters (None: the store keeps none): a key the trusted one has
        never seen is not in RocksDB."""
        self.max_parallelism = store.max_parallelism
        self.clock = store.clock
        self.next_sweep = 0.0

    def _horizon(self) -> float:
        """Entries written at or before this are expired (-inf without a TTL)."""
        if self.ttl_ms is None:
            return float("-inf")
        now = self.clock()
        if now >= self.next_sweep and not self.store.pending():  # a sweep scans: not
            self.sweep(now)                                     # while a barrier applies
        return now - self.ttl_ms

    def _entry(self, key: Any) -> Any:
        """The stored entry of ``key`` (a :class:`Stamped` one with a TTL), or the missing
        marker."""
        entry = self.cache.get(key, _MISSING)
        if entry is _MISSING:
            layers = self.store.sealed  # no reverse iterator to build when none is pending
            for sealed in reversed(layers) if layers else ():  # newest first
                entry = sealed.writes.get(self.name, _NO_WRITES).get(key, _MISSING)
                if entry is not _MISSING:
                    return _MISSING if entry is _DELETED else sealed_copy(entry)
            k = db_key(key, self.max_parallelism)
            keys = self.key_filters
            if keys is not None:
                trusted = keys.trusted
                if trusted is not None and k not in trusted:
                    return _MISSING  # never written: no RocksDB read
            raw = (self.cf.get(k) if _sample() < READ_CACHE_ADMISSION
                   else self.cf.get(k, None, self.store.uncached_reads))
            return _MISSING if raw is None else decode_entry(raw)
        return _MISSING if entry is _DELETED else entry

    def _value(self, key: Any) -> Any:
        """The live value of ``key``, or the missing marker when absent or expired."""
        entry = self._entry(key)
        if entry.__class__ is Stamped:
            if entry.written_ms <= self._horizon():
                return _MISSING
            return entry.value
        return entry

    def flush(self) -> None:
        """Write the cached writes to RocksDB (one write batch)."""
        self.store.flush(self.name)

    def sweep(self, now: float | None = None) -> int:
        """Delete expired entries; returns how many."""
        if self.ttl_ms is None:
            return 0
        self.flush()
        now = self.clock() if now is None else now
        self.next_sweep = now + self.ttl_ms
        horizon = now - self.ttl_ms
        dead = [k for k, v in self.cf.items()
                if v[0] == _TAG_T and _STAMP.unpack_from(v, 1)[0] <= horizon]
        for k in dead:
            self.cf.delete(k)
        return len(dead)

    def __getitem__(self, key: Any) -> Any:
        value = self._value(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._value(key)
        return default if value is _MISSING else value

    def __contains__(self, key: Any) -> bool:
        return self._value(key) is not _MISSING

    def __setitem__(self, key: Any, value: Any) -> None:
        cache = self.cache
        if self.ttl_ms is None:
            cache[key] = value
        else:
            self._horizon()
            cache[key] = Stamped(self.clock(), value)
        if len(cache) >= WRITE_CACHE_ENTRIES:
            self.store.cache_full(self.name)

    def __delitem__(self, key: Any) -> None:
        if self._value(key) is _MISSING:
            raise KeyError(key)
        self.cache[key] = _DELETED
        if len(self.cache) >= WRITE_CACHE_ENTRIES:
            self.store.cache_full(self.name)

    def discard(self, key: Any) -> None:
        """Delete ``key`` if it is there, without reading it first (``del`` reads, to
        raise KeyError): a blind delete, one write."""
        self.cache[key] = _DELETED
        if len(self.cache) >= WRITE_CACHE_ENTRIES:
            self.store.cache_full(self.name)

    def raw_items(self) -> Iterator[tuple[Any, Any]]:
        """Every stored entry, expired ones too, TTL entries as :class:`Stamped`."""
        self.flush()
        for k, v in self.cf.items():
            yield decode(k[2:]), decode_entry(v)

    def items_live(self) -> Iterator[tuple[Any, Any]]:
        horizon = self._horizon()
        self.flush()
        for k, v in self.cf.items():
            entry = decode_entry(v)
            if entry.__class__ is Stamped:
                if entry.written_ms <= horizon:
                    continue
                entry = entry.value
            yield decode(k[2:]), entry

    def __iter__(self) -> Iterator[Any]:
        if self.ttl_ms is None:
            self.flush()
            return (decode(k[2:]) for k in self.cf.keys())
        return (k for k, _ in self.items_live())

    def __len__(self) -> int:
        """Counts the entries (a scan: RocksDB keeps no exact count)."""
        if self.ttl_ms is None:
            self.flush()
            return sum(1 for _ in self.cf.keys())
        return sum(1 for _ in self.items_live())

    def items(self) -> ItemsView[Any, Any]:
        """A view whose iteration is one scan of the column family (not a read per key)."""
        return _ScanItems(self)

    def values(self) -> ValuesView[Any]:
        """A view whose iteration is one scan of the column family (not a read per key)."""
        return _ScanValues(self)

    def __bool__(self) -> bool:
        """Whether any entry is live (stops at the first; ``len`` would count them all)."""
        if self.ttl_ms is None:
            self.flush()
            return next(iter(self.cf.keys()), None) is not None
        return next(iter(self.items_live()), None) is not None

    def clear(self) -> None:
        self.flush()
        for k in list(self.cf.keys()):
            self.cf.delete(k)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.ttl_ms is None:
            return (dict, (dict(self.raw_items()),))
        horizon = self._horizon()
        return (dict, ({k: v for k, v in self.raw_items()
                        if v.__class__ is not Stamped or v.written_ms > horizon},))

    def __repr__(self) -> str:
        return f"RocksState({self.name!r}, ttl_ms={self.ttl_ms})"


class _ScanItems(ItemsView[Any, Any]):
    _mapping: RocksState

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self._mapping.items_live()


class _ScanValues(ValuesView[Any]):
    _mapping: RocksState

    def __iter__(self) -> Iterator[Any]:
        return (v for _, v in self._mapping.items_live())


WRITE_BUFFER_BYTES = 16 << 20
"""RocksDB memtable size per column family (what a barrier may have to flush)."""

BLOCK_CACHE_BYTES = 32 << 20
"""RocksDB block cache of a task database opened without a worker's budget
(:class:`RocksDBMemory`: tools and tests that open a store on its own)."""

SUGGESTED_MEMORY_MB = 128
"""The smallest ``Config.rocksdb_memory_mb`` (:class:`RocksDBMemory`; docs/state-stores.md,
"Memory") whose memtable share (43 MB, a flush from 37 MB) holds two tasks' active 16 MB
memtables, so a worker of two single-state tasks flushes as without a budget; a bigger
cache bought no CPU per get at 2M-10M keys a task (docs/performance.md, "A RocksDB memory
budget per worker"). Not the default: without a budget (None) every state keeps its own
memtables, which a budget would flush early once more than two states are busy."""

MIN_MEMORY_MB = 32
"""The smallest budget ``Config.rocksdb_memory_mb`` accepts (below it a write buffer's
share is smaller than one memtable and every memtable is flushed early)."""

WRITE_BUFFER_RATIO = 0.5
"""Share of a :class:`RocksDBMemory` budget that memtables may hold (Flink's
``state.backend.rocksdb.memory.write-buffer-ratio`` default)."""


class RocksDBMemory:
    """One worker's RocksDB memory: a block cache shared by all its task databases (and
    all their states), with the memtables charged to it through a write buffer manager,
    sized from one budget as Flink sizes a slot's managed memory
    (``state.backend.rocksdb.memory.managed``): of ``budget_mb``, the cache gets
    ``(3 - r) / 3`` and the memtables may hold ``2 r / 3`` (``r`` =
    :data:`WRITE_BUFFER_RATIO`), where a memtable's memory is reserved in the cache; the
    third left over is the room RocksDB lets the memtables overshoot their limit by (a
    flush is triggered at 7/8 of it and the immutable memtables wait for their flush), so
    the cache and the memtables together stay within the budget. Index and filter blocks
    are not in it (the table readers' own memory: :func:`store_options`)."""

    def __init__(self, budget_mb: int) -> None:
        if type(budget_mb) is not int or budget_mb < MIN_MEMORY_MB:
            raise ConfigError(f"rocksdb_memory_mb must be an int >= {MIN_MEMORY_MB} (MB of "
                              f"RocksDB block cache and memtables per worker), "
                              f"got {budget_mb!r}")
        rd = rocksdict_module()
        self.budget_mb = budget_mb
        budget = budget_mb << 20
        self.cache_bytes = int(budget * (3 - WRITE_BUFFER_RATIO) / 3)
        """The shared block cache's capacity (``rocksdb.block-cache-capacity``)."""
        self.write_buffer_bytes = int(budget * 2 * WRITE_BUFFER_RATIO / 3)
        """What the worker's memtables may hold before RocksDB flushes one early."""
        self.cache = rd.Cache(self.cache_bytes)
        self.write_buffers = rd.WriteBufferManager.new_write_buffer_manager_with_cache(
            self.write_buffer_bytes, False, self.cache)


READ_CACHE_ADMISSION = 1 / 16
"""Share of a state's point reads (a get that misses the write cache) that may add the
data block they read to the block cache; the others read with RocksDB's ``fill_cache``
off. A block read often still enters soon (a hot key's block is cached after ~16 reads,
and stays: reads that hit the cache are not affected), while random reads over a state
far larger than the cache (where a few per cent of them hit) stop paying for inserting a
block and evicting another on every read: at 10M keys a present key's get took 5.4 µs
of CPU filling the cache on every read, 4.3-4.7 with this, 3.9 never filling it
(docs/performance.md, "Cheaper reads of a big state"). A burst of reads of cold keys no
longer flushes the hot keys' blocks out either. The price: after a start the cache warms
16 times more slowly (a state that fits in it is cached after ~16 passes, not one)."""

BLOOM_BITS_PER_KEY = 16
"""Bits per key of each SST file's bloom filter: ~0.1 % false positives per file a get
probes (10 bits: ~1 %). A get probes one filter per sorted run (up to ~8 in a big
state), and each false positive costs a search of the file's index and a data block
read, about 4 µs; at 10 bits that was 0.07 false positives per get, 0.3 µs of every read.
The filters take 2 bytes a key in memory (``table_readers_bytes``), 0.75 more than
with 10 bits; where a key filter answers the absent keys, the last level (most keys)
keeps none (``last_level_filters`` of :func:`store_options`)."""

MEMTABLE_BLOOM_RATIO = 0.1
"""Size of a memtable's bloom filter over its keys, as a share of the memtable
(:data:`WRITE_BUFFER_BYTES`): 1.6 MB per memtable (tens to hundreds of bits per key,
depending on the entries' size: few false positives)."""

LEVEL0_COMPACTION_TRIGGER = 12
"""Level-0 files (memtable flushes) that start a level-0 -> level-1 compaction (RocksDB's
default: 4). With uniformly random updates every level-0 file overlaps all of level 1,
so that compaction rewrites level 1 whole, and an incremental checkpoint uploads what it
wrote. A checkpoint interval flushes one to three memtables (the barrier's flush and any
full one), so at 4 most checkpoints carried a compaction's output (10-13 % of a full
checkpoint at 20M keys); at 12 one interval in four to six does (docs/state-stores.md,
"Compaction and incremental checkpoints"). The price: up to 12 level-0 files a point
lookup may consult (their bloom filters are cached; ~1 % false positives each) and up
to 12 memtables of overwritten entries on disk until they are compacted."""

COMPACTION_STYLES = ("universal", "level")
"""The compaction styles a task database may use (``Config.rocksdb_compaction_style``)."""

COMPACTION_STYLE = "universal"
"""How a task database compacts by default (``Config.rocksdb_compaction_style``).
Universal (tiered): each memtable flush is a sorted run; when
:data:`LEVEL0_COMPACTION_TRIGGER` runs pile up (the trigger is the most a lookup probes
once RocksDB has caught up) RocksDB merges the newer, similar-sized ones, and when the
newer runs add up to :data:`UNIVERSAL_MAX_SIZE_AMP_PERCENT` of the oldest it merges them
all into one. With uniformly random updates each byte is rewritten far fewer times than
leveled compaction's ~10 per level: half the compaction CPU per write at a task's 10M keys
(issue 34: the two cores the task threads need). The price: the merge of all runs, which
the next incremental checkpoint uploads whole, and the disk between such merges
(docs/state-stores.md, "Compaction and incremental checkpoints")."""


LEVEL0_SLOWDOWN_TRIGGER = 30
"""Level-0 files at which RocksDB slows writes down (default 20: it must stay well above
:data:`LEVEL0_COMPACTION_TRIGGER`, or every compaction that lags would slow writes)."""

LEVEL0_STOP_TRIGGER = 48
"""Level-0 files at which RocksDB stops writes until a compaction finishes (default 36)."""

UNIVERSAL_MAX_SIZE_AMP_PERCENT = 200
"""Universal compaction: merge all sorted runs into one once the newer runs add up to this
share of the oldest (RocksDB's ``max_size_amplification_percent``, its default). It bounds
the disk: the SST files stay within about (1 + this / 100) times the oldest run, the bulk of
the state; each such merge rewrites the task's database whole, and the next incremental
checkpoint uploads it (docs/state-stores.md, "Compaction and incremental checkpoints")."""

LEVEL1_BYTES = 32 << 20
"""Size of the base level, the one level-0 compactions write into
(``max_bytes_for_level_base``; RocksDB's default is 256 MB; each further level is 10 times
the one above). With uniformly random keys a level-0 compaction rewrites the base level
whole: at 256 MB that was the whole database of a task up to ~8M keys, so each took
longer as the state grew, level-0 files piled up meanwhile and every read probed more of
them (issue 34: the read-modify-write rate fell with the state). At 32 MB a level-0
compaction costs the same at any size."""

INDEX_RESTART_INTERVAL = 16
"""Keys per restart point in an SST file's index block (``index_block_restart_interval``;
RocksDB's default is 1: every index entry a restart point, whole keys). A get's binary
search then runs over a sixteenth of the restart points and scans at most 16 entries
after the last one: the index blocks take about a quarter of the memory (18.7 of the
31.2 MB of index and filters at 10M keys a task drop to ~4.5 MB), and the search touches
fewer cache lines that no recent get touched, the part of a get that grew with the state
(issue 34; docs/performance.md, "Flat reads: the index blocks"). Older files keep their
own layout: RocksDB reads each file by the interval it was written with."""

COMPRESSION = "lz4"
"""How a task database compresses its SST files' blocks (RocksDB's ``compression``; its
default is Snappy, and RocksDB's own tuning guide suggests LZ4). Measured side by side in
one database to 3M keys of the read-modify-write job's values (issue 34;
docs/performance.md, "LZ4 for the task databases"): the files and every incremental
checkpoint's upload about 29 % smaller, compactions writing 29 % fewer bytes for less
CPU, the task thread's CPU per record the same or lower. Each block records how it was
compressed, so files written with another compression (a checkpoint taken before the
change) restore and are read as they are; compactions rewrite them in this one."""

BACKGROUND_JOBS = 4
"""RocksDB's background threads for a task database (``max_background_jobs``; RocksDB's
default is 2: one flush thread and one compaction thread). RocksDB's thread pools are
per process, so this is what a worker's databases share: one flush thread and three
compaction threads. With one compaction thread, universal compaction's merge of a
task's larger sorted runs (hundreds of MB, several seconds) held it, the newer runs
piled up behind it meanwhile (up to 23 where the trigger is 12), and every get probed
their filters: the task's read-modify-write slowed for the merge's duration. With three,
the newer runs merge among themselves beside it (issue 34; docs/performance.md, "Flat
reads: compaction threads")."""

TARGET_FILE_BYTES = 8 << 20
"""Size of the SST files compactions write (``target_file_size_base``; RocksDB's default
is 64 MB): a fraction of :data:`LEVEL1_BYTES`, so a base-level file overlaps a fraction of
the level below and a compaction out of the base level rewrites that fraction."""

ROCKSDB_FIGURES = {
    **{f"l{n}_files": f"rocksdb.num-files-at-level{n}" for n in range(7)},
    "pending_compaction_bytes": "rocksdb.estimate-pending-compaction-bytes",
    "sst_bytes": "rocksdb.total-sst-files-size",
    "table_readers_bytes": "rocksdb.estimate-table-readers-mem",
    "memtable_bytes": "rocksdb.cur-size-all-mem-tables",
}
"""What :meth:`RocksDBStore.figures` reports of each state's column family (summed over
the task's states): figure name -> RocksDB property. Gauges: their value now."""

ROCKSDB_DB_FIGURES = {
    "running_compactions": "rocksdb.num-running-compactions",
    "running_flushes": "rocksdb.num-running-flushes",
    "delayed_write_rate": "rocksdb.actual-delayed-write-rate",
    "write_stopped": "rocksdb.is-write-stopped",
    "block_cache_bytes": "rocksdb.block-cache-usage",
    "block_cache_capacity_bytes": "rocksdb.block-cache-capacity",
}
"""Figures of the task's whole database (one value for all its states): gauges.
``delayed_write_rate`` is the write rate (bytes/s) RocksDB holds writes to while level 0
or the pending compaction bytes are past their slowdown limits (0: not slowed)."""

ROCKSDB_TICKERS = {
    "gets_total": "rocksdb.number.keys.read",
    "memtable_hits_total": "rocksdb.memtable.hit",
    "l0_hits_total": "rocksdb.l0.hit",
    "l1_hits_total": "rocksdb.l1.hit",
    "l2up_hits_total": "rocksdb.l2andup.hit",
    "bloom_useful_total": "rocksdb.bloom.filter.useful",
    "bloom_positive_total": "rocksdb.bloom.filter.full.positive",
    "bloom_true_positive_total": "rocksdb.bloom.filter.full.true.positive",
    "block_cache_data_hits_total": "rocksdb.block.cache.data.hit",
    "block_cache_data_misses_total": "rocksdb.block.cache.data.miss",
    "block_cache_data_adds_total": "rocksdb.block.cache.data.add",
    "block_cache_hits_total": "rocksdb.block.cache.hit",
    "block_cache_misses_total": "rocksdb.block.cache.miss",
    "stall_micros_total": "rocksdb.stall.micros",
    "compaction_read_bytes_total": "rocksdb.compact.read.bytes",
    "compaction_write_bytes_total": "rocksdb.compact.write.bytes",
    "flush_write_bytes_total": "rocksdb.flush.write.bytes",
    "compaction_cpu_micros_total": "rocksdb.compaction.times.cpu_micros",
    "get_micros_total": "rocksdb.db.get.micros",
}
"""RocksDB's own statistics of the task's database (counters since it was opened; a
histogram's sum for ``compaction_cpu_micros_total`` and ``get_micros_total``): figure name
-> ticker or histogram. ``bloom_useful`` counts SST files a get skipped on their bloom
filter, ``bloom_positive`` those it had to search (``bloom_true_positive``: and found the
key in); ``stall_micros`` the time writes were slowed or stopped."""

_HISTOGRAM_SUMS = frozenset({"rocksdb.compaction.times.cpu_micros", "rocksdb.db.get.micros"})
"""The :data:`ROCKSDB_TICKERS` that are histograms (their sum is the figure)."""


def parse_statistics(text: str) -> dict[str, float]:
    """RocksDB's statistics dump (``Options.get_statistics()``) as name -> count, with a
    histogram's sum as ``name.sum`` (only the names :data:`ROCKSDB_TICKERS` asks for)."""
    wanted = set(ROCKSDB_TICKERS.values())
    out: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name not in wanted:
            continue
        fields = rest.split()
        for i, word in enumerate(fields[:-2]):
            if word == "COUNT" and fields[i + 1] == ":":
                out[name] = float(fields[i + 2])
            elif word == "SUM" and fields[i + 1] == ":":
                out[name + ".sum"] = float(fields[i + 2])
    return out


WRITE_CACHE_ENTRIES = 16_384
"""Entries a state's write cache holds before it is written to RocksDB (bounds both the
cache's RAM and the flush at a barrier: ~1 µs per entry)."""


class _Deleted:
    """A deletion in a write cache."""


_DELETED = _Deleted()
_MISSING = object()
_NO_WRITES: dict[Any, Any] = {}

WRITE_BATCH_ENTRIES = 2048
"""Entries per RocksDB write batch when a write cache or a barrier's sealed writes are
written (~1 ms each: how long the write holds the GIL)."""

WRITE_CACHE_GROWTH = 8
"""While a barrier's sealed writes are not in RocksDB yet, a full write cache grows up to
this many times :data:`WRITE_CACHE_ENTRIES` before the task thread waits for the apply."""

MEMTABLE_FLUSH_WAIT_S = 10.0
"""How long the snapshot thread waits for RocksDB's background memtable flush before the
native checkpoint (after it, the checkpoint flushes them itself)."""

CLOSE_WAIT_S = 60.0
"""How long closing a store waits for a barrier's pending apply on the snapshot thread."""


class SealState(Enum):
    """Where the writes a barrier sealed (:class:`Sealed`) are."""

    PENDING = "pending"
    """Sealed on the task thread; the snapshot thread has not written them yet."""
    APPLIED = "applied"
    """Written to RocksDB (and the barrier's native checkpoint taken, if one was asked)."""
    FAILED = "failed"
    """The write or the checkpoint failed: the checkpoint is declined; writes not in
    RocksDB yet stay here until the task thread writes them (after reopening)."""


def sealed_copy(entry: Any) -> Any:
    """A read of a sealed write: the value is the barrier's, so the reader gets a copy
    (what a read from RocksDB gets) — mutating it in place and writing it back must not
    change the sealed one, which the snapshot thread writes into the barrier's checkpoint."""
    value = entry.value if entry.__class__ is Stamped else entry
    if value.__class__ in _SHARED_TYPES:
        return entry
    if entry.__class__ is Stamped:
        return decode_entry(encode_stamped(entry.written_ms, value))
    return decode(encode(value))


_SHARED_TYPES = frozenset({str, int, float, bytes, bool, type(None)})
"""Immutable value types a sealed write hands out as they are."""


@dataclass(eq=False)
class Sealed:
    """The write caches as they were at a barrier: handed to the snapshot thread, which
    writes them to RocksDB and then takes the barrier's native checkpoint. Until then the
    task thread's reads see them (cache, then sealed writes, newest first, then RocksDB)
    and nothing written after the barrier reaches RocksDB."""

    writes: dict[str, dict[Any, Any]]
    """State name -> its cache at the barrier (emptied once written to RocksDB)."""
    done: threading.Event = field(default_factory=threading.Event)
    """Set once the snapshot thread is through with it (applied or failed)."""
    state: SealState = SealState.PENDING
    error: BaseException | None = None
    stall_ms: float = 0.0
    """Time the task thread waited for this apply (a full cache, a scan, a close)."""


def store_options(rd: Any, block_cache: Any = None, level0_trigger: int | None = None,
                  statistics: bool = True, write_buffers: Any = None,
                  compaction_style: str | None = None,
                  last_level_filters: bool = True) -> Any:
    """Options of a task database: raw bytes in and out; point lookups (a state read is
    one) through a bloom filter and ``block_cache`` (the worker's, shared by its tasks'
    databases and their states; ``write_buffers``: the write buffer manager that charges
    the memtables to it, :class:`RocksDBMemory`); ``compaction_style`` (None:
    :data:`COMPACTION_STYLE`): universal compaction, at most ``level0_trigger`` sorted runs
    once RocksDB has caught up, or leveled compaction that lets level 0 collect
    ``level0_trigger`` files (:data:`LEVEL0_COMPACTION_TRIGGER` by default), so few
    incremental checkpoints upload a compaction's output; ``statistics``: RocksDB's
    statistics on (what :meth:`RocksDBStore.figures` reads its counters from);
    ``last_level_filters``: False where reads rarely miss, because a key filter in front
    of RocksDB answers the absent keys (``jstormpy/state_keys.py``): then the last level,
    most of the keys, keeps no bloom filter."""
    trigger = LEVEL0_COMPACTION_TRIGGER if level0_trigger is None else level0_trigger
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(True)
    # the native checkpoint at a barrier flushes the memtable on the task thread: a
    # smaller one bounds that pause (RocksDB flushes full ones in the background)
    opts.set_write_buffer_size(WRITE_BUFFER_BYTES)
    opts.set_compression_type(getattr(rd.DBCompressionType, COMPRESSION)())
    if write_buffers is not None:
        opts.set_write_buffer_manager(write_buffers)
    style = COMPACTION_STYLE if compaction_style is None else compaction_style
    if style == "universal":
        opts.set_compaction_style(rd.DBCompactionStyle.universal())
        universal = rd.UniversalCompactOptions()
        universal.max_size_amplification_percent = UNIVERSAL_MAX_SIZE_AMP_PERCENT
        opts.set_universal_compaction_options(universal)
    else:
        opts.set_compaction_style(rd.DBCompactionStyle.level())
    opts.set_level_zero_file_num_compaction_trigger(trigger)
    # the slowdown and stop triggers stay well above it (a trigger set higher moves them)
    slowdown = max(LEVEL0_SLOWDOWN_TRIGGER, 2 * trigger + 6)
    opts.set_level_zero_slowdown_writes_trigger(slowdown)
    opts.set_level_zero_stop_writes_trigger(max(LEVEL0_STOP_TRIGGER, slowdown + 18))
    # a bloom filter over each memtable's keys: most reads miss the memtables (a key was
    # written at some earlier checkpoint interval, or never), and without it each such read
    # searched the active and the immutable memtable's skip lists, the costliest step of a
    # read once a memtable is full (docs/state-stores.md, "Memory"; issue 34)
    opts.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
    opts.set_memtable_whole_key_filtering(True)
    opts.set_max_bytes_for_level_base(LEVEL1_BYTES)
    opts.set_target_file_size_base(TARGET_FILE_BYTES)
    # a get that reaches the last level finds its key there when a key filter answered
    # the absent keys first: that level's bloom filters (most of the filters' memory) would
    # only say "maybe" (RocksDB's optimize_filters_for_hits; issue 34)
    opts.set_optimize_filters_for_hits(not last_level_filters)
    table = rd.BlockBasedOptions()
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    # sparser index blocks (INDEX_RESTART_INTERVAL; issue 34): measured by CPU time in
    # one database, a present get grew by 2.6 µs from 1M to 10M keys with the block-cache
    # misses the same, by 2.1 µs with this (0.6 µs less at 10M keys); a read-modify-write
    # to 10M keys cost 0.7 µs less on average (docs/performance.md, "Flat reads: the
    # index blocks")
    table.set_index_block_restart_interval(INDEX_RESTART_INTERVAL)
    if block_cache is not None:
        table.set_block_cache(block_cache)
    # index and filter blocks stay in the table readers' own memory (RocksDB's default),
    # not in the block cache: there the data blocks of random reads evicted them, and
    # every lookup read and parsed a whole file's filter and index again, so a
    # read-modify-write slowed from ~100k/s to ~2k/s as the state grew past 1M keys
    # (issue 34; docs/state-stores.md, "Memory"). Their memory grows with the keys: about
    # 2.6 bytes per key at the bench's 320-byte values (BLOOM_BITS_PER_KEY, 2 bytes; the
    # index, one entry per 4 KB data block, a restart point per 16 entries, about 0.6;
    # 1.9 bytes with every entry one)
    table.set_cache_index_and_filter_blocks(False)
    opts.set_block_based_table_factory(table)
    # RocksDB's own counters (cache hits, filter probes, stalls, compaction CPU), read by
    # RocksDBStore.figures into the task's metrics (docs/operations.md): about 0.2 µs of
    # CPU per get (docs/performance.md, "What grows with the state in the job")
    if statistics:
        opts.enable_statistics()
    opts.set_max_background_jobs(BACKGROUND_JOBS)
    return opts


class RocksDBStore:
    """One task's RocksDB database: a fresh directory at ``path`` (whatever was there —
    the database of an earlier run or generation of this task — is removed first: a
    restore always fills a fresh database from the checkpoint), created when the task
    opens its first state."""

    kind = "rocksdb"

    def __init__(self, path: str | os.PathLike[str], max_parallelism: int,
                 clock: Clock = wall_ms, level0_trigger: int | None = None,
                 memory: RocksDBMemory | None = None,
                 compaction_style: str | None = None, key_filter: bool | None = None,
                 key_filter_capacity: int = INITIAL_CAPACITY) -> None:
        rd = rocksdict_module()
        self.memory = memory
        """The worker's RocksDB memory (its block cache and write buffer manager, shared
        with the worker's other task databases); None: a block cache of this database's
        own (:data:`BLOCK_CACHE_BYTES`)."""
        self.level0_trigger = level0_trigger
        """``Config.rocksdb_level0_compaction_trigger`` (None: the store's default)."""
        self.compaction_style = compaction_style
        """``Config.rocksdb_compaction_style`` (None: :data:`COMPACTION_STYLE`)."""
        self.path = Path(path)
        self.frozen_dir = self.path.with_name(self.path.name + ".frozen")
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.rmtree(self.frozen_dir, ignore_errors=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.frozen_count = 0
        self.max_parallelism = max_parallelism
        self.clock = clock
        self.rd = rd
        self.block_cache = rd.Cache(BLOCK_CACHE_BYTES) if memory is None else memory.cache
        self.uncached_reads = rd.ReadOptions()
        """Read options of the point reads that do not add their block to the block
        cache (all but :data:`READ_CACHE_ADMISSION` of them)."""
        self.uncached_reads.fill_cache(False)
        self.db: Any = None  # opened with the first state: a stateless task has no database
        self.families: dict[str, Any] = {}
        self.caches: dict[str, dict[Any, Any]] = {}  # per state: writes since the last flush
        self.native_checkpoints = False
        """Snapshots are the native checkpoint's files (incremental, shared SST files;
        ``state_backends/rocksdb_files.py``), not the memory format's entries."""
        self.key_groups: range | None = None
        """The task's key groups (recorded in a native snapshot: a restore with the same
        range opens the files as they are)."""
        self.uploaded: dict[str, str] = {}
        """SST file name -> its key in the snapshot backend, for the files already there
        (filled by the snapshot thread and by a native restore)."""
        self.crcs: dict[str, int] = {}
        """Backend key -> CRC-32 of the SST files in :attr:`uploaded` (where known)."""
        self.local: Any = None
        """Where the uploaded SST files are kept locally for local recovery (a
        ``state_backends.rocksdb_files.LocalCopies``; None: not kept)."""
        self.views: list[weakref.ref[RocksState]] = []
        """The states opened on this database (a mapping is unhashable: no WeakSet)."""
        self.broken: BaseException | None = None
        """The write error (e.g. a full disk) that left the database refusing writes:
        RocksDB keeps refusing until it is reopened (:meth:`reopen`)."""
        self.sealed: list[Sealed] = []
        """Writes sealed at barriers and not in RocksDB yet (or whose checkpoint is not
        taken yet), oldest first (:meth:`freeze`)."""
        self.lock = threading.Lock()
        """Held by whoever writes sealed writes to RocksDB (the snapshot thread) and by
        :meth:`close`."""
        self.closed = False
        self.stall_ms = 0.0
        """Total time the task thread waited for a barrier's apply (see :class:`Sealed`)."""
        self.db_options: Any = None
        """The options :attr:`db` was opened with (they hold its statistics)."""
        self.key_filter = enabled() if key_filter is None else key_filter
        """Whether each state keeps a key filter its reads ask before RocksDB
        (``jstormpy/state_keys.py``; default: where the filter runs compiled)."""
        self.state_keys: dict[str, StateKeys] = {}
        """State name -> its key filters (none while :attr:`key_filter` is off)."""
        self.key_filter_capacity = key_filter_capacity
        """The keys a state's first filter is sized for (it grows from there)."""

    def figures(self) -> dict[str, float]:
        """RocksDB's own figures of this task's database (any thread; empty while no
        database is open): :data:`ROCKSDB_FIGURES` summed over the states' column
        families, :data:`ROCKSDB_DB_FIGURES`, and the :data:`ROCKSDB_TICKERS` counters
        since the database was opened. About 0.25 ms of CPU; the worker's heartbeat sends
        them with the task's metrics."""
        db, opts, families = self.db, self.db_options, list(self.families.values())
        if db is None or self.closed:
            return {}
        out = dict.fromkeys(ROCKSDB_FIGURES, 0.0)
        try:
            for cf in families:
                for figure, prop in ROCKSDB_FIGURES.items():
                    out[figure] += float(cf.property_int_value(prop) or 0)
            for figure, prop in ROCKSDB_DB_FIGURES.items():
                out[figure] = float(db.property_int_value(prop) or 0)
            stats = parse_statistics((opts.get_statistics() or "") if opts is not None else "")
        except Exception:  # closed or reopened meanwhile (a write error): no figures now
            return {}
        for figure, name in ROCKSDB_TICKERS.items():
            out[figure] = stats.get(name + ".sum" if name in _HISTOGRAM_SUMS else name, 0.0)
        out["key_filter_bytes"] = float(sum(k.nbytes() for k in list(self.state_keys.values())))
        return out

    def _options(self, statistics: bool = False) -> Any:
        """Options for a column family or a frozen copy; ``statistics``: the database's own
        (the ones :meth:`figures` reads: RocksDB keeps statistics per database, so only
        :attr:`db_options` carries them)."""
        return store_options(self.rd, self.block_cache, self.level0_trigger, statistics,
                             None if self.memory is None else self.memory.write_buffers,
                             self.compaction_style,
                             last_level_filters=not self.key_filter)

    def _family(self, name: str) -> Any:
        cf = self.families.get(name)
        if cf is None:
            if self.db is None:
                self.db_options = self._options(statistics=True)
                self.db = self.rd.Rdict(str(self.path), options=self.db_options)
            cf = self.db.create_column_family(f"s:{name}", self._options())
            self.families[name] = cf
            if self.key_filter:
                self.state_keys[name] = StateKeys(name, self._scanner(name),
                                                  initial=self.key_filter_capacity)
        return cf

    def _scanner(self, name: str) -> Callable[[bytes | None], Iterable[bytes]]:
        """What a key filter's fill scans: state ``name``'s stored keys from a key on (the
        handle of the moment: a reopen replaces it), not cached (a scan's blocks would
        push the reads' hot blocks out of the block cache)."""
        def scan(after: bytes | None) -> Iterable[bytes]:
            return self.families[name].keys(  # type: ignore[no-any-return]
                from_key=after, read_opt=self.uncached_reads)
        return scan

    def _batch(self, name: str) -> Any:
        batch = self.rd.WriteBatch(raw_mode=True)
        batch.set_default_column_family(self.db.get_column_family_handle(f"s:{name}"))
        return batch

    def open(self, name: str, ttl_ms: int | None, current: Any) -> MutableMapping[Any, Any]:
        """State ``name`` with ``ttl_ms``; ``current`` (a restored dict) is written into
        the database first."""
        if isinstance(current, RocksState):
            return RocksState(self, name, current.cf, ttl_ms)
        cf = self._family(name)
        if current:
            self._load(name, current)
        return RocksState(self, name, cf, ttl_ms)

    def _load(self, name: str, entries: Mapping[Any, Any]) -> None:
        batch = self._batch(name)
        written: list[bytes] = []
        for key, value in entries.items():
            k = db_key(key, self.max_parallelism)
            written.append(k)
            if value.__class__ is Stamped:
                batch.put(k, encode_stamped(value.written_ms, value.value))
            else:
                batch.put(k, encode(value))
            if len(written) == LOAD_BATCH:
                self._commit(name, batch, written)
                batch, written = self._batch(name), []
        if written:
            self._commit(name, batch, written)

    def _commit(self, name: str, batch: Any, written: list[bytes]) -> None:
        """Write ``batch`` of state ``name``, whose puts are of the keys ``written``: they
        go into the state's key filter first, under its lock (``state_keys``)."""
        keys = self.state_keys.get(name)
        if keys is None:
            self.db.write(batch)
            return
        with keys.lock:
            keys.add_all(written)
            self.db.write(batch)

    def flush(self, name: str | None = None) -> None:
        """Write the write cache of state ``name`` (None: of every state) to RocksDB (the
        cache is kept if that fails, and the database reopened before the next try).
        Waits for the writes sealed at a barrier to be applied first (:meth:`settle`)."""
        self.settle()
        try:
            self._flush(name)
        except Exception as exc:
            self.broken = exc
            raise

    def pending(self) -> bool:
        """Whether a barrier's sealed writes are still being applied (snapshot thread)."""
        return any(not s.done.is_set() for s in self.sealed)

    def cache_full(self, name: str) -> None:
        """State ``name``'s write cache is full (task thread): write it to RocksDB, unless
        a barrier's apply is pending — then it grows, up to :data:`WRITE_CACHE_GROWTH`
        times, before the task waits for the apply (the wait is counted, ``stall_ms``)."""
        if self.pending() and len(self.caches[name]) < WRITE_CACHE_ENTRIES * WRITE_CACHE_GROWTH:
            return
        self.flush(name)

    def settle(self) -> None:
        """Task thread: wait until the snapshot thread is through with every sealed write
        (counted in ``stall_ms``), then write what a failed apply left behind (reopening
        the database after a write error first)."""
        waiting = [s for s in self.sealed if not s.done.is_set()]
        if waiting:
            t0 = time.monotonic()
            for s in waiting:
                s.done.wait()
            waited = (time.monotonic() - t0) * 1000.0
            waiting[-1].stall_ms += waited
            self.stall_ms += waited
        if self.broken is not None:
            self.reopen()
        if self.sealed:
            with self.lock:
                try:
                    self._apply_sealed(None)
                except Exception as exc:
                    self.broken = exc
                    raise

    def _apply_sealed(self, upto: Sealed | None) -> None:
        """Write the sealed writes to RocksDB in order, up to ``upto`` (None: all); each
        is dropped once written (under :attr:`lock`)."""
        for s in list(self.sealed):
            for name, cache in s.writes.items():
                self._write(name, cache)
            s.writes = {}
            if s.done.is_set() or s is not upto:
                self.sealed.remove(s)  # the checkpoint of ``upto`` is still to be taken
            if s is upto:
                return

    def _flush(self, name: str | None) -> None:
        for state in [name] if name is not None else list(self.caches):
            cache = self.caches.get(state)
            if not cache:
                continue
            self._write(state, cache)
            cache.clear()

    def _write(self, state: str, cache: dict[Any, Any]) -> None:
        """Write a cache's entries to state ``state``'s column family, in write batches of
        :data:`WRITE_BATCH_ENTRIES` (rocksdict holds the GIL while it writes one: on the
        snapshot thread a small batch keeps the task thread's wait short). Not atomic:
        a failure part-way leaves the entries in the cache (or sealed), written again
        whole later (puts and deletes are idempotent)."""
        if cache:
            batch = self._batch(state)
            groups = key_groups_of(cache, self.max_parallelism)  # batched: ~4x key_group
            pack = _GROUP.pack
            n = 0
            written: list[bytes] = []  # the keys put (a filter needs no deleted key)
            put = written.append
            for group, (key, value) in zip(groups, cache.items(), strict=True):
                k = pack(group) + encode_key(key)
                if value is _DELETED:
                    batch.delete(k)
                elif value.__class__ is Stamped:
                    batch.put(k, encode_stamped(value.written_ms, value.value))
                    put(k)
                else:
                    batch.put(k, encode(value))
                    put(k)
                n += 1
                if n == WRITE_BATCH_ENTRIES:
                    self._commit(state, batch, written)
                    batch = self._batch(state)
                    n = 0
                    written = []
                    put = written.append
            if n:
                self._commit(state, batch, written)

    def freeze(self) -> FrozenStore:
        """The database as of a barrier (task thread, O(number of states)): the write
        caches are sealed (:class:`Sealed`) and swapped for empty ones. The snapshot thread
        then writes the sealed writes to RocksDB and takes the native checkpoint (memtables
        flushed, SST files hard-linked into a directory beside the database) before it
        reads it (:meth:`FrozenStore.materialise`); until then nothing written after the
        barrier reaches RocksDB. After a write error the database is reopened first (which
        waits for the earlier barriers' applies)."""
        if self.broken is not None:
            self.settle()
        writes = {name: cache for name, cache in self.caches.items() if cache}
        for name in writes:
            self.caches[name] = {}
        for ref in self.views:
            view = ref()
            if view is not None:
                view.cache = self.caches.setdefault(view.name, {})
        sealed = Sealed(writes)
        self.sealed.append(sealed)
        self.frozen_count += 1
        return FrozenStore(self.frozen_dir / str(self.frozen_count), self._options(),
                           self.clock(), self, sealed)

    def apply(self, sealed: Sealed, target: Path | None) -> None:
        """Snapshot thread: write ``sealed`` (and any sealed before it a failure left) to
        RocksDB, then, if ``target`` is given, take the native checkpoint there: the
        memtables are flushed in the background first (the GIL is free meanwhile), so the
        checkpoint itself only links files. On failure (e.g. a full disk) ``sealed`` is
        FAILED, whatever was not written stays sealed for the task thread, and the error
        is raised (the checkpoint is declined)."""
        for earlier in list(self.sealed):
            if earlier is sealed:
                break
            earlier.done.wait()
        with self.lock:
            try:
                if sealed.done.is_set():
                    raise RuntimeError("the barrier's writes were already applied")
                if self.closed or self.db is None:
                    raise RuntimeError("the store was closed")
                if self.broken is not None:
                    raise RuntimeError(f"the database refuses writes since {self.broken}")
                try:
                    self._apply_sealed(sealed)
                except Exception as exc:
                    self.broken = exc
                    raise
                if target is not None:
                    self._checkpoint(target)
                sealed.state = SealState.APPLIED
            except Exception as exc:
                sealed.state = SealState.FAILED
                sealed.error = exc
                raise
            finally:
                sealed.done.set()
                if not sealed.writes and sealed in self.sealed:
                    self.sealed.remove(sealed)

    def _checkpoint(self, target: Path) -> None:
        families = list(self.families.values())
        for cf in families:
            cf.flush(False)
        deadline = time.monotonic() + MEMTABLE_FLUSH_WAIT_S
        while time.monotonic() < deadline and any(
                cf.property_int_value("rocksdb.num-entries-active-mem-table")
                or cf.property_int_value("rocksdb.num-immutable-mem-table")
                for cf in families):
            time.sleep(0.002)
        try:
            self.frozen_dir.mkdir(parents=True, exist_ok=True)
            self.rd.Checkpoint(self.db).create_checkpoint(str(target))
        except Exception as exc:  # e.g. a full disk: leave nothing, reopen before the next
            shutil.rmtree(target, ignore_errors=True)
            self.broken = exc
            raise

    def add_view(self, view: RocksState) -> None:
        """Remember ``view`` (weakly) so :meth:`reopen` can hand it the new handle."""
        self.views = [r for r in self.views if r() is not None]
        self.views.append(weakref.ref(view))

    def reopen(self) -> None:
        """Close and reopen the database after a write error (a full disk): RocksDB
        refuses every write after one until it is reopened. What the failed writes held is
        still in the write caches (a failed flush keeps them) and is written again.

        Raises:
            Exception: the database cannot be opened again yet (the disk is still full).
        """
        opened = list(self.families)
        for keys in self.state_keys.values():  # no fill may scan the closing handle
            keys.stop()
        for cf in self.families.values():
            with contextlib.suppress(Exception):  # it reports the write error again
                cf.close()
        if self.db is not None:
            with contextlib.suppress(Exception):
                self.db.close()
        self.families.clear()
        self.db = None
        names = self.rd.Rdict.list_cf(str(self.path))
        self.db_options = self._options(statistics=True)
        self.db = self.rd.Rdict(str(self.path), options=self.db_options,
                                column_families={n: self._options() for n in names})
        for name in opened:
            self.families[name] = self.db.get_column_family(f"s:{name}")
        for ref in self.views:
            view = ref()
            if view is not None:
                view.cf = self.families[view.name]
        for keys in self.state_keys.values():
            keys.resume()
        self.broken = None
        log.info("reopened the RocksDB at %s after a write error", self.path)

    def open_restored(self, states: Mapping[str, int | None], uploaded: Mapping[str, str],
                      crcs: Mapping[str, int] | None = None) -> dict[str, RocksState]:
        """Open the database a native restore put at :attr:`path` (the files of a
        checkpoint, ``uploaded`` naming where each SST file is in the backend, ``crcs``
        their checksums by key) and return its states (``states``: name -> ttl_ms)."""
        names = self.rd.Rdict.list_cf(str(self.path))
        opts = self.db_options = self._options(statistics=True)
        self.db = self.rd.Rdict(str(self.path), options=opts,
                                column_families={n: self._options() for n in names})
        self.uploaded = dict(uploaded)
        self.crcs = dict(crcs or {})
        out: dict[str, RocksState] = {}
        for name, ttl_ms in states.items():
            cf = self.families[name] = self.db.get_column_family(f"s:{name}")
            if self.key_filter:  # filled from the files in the background, trusted once full
                estimate = cf.property_int_value("rocksdb.estimate-num-keys") or 0
                self.state_keys[name] = StateKeys(name, self._scanner(name),
                                                  restored_keys=int(estimate),
                                                  initial=self.key_filter_capacity)
            out[name] = RocksState(self, name, cf, ttl_ms)
        return out

    def adopt(self, states: dict[str, Any]) -> None:
        """Move restored state dicts into the database (replacing them in ``states``)."""
        for name, current in list(states.items()):
            if isinstance(current, dict):
                states[name] = self.open(name, None, current)

    def close(self) -> None:
        """Close the database (its files stay until the task's next start). The column
        families are closed first: RocksDB's lock is released only when nothing holds it,
        and the stopped component may still hold its states."""
        for s in list(self.sealed):  # a barrier's apply in progress finishes first
            s.done.wait(CLOSE_WAIT_S)
        for keys in self.state_keys.values():  # and a key filter's fill stops
            keys.stop()
        with self.lock:
            self.closed = True
            for cf in self.families.values():
                cf.close()
            self.families.clear()
            self.caches.clear()  # the next start restores from the checkpoint, not here
            self.sealed.clear()
            if self.db is not None:
                self.db.close()
                self.db = None


class FrozenStore:
    """A task database as it was at a barrier (a native checkpoint directory), read on the
    snapshot thread and deleted by :meth:`release`."""

    def __init__(self, path: Path, options: Any, now_ms: float,
                 source: RocksDBStore | None = None, sealed: Sealed | None = None) -> None:
        self.path = path
        self.options = options
        self.now_ms = now_ms
        self.source = source
        """The live store it was taken of (None: a downloaded checkpoint)."""
        self.sealed = sealed
        """The writes sealed at its barrier (None: the directory is there already)."""
        self.db: Any = None
        self.families: dict[str, Any] = {}

    def materialise(self) -> None:
        """Snapshot thread: apply the barrier's sealed writes and take the native
        checkpoint at :attr:`path` (once; raises if that fails: the checkpoint is
        declined)."""
        sealed = self.sealed
        if sealed is None or self.source is None:
            return
        if not sealed.done.is_set():
            with contextlib.suppress(Exception):  # recorded in ``sealed``, raised below
                self.source.apply(sealed, self.path)
        if sealed.state is not SealState.APPLIED:
            raise CheckpointError(f"the native RocksDB checkpoint failed: {sealed.error}")

    def state(self, name: str, ttl_ms: int | None,
              groups: set[int] | None = None) -> FrozenState:
        """State ``name`` as of the barrier (entries expired then left out; only key
        groups ``groups`` if given)."""
        horizon = float("-inf") if ttl_ms is None else self.now_ms - ttl_ms
        return FrozenState(self, name, horizon, groups)

    def family(self, name: str) -> Any:
        """The column family of state ``name`` in the checkpoint (opened read-only)."""
        cf = self.families.get(name)
        if cf is None:
            self.materialise()
            rd = rocksdict_module()
            if self.db is None:
                names = rd.Rdict.list_cf(str(self.path))
                self.db = rd.Rdict(str(self.path), options=self.options,
                                   column_families={n: self.options for n in names},
                                   access_type=rd.AccessType.read_only())
            cf = self.families[name] = self.db.get_column_family(f"s:{name}")
        return cf

    def release(self) -> None:
        """Close the checkpoint and delete its directory (writes sealed at its barrier and
        not applied yet are written to RocksDB, without a checkpoint; not once the store is
        closed: its task is gone, and the next one restores from a checkpoint)."""
        sealed = self.sealed
        if (sealed is not None and self.source is not None and not sealed.done.is_set()
                and not self.source.closed):
            try:
                self.source.apply(sealed, None)
            except Exception as exc:  # the writes stay sealed for the task thread
                log.warning("writing a released barrier's sealed writes failed: %s", exc)
        for cf in self.families.values():
            cf.close()
        self.families.clear()
        if self.db is not None:
            self.db.close()
            self.db = None
        shutil.rmtree(self.path, ignore_errors=True)


class FrozenState:
    """One named state of a :class:`FrozenStore`: iterating it yields what
    :class:`RocksState` pickles as (the checkpoint's dict format)."""

    def __init__(self, frozen: FrozenStore, name: str, horizon: float,
                 groups: set[int] | None = None) -> None:
        self.frozen = frozen
        self.name = name
        self.horizon = horizon
        self.groups = groups

    def items(self) -> Iterator[tuple[Any, Any]]:
        horizon = self.horizon
        groups = self.groups
        for k, v in self.frozen.family(self.name).items():
            if groups is not None and _GROUP.unpack_from(k)[0] not in groups:
                continue
            entry = decode_entry(v)
            if entry.__class__ is Stamped and entry.written_ms <= horizon:
                continue
            yield decode(k[2:]), entry

    def __len__(self) -> int:
        return sum(1 for _ in self.items())


def open_store(kind: str, path: str | os.PathLike[str] | None, max_parallelism: int,
               factory: Callable[[], dict[Any, Any]] = dict,
               clock: Clock = wall_ms, level0_trigger: int | None = None,
               memory: RocksDBMemory | None = None,
               compaction_style: str | None = None) -> MemoryStore | RocksDBStore:
    """The store ``Config.state_store`` names, for one task (``path``: its directory;
    ``memory``: the worker's RocksDB memory, shared by its task databases)."""
    if kind == "memory":
        return MemoryStore(factory, clock)
    if kind == "rocksdb":
        if path is None:
            raise ConfigError("state_store='rocksdb' needs a directory for the database")
        return RocksDBStore(path, max_parallelism, clock, level0_trigger, memory,
                            compaction_style)
    raise ConfigError(f"state_store must be one of {STATE_STORES}, got {kind!r}")
