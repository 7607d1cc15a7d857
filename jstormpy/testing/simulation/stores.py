"""The counter's state on a real state store, opened, snapshotted and restored as the
engine does it (the ``state_ttl`` and ``rocksdb_ttl`` faults).

With ``state_ttl`` alone the state is the memory store's ``TtlState``. With
``rocksdb_ttl`` the counter's two states (``counts``, no TTL, and ``streak``, with it) are
``RocksState`` column families of a real ``RocksDBStore``: one database per simulated
task incarnation, in a temporary directory of the seed (under ``/dev/shm`` where there is
one), deleted when the seed ends; the store's clock is the simulated one. The paths are
the engine's:

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
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jstormpy.runtime.snapshots import SnapshotView, capture, release, serialise
from jstormpy.state_store import Clock, MemoryStore, RocksDBStore, RocksState

SCRATCH = "/dev/shm"
"""Where the seed's databases go if it exists (RAM: RocksDB's syncs cost nothing)."""


@dataclass(frozen=True)
class Frozen:
    """RocksDB states frozen at a barrier, read when the snapshot's upload runs."""

    names: frozenset[str]
    view: SnapshotView

    def read(self) -> dict[str, Any]:
        """What the snapshot stores of them (name -> entries); releases the checkpoint."""
        try:
            stored: dict[str, Any] = pickle.loads(serialise(self.view))["states"]
            return stored
        finally:
            release(self.view)


class CounterStores:
    """The state stores of one seed's counter tasks (both runs of a lifecycle fault).

    ``rocksdb``: the counts and the TTL state on the real RocksDB store; else the TTL
    state on the memory store (the counts stay a plain dict). :meth:`close` (at the
    end of the seed) closes every database and deletes the directory."""

    def __init__(self, rocksdb: bool, clock: Clock, max_parallelism: int) -> None:
        self.rocksdb = rocksdb
        self.clock = clock
        self.max_parallelism = max_parallelism
        self.root: Path | None = None
        self.opened: list[RocksDBStore] = []
        self.frozen: list[SnapshotView] = []

    def open_counter(self, restored: dict[str, Any], ttl_ms: int
                     ) -> dict[str, MutableMapping[Any, Any]]:
        """A counter task incarnation's states on the seed's store, holding ``restored``
        (name -> the entries its snapshot stored; the TTL state's are
        :class:`~jstormpy.state_store.Stamped`): ``streak`` with ``ttl_ms``, and on
        RocksDB ``counts`` too."""
        if not self.rocksdb:
            store = MemoryStore(clock=self.clock)
            return {"streak": store.open("streak", ttl_ms, restored.get("streak", {}))}
        if self.root is None:
            scratch = SCRATCH if os.path.isdir(SCRATCH) and os.access(SCRATCH, os.W_OK) \
                else None
            self.root = Path(tempfile.mkdtemp(prefix=f"jstorm-simulate-{os.getpid()}-",
                                              dir=scratch))
        rocks = RocksDBStore(self.root / f"db-{len(self.opened)}", self.max_parallelism,
                             clock=self.clock)
        self.opened.append(rocks)
        states: dict[str, Any] = {n: dict(restored[n]) for n in ("counts", "streak")
                                  if n in restored}
        rocks.adopt(states)  # runtime/worker.py: restored dicts into the fresh database
        return {n: rocks.open(n, ttl, states.get(n))  # Component.state
                for n, ttl in (("counts", None), ("streak", ttl_ms))}

    def snapshot(self, states: dict[str, Any]) -> Frozen | None:
        """At the barrier: freeze the RocksDB states of ``states`` (None: there are none)."""
        rocks = {n: s for n, s in states.items() if isinstance(s, RocksState)}
        if not rocks:
            return None
        view = capture({"states": rocks})
        if view.frozen is not None:
            # the Snapshotter thread's first step (the barrier's sealed writes into the
            # database, then the native checkpoint), done now: this process has no thread
            # to do it, and the task thread's next flush would wait for it. What the task
            # writes after the barrier stays in its write caches until then either way, so
            # the checkpoint is the same cut; the upload still reads it later
            view.frozen.materialise()
        self.frozen.append(view)
        return Frozen(frozenset(rocks), view)

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
