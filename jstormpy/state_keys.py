"""The keys a RocksDB state may hold: the key filter its reads trust, grown and filled.

A state's reads ask :attr:`StateKeys.trusted` (a :class:`~jstormpy.key_filter.KeyFilter`
of the stored keys' bytes) before RocksDB: a key it has never seen was never written, and
the read returns "missing" without a RocksDB point read (the read-modify-write of a new
key, half of a counting job's reads). The one rule everything here keeps: **every key
RocksDB holds in the state is in the trusted filter**; while no filter can promise that
(a restore's fill is running), ``trusted`` is None and reads go to RocksDB.

How keys get in:

* every write to RocksDB adds its keys first, under :attr:`StateKeys.lock`
  (``RocksDBStore._write`` and ``_load``: a write cache, a barrier's sealed writes, a
  restore's entries); deletes need nothing (a filter may hold more than RocksDB);
* a full filter grows: a new one, :data:`GROWTH` times bigger, takes every add from then
  on (under the lock, so every write whose keys it did not get is in RocksDB by then)
  while a background thread fills it with a scan of RocksDB, and replaces the full one
  when the scan is through; meanwhile the full one is still trusted (it only answers
  "maybe" more often). A key the scan misses was written after it passed, so it was
  added;
* a state opened on a restored database's files (a native restore) starts with no
  trusted filter and a fill of that kind, sized from RocksDB's estimate of its keys.

A fill stops (:meth:`StateKeys.stop`) before its database is closed or reopened, and a
failed fill leaves the trusted filter as it was (None after a restore: reads stay on
RocksDB). The filter lives in memory only, never in a checkpoint.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import islice

from jstormpy import key_filter
from jstormpy.key_filter import KeyFilter

log = logging.getLogger("jstormpy.state_store")

INITIAL_CAPACITY = 16_384
"""Keys a new state's filter is sized for (20 KB)."""
GROWTH = 4
"""How much bigger a full filter's successor is (a state of 10M keys has scanned about a
third of them once on the way: 16k, 64k, ..., 4M)."""
FILL_CHUNK = 4096
"""Keys a fill reads with one RocksDB iterator (~1.3 ms of a scan), then adds under the
state's lock (a writer's adds wait at most one chunk's, ~0.3 ms): two threads never add
to one filter at once, which as source could lose a bit."""
FILL_JOIN_S = 30.0
"""How long :meth:`StateKeys.stop` waits for a fill to notice it should stop (it asks
every :data:`FILL_CHUNK` keys)."""

ENV = "JSTORM_KEY_FILTER"
"""``0``: no key filter (every read goes to RocksDB); ``1``: a filter even where it runs
as pure Python (slower than the read it saves: for tests); unset: where it is compiled."""


def enabled() -> bool:
    """Whether RocksDB states keep a key filter (:data:`ENV`)."""
    asked = os.environ.get(ENV)
    if asked in ("0", "1"):
        return asked == "1"
    return key_filter.COMPILED


def capacity_for(keys: int, initial: int = INITIAL_CAPACITY) -> int:
    """The capacity of a filter that will hold ``keys`` keys (one of the growth steps from
    ``initial``, at least twice ``keys``)."""
    capacity = initial
    while capacity < 2 * keys:
        capacity *= GROWTH
    return capacity


class StateKeys:
    """The key filters of one state of one task's RocksDB (see the module's docstring).

    ``scan(after)``: an iterator over the state's stored keys (bytes) in order, from
    ``after`` (None: the first) on; ``name``: for the log;
    ``restored_keys``: the state was restored with about this many keys (RocksDB's
    estimate): no filter is trusted until a fill has scanned them; ``initial``: the first
    filter's capacity."""

    def __init__(self, name: str, scan: Callable[[bytes | None], Iterable[bytes]], *,
                 restored_keys: int | None = None, initial: int = INITIAL_CAPACITY) -> None:
        self.name = name
        self.scan = scan
        self.lock = threading.Lock()
        """Held while keys are added and their write goes to RocksDB, and while a fill
        opens its scan or installs its filter."""
        self.trusted: KeyFilter | None = None
        """The filter reads trust: every key RocksDB holds is in it (None: read RocksDB)."""
        self.filling: KeyFilter | None = None
        """The filter a background scan is filling (every add goes to it too)."""
        self.thread: threading.Thread | None = None
        self.stopping = False
        self.fills = 0
        """Fills completed (growths and restores)."""
        self.wanted = initial
        """The capacity of the last fill started."""
        self.retry_after = 0
        """After a failed growth, the next waits until the trusted filter holds more keys
        than this (twice what it held then)."""
        if restored_keys is None:
            self.trusted = KeyFilter(initial)
        else:
            with self.lock:
                self._start_fill(capacity_for(restored_keys, initial))

    def add_all(self, keys: Iterable[bytes]) -> None:
        """Add keys about to be written to RocksDB (the caller holds :attr:`lock` until
        the write is done); starts a growth when the trusted filter is full."""
        trusted, filling = self.trusted, self.filling
        if trusted is not None:
            trusted.add_all(keys)
            if (filling is None and trusted.full and not self.stopping
                    and trusted.count > self.retry_after):
                self._start_fill(trusted.capacity * GROWTH)
                filling = self.filling
        if filling is not None:
            filling.add_all(keys)

    def _start_fill(self, capacity: int) -> None:
        """Under :attr:`lock`: a new filter takes every add from now on, and a thread fills
        it from RocksDB (every write it did not get is there once this lock is released)."""
        self.wanted = capacity
        building = self.filling = KeyFilter(capacity)
        self.thread = threading.Thread(target=self._fill, args=(building,), daemon=True,
                                       name=f"key-filter-{self.name}")
        self.thread.start()

    def _fill(self, building: KeyFilter) -> None:
        try:
            after: bytes | None = None
            while True:
                # an iterator per chunk (one held open through a whole scan would keep
                # RocksDB from freeing the memtables and files it pinned); each opened
                # after ``building`` took over the adds, so it sees every write whose
                # keys it did not get, and a key it misses was written (and added) later
                keys: Iterator[bytes] = iter(self.scan(after))
                chunk = list(islice(keys, FILL_CHUNK + 1))
                del keys
                if self.stopping or self.filling is not building:
                    return
                if chunk and chunk[0] == after:  # the scan starts at the last one read
                    del chunk[0]
                if not chunk:
                    break
                with self.lock:  # as a writer's adds are: one thread adds at a time
                    building.add_all(chunk)
                after = chunk[-1]
            with self.lock:
                if self.filling is building and not self.stopping:
                    self.trusted, self.filling = building, None
                    self.fills += 1
        except Exception:  # a closed or broken database: the trusted filter stays
            log.warning("the key filter of state %r could not be filled; its reads go to "
                        "RocksDB meanwhile", self.name, exc_info=True)
            with self.lock:
                if self.filling is building:
                    self.filling = None
                    self.retry_after = 2 * (self.trusted.count if self.trusted else 0)

    def stop(self) -> None:
        """Stop a running fill and wait for it (before the database closes or reopens);
        the trusted filter stays. :meth:`resume` lets fills start again."""
        self.stopping = True
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(FILL_JOIN_S)
            if thread.is_alive():
                log.warning("the key filter fill of state %r did not stop within %.0f s",
                            self.name, FILL_JOIN_S)
        with self.lock:
            self.filling = None

    def resume(self) -> None:
        """After a reopen (``scan`` reads the new handle): fills may start again, and one
        starts now if the trusted filter is full or missing."""
        with self.lock:
            self.stopping = False
            self.retry_after = 0
            trusted = self.trusted
            if trusted is None:
                self._start_fill(self.wanted)
            elif trusted.full:
                self._start_fill(trusted.capacity * GROWTH)

    def wait_filled(self, timeout: float) -> bool:
        """Wait for a running fill (tests, benchmarks); whether none is running now."""
        thread = self.thread
        if thread is not None:
            thread.join(timeout)
        return self.filling is None

    def nbytes(self) -> int:
        """The memory of its filters."""
        return sum(f.nbytes for f in (self.trusted, self.filling) if f is not None)
