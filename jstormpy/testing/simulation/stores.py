"""The counter's TTL state on a real state store, opened, snapshotted and restored as the
engine does it (the ``state_ttl`` and ``rocksdb_ttl`` faults).

With ``state_ttl`` alone the state is the memory store's ``TtlState``. With
``rocksdb_ttl`` it is a ``RocksState`` of a real ``RocksDBStore``: one database per
simulated task incarnation, in a temporary directory of the seed (under ``/dev/shm`` where
there is one), deleted when the seed ends; the store's clock is the simulated one. The
paths are the engine's:

* a restore moves the restored entries into a fresh database as ``runtime/worker.py``
  does (``RocksDBStore.adopt``), then opens the state with its TTL as ``Component.state``
  does (``RocksDBStore.open`` over the adopted state);
* a snapshot takes a native RocksDB checkpoint at the barrier and reads it when the upload
  runs, as the executor's ``Snapshotter`` does (``runtime/snapshots.py`` ``capture``,
  ``serialise``, ``release``: ``FrozenStore.state(name, ttl_ms)`` leaves out the entries
  expired at the barrier, and the task goes on writing meanwhile).
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from jstormpy.runtime.snapshots import SnapshotView, capture, release, serialise
from jstormpy.state_store import Clock, MemoryStore, RocksDBStore, RocksState

SCRATCH = "/dev/shm"
"""Where the seed's databases go if it exists (RAM: RocksDB's syncs cost nothing)."""


class TtlStores:
    """The TTL states of one seed's counter tasks (both runs of a lifecycle fault).

    ``rocksdb``: on the real RocksDB store, else on the memory store. :meth:`close` (at the
    end of the seed) closes every database and deletes the directory."""

    def __init__(self, rocksdb: bool, clock: Clock, max_parallelism: int) -> None:
        self.rocksdb = rocksdb
        self.clock = clock
        self.max_parallelism = max_parallelism
        self.root: Path | None = None
        self.opened: list[RocksDBStore] = []
        self.frozen: list[SnapshotView] = []

    def open(self, name: str, ttl_ms: int, restored: dict[Any, Any] | None
             ) -> MutableMapping[Any, Any]:
        """A task incarnation's state ``name`` with ``ttl_ms``, holding ``restored`` (the
        entries its snapshot stored: :class:`~jstormpy.state_store.Stamped` ones)."""
        if not self.rocksdb:
            return MemoryStore(clock=self.clock).open(name, ttl_ms, restored or {})
        if self.root is None:
            scratch = SCRATCH if os.path.isdir(SCRATCH) and os.access(SCRATCH, os.W_OK) \
                else None
            self.root = Path(tempfile.mkdtemp(prefix="jstorm-simulate-", dir=scratch))
        store = RocksDBStore(self.root / f"db-{len(self.opened)}", self.max_parallelism,
                             clock=self.clock)
        self.opened.append(store)
        states: dict[str, Any] = {} if restored is None else {name: dict(restored)}
        store.adopt(states)  # runtime/worker.py: restored dicts into the fresh database
        return store.open(name, ttl_ms, states.get(name))  # Component.state

    def snapshot(self, states: dict[str, Any]) -> Callable[[], dict[str, Any]] | None:
        """At the barrier: freeze the RocksDB states of ``states`` (None: there are none).
        The function returned, called when the upload runs, gives what the snapshot
        stores of them (name -> entries) and releases the frozen checkpoint."""
        rocks = {n: s for n, s in states.items() if isinstance(s, RocksState)}
        if not rocks:
            return None
        view = capture({"states": rocks})
        self.frozen.append(view)

        def read() -> dict[str, Any]:
            try:
                stored: dict[str, Any] = pickle.loads(serialise(view))["states"]
                return stored
            finally:
                release(view)
        return read

    @staticmethod
    def stop(state: Any) -> None:
        """A task incarnation is gone: close its database (a pending upload reads its own
        frozen checkpoint, not the database)."""
        if isinstance(state, RocksState):
            state.store.close()

    def close(self) -> None:
        """The seed ended: close every database and frozen checkpoint, delete the files."""
        for view in self.frozen:
            release(view)  # those whose upload never ran (a crashed worker's)
        self.frozen = []
        for store in self.opened:
            store.close()
        self.opened = []
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
