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

Half the seeds (``native``, drawn by a generator of their own) run the store's default
checkpoint instead, the incremental one: the upload sends the checkpoint's new SST files
to the seed's state backend (a real ``MemoryBackend``; ``upload_native``) and the
snapshot stores a :class:`NativeState` per state; a restore downloads the files into the
fresh database and opens it (``download_checkpoint``, ``RocksDBStore.open_restored``),
and what reads a snapshot whole (a rescale, a savepoint, the final check) reads the
entries out of the files (``materialise``), as the engine does.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jstormpy.runtime.snapshots import (
    SnapshotView,
    capture,
    release,
    serialise,
    upload_native,
)
from jstormpy.state_backends.memory import MemoryBackend
from jstormpy.state_backends.rocksdb_files import download_checkpoint, materialise
from jstormpy.state_store import Clock, MemoryStore, RocksDBStore, RocksState

KEY_FILTER_CAPACITY = 4
"""The keys a state's first key filter is sized for (``jstormpy/state_keys.py``): the
counter's few keys grow it, so its fills run here too. The filter is on even where it
runs as source (the pure-Python pass), which the engine leaves it off in."""

SCRATCH = "/dev/shm"
"""Where the seed's databases go if it exists (RAM: RocksDB's syncs cost nothing)."""


@dataclass(frozen=True)
class NativeState:
    """A RocksDB state in a snapshot taken with the store's default (incremental)
    checkpoint: the native checkpoint's ``"rocksdb"`` entry (its SST files' keys in
    ``backend``, the small files inline), the same for every state of the task."""

    entry: dict[str, Any]
    backend: MemoryBackend = field(compare=False, repr=False)

    def read(self) -> dict[str, dict[Any, Any]]:
        """Every state's entries, read out of the checkpoint's files."""
        return materialise(self.backend, self.entry, None, "a simulated snapshot")


def materialised(states: dict[str, Any]) -> dict[str, Any]:
    """``states`` with every :class:`NativeState` read into its entries (each native
    checkpoint read once, however many states it holds)."""
    read: dict[int, dict[str, dict[Any, Any]]] = {}
    out: dict[str, Any] = {}
    for name, value in states.items():
        if not isinstance(value, NativeState):
            out[name] = value
            continue
        if id(value) not in read:
            read[id(value)] = value.read()
        out[name] = read[id(value)][name]
    return out


@dataclass(frozen=True)
class Frozen:
    """RocksDB states frozen at a barrier, read when the snapshot's upload runs."""

    names: frozenset[str]
    view: SnapshotView
    backend: MemoryBackend | None = None
    """The seed's backend for the native checkpoint's SST files (None: the full dump)."""
    attempt: str = ""
    """The task incarnation (the SST keys' fencing token, as a worker's incarnation)."""

    @property
    def native(self) -> bool:
        return bool(self.view.native)

    def read(self, task_id: int, checkpoint_id: int, generation: int) -> dict[str, Any]:
        """What the snapshot stores of them (name -> entries, or a :class:`NativeState`
        each); releases the checkpoint."""
        try:
            if self.view.native:
                assert self.backend is not None
                upload_native(self.view, self.backend, task_id=task_id,
                              checkpoint_id=checkpoint_id, generation=generation,
                              attempt=self.attempt)
                ref = NativeState((self.view.extra or {})["rocksdb"], self.backend)
                return {name: ref for name in self.view.native}
            stored: dict[str, Any] = pickle.loads(serialise(self.view))["states"]
            return stored
        finally:
            release(self.view)


class CounterStores:
    """The state stores of one seed's counter tasks (both runs of a lifecycle fault).

    ``rocksdb``: the counts and the TTL state on the real RocksDB store; else the TTL
    state on the memory store (the counts stay a plain dict). :meth:`close` (at the
    end of the seed) closes every database and deletes the directory."""

    def __init__(self, rocksdb: bool, clock: Clock, max_parallelism: int,
                 native: bool = False) -> None:
        self.rocksdb = rocksdb
        self.native = rocksdb and native
        """The store's default checkpoint (incremental, native SST files) if set, else
        ``incremental_checkpoints=False``'s full dump."""
        self.backend = MemoryBackend("memory://simulated-sst") if self.native else None
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
                             clock=self.clock, key_filter=True,
                             key_filter_capacity=KEY_FILTER_CAPACITY)
        self.opened.append(rocks)
        rocks.native_checkpoints = self.native
        rocks.key_groups = range(self.max_parallelism)
        native = next((v for v in restored.values() if isinstance(v, NativeState)), None)
        states: dict[str, Any]
        if native is not None:  # runtime/worker.py: the checkpoint's files, opened
            got = download_checkpoint(native.backend, native.entry, rocks.path,
                                      "the restored snapshot")
            states = dict(rocks.open_restored(native.entry["states"], got.files,
                                              native.entry.get("crc32")))
        else:
            states = {n: dict(restored[n]) for n in ("counts", "streak") if n in restored}
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
        store = next(iter(rocks.values())).store
        return Frozen(frozenset(rocks), view, self.backend,
                      str(self.opened.index(store)) if store in self.opened else "")

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
