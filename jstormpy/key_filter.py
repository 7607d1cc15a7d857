# cython: annotation_typing=True, boundscheck=False, wraparound=False, cdivision=True
"""A blocked Bloom filter of byte strings: the key filter of a RocksDB state.

A read-modify-write of a key a state never held costs a RocksDB point read that finds
nothing, and at millions of keys that read is a chain of cache misses (level-0 files, the
levels' filters and indexes): ~2-12 µs. The filter answers "never written" from memory in
one cache line (~0.15 µs): all of a key's bits sit in one 64-byte block (as RocksDB's own
filters do), chosen by the key's hash, so a probe touches one cache line whatever the
filter's size. It never answers "never written" for a key it was given (no false
negatives); it answers "maybe" for about 0.1-2 % of the keys it was not given, which
then read RocksDB. ``jstormpy/state_keys.py`` decides which filter a state's reads trust,
grows it and fills it after a restore.

Compiled by ``setup.py`` (Cython 3, pure-Python mode: the annotations are C types, the
module's first line turns them on); as source (``JSTORM_PURE_PYTHON=1``, or no compiler)
it gives the same answers with the same arithmetic, masked to 64 and 32 bits, only more
slowly, so the store does not use it there by default (``state_keys.enabled``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

try:
    import cython
except ImportError:  # Cython builds the extension; running the source needs none of it
    from jstormpy.pure_mode import cython  # type: ignore[assignment]

COMPILED: bool = bool(cython.compiled)
"""Whether this module runs compiled (the store keeps filters by default only then)."""

BITS_PER_KEY = 10
"""Filter bits a key at the filter's capacity (a state grows it 4x when full, so 10-40):
about 1 % false "maybe" at capacity, far fewer below it."""
PROBES = 8
"""Bits set per key, all in the key's block."""
_PROBES = cython.declare(cython.int, PROBES)
_BLOCK_WORDS = cython.declare(cython.ulonglong, 8)  # 64-bit words in a 64-byte block
_M64 = cython.declare(cython.ulonglong, 0xFFFFFFFFFFFFFFFF)
_M32 = cython.declare(cython.ulonglong, 0xFFFFFFFF)
_MIX1 = cython.declare(cython.ulonglong, 0xFF51AFD7ED558CCD)  # MurmurHash3's fmix64
_MIX2 = cython.declare(cython.ulonglong, 0xC4CEB9FE1A85EC53)
_STEP = cython.declare(cython.ulonglong, 0x9E3779B9)  # the next probe's bits (Fibonacci)


@cython.cfunc
@cython.inline
def _mix(key: object) -> cython.ulonglong:
    """The key's hash, mixed (MurmurHash3's 64-bit finaliser) so every bit depends on all
    of it."""
    h: cython.ulonglong = hash(key) & _M64
    h ^= h >> 33
    h = (h * _MIX1) & _M64
    h ^= h >> 33
    h = (h * _MIX2) & _M64
    h ^= h >> 33
    return h


@cython.cfunc
@cython.inline
def _block(h: cython.ulonglong, nblocks: cython.ulonglong) -> cython.ulonglong:
    """The first word of the block of a key whose mixed hash is ``h`` (its high 32 bits
    pick the block; the low 32 bits, :data:`_M32`, pick the bits in it)."""
    return (((h >> 32) * nblocks) >> 32) * _BLOCK_WORDS


@cython.cclass
class KeyFilter:
    """Byte strings added (``add``) and asked after (``key in filter``): no false
    negatives, sized for ``capacity`` keys (:data:`BITS_PER_KEY` each) and still correct
    past it, only less selective. Adds must not run on two threads at once (as source an add
    is several bytecodes; ``state_keys`` serialises them with its lock); a probe may run
    beside an add."""

    words: cython.ulonglong[::1]
    nblocks: cython.ulonglong
    added: cython.Py_ssize_t
    sized_for: cython.Py_ssize_t
    store: object

    def __init__(self, capacity: cython.Py_ssize_t) -> None:
        if capacity < 1:
            raise ValueError(f"a key filter's capacity must be positive, not {capacity}")
        self.nblocks = (capacity * BITS_PER_KEY + 511) // 512
        self.store = array("Q", [0]) * (self.nblocks * 8)
        self.words = self.store
        self.added = 0
        self.sized_for = capacity

    @cython.ccall
    def add(self, key: object) -> cython.bint:
        """Add ``key``; whether it was new to the filter (some bit was not set yet: counted
        in :attr:`count`, the keys the filter holds, short by its false "maybe"s)."""
        h: cython.ulonglong = _mix(key)
        base: cython.ulonglong = _block(h, self.nblocks)
        h2: cython.ulonglong = h & _M32
        new: cython.bint = False
        _i: cython.int
        pos: cython.ulonglong
        bit: cython.ulonglong
        for _i in range(_PROBES):
            pos = h2 >> 23  # 9 bits: one of the block's 512
            bit = cython.cast(cython.ulonglong, 1) << (pos & 63)
            if not self.words[base + (pos >> 6)] & bit:
                self.words[base + (pos >> 6)] |= bit
                new = True
            h2 = (h2 * _STEP) & _M32
        if new:
            self.added += 1
        return new

    def add_all(self, keys: Iterable[object]) -> None:
        """Add every key of ``keys``."""
        for key in keys:
            self.add(key)

    def __contains__(self, key: object) -> bool:
        h: cython.ulonglong = _mix(key)
        base: cython.ulonglong = _block(h, self.nblocks)
        h2: cython.ulonglong = h & _M32
        _i: cython.int
        pos: cython.ulonglong
        for _i in range(_PROBES):
            pos = h2 >> 23
            if not (self.words[base + (pos >> 6)] >> (pos & 63)) & 1:
                return False
            h2 = (h2 * _STEP) & _M32
        return True

    @property
    def count(self) -> int:
        """Keys added that were new to the filter."""
        return self.added

    @property
    def capacity(self) -> int:
        """The keys it was sized for."""
        return self.sized_for

    @property
    def full(self) -> bool:
        """Whether it holds more keys than it was sized for (time to grow it)."""
        return self.added > self.sized_for

    @property
    def nbytes(self) -> int:
        """Its memory (the bit array)."""
        return int(self.nblocks) * 64
