"""Simulated checkpoint storage with the semantics of the state backends.

Like ``state_backends/``: task snapshots are written under ``(checkpoint, task,
generation)``; a checkpoint is complete once its metadata (the commit point) is written,
atomically; the listing names the completed checkpoints; ``meta/`` holds the generation
counter and the completed floor. Every call completes later, as an event, and may fail
with the faults of the seed's plan. A completion whose caller died meanwhile (a crashed
worker or TM) still changes storage, but nobody hears of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jstormpy.api.errors import (
    BackendError,
    CorruptSnapshotError,
    ObjectExistsError,
    SnapshotNotFoundError,
)
from jstormpy.state_backends.base import seal_blob
from jstormpy.state_backends.shared_files import encode_refs, refs_key
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.judging import Step
from jstormpy.testing.simulation.stores import materialised
from jstormpy.testing.simulation.world import World

Done = Callable[[Any, BaseException | None], None]
"""A storage completion: ``(result, error)``."""


class SimStorage:
    """Checkpoints, snapshots and ``meta/`` entries of one job, in memory."""

    def __init__(self, world: World, plan: FaultPlan) -> None:
        self.world = world
        self.plan = plan
        self.snapshots: dict[tuple[int, int, int], Any] = {}
        self.metadata: dict[int, dict[str, Any]] = {}
        self.meta: dict[str, Any] = {}
        self.partial: set[tuple[int, int, int]] = set()
        self.tm_queue: list[Any] = []  # the TM's calls run one at a time (BackendIO)
        self.tm_busy = False
        self.landed: set[int] = set()
        """Every checkpoint whose metadata ever landed (retention does not forget it)."""
        self.objects: dict[str, Any] = {}
        """Shared files (``inc/task-N/seg-...``) and the sealed ``.refs`` beside snapshots."""
        self.lost: set[str] = set()
        """Shared files the ``shared_file_loss`` fault removed (not retention)."""

    # -- the calls ---------------------------------------------------------------------------
    def put_snapshot(self, key: tuple[int, int, int], data: Any, alive: Callable[[], bool],
                     done: Done, new_files: dict[str, Any] | None = None) -> None:
        """``new_files``: shared files the snapshot needs that are not stored yet; they are
        uploaded first (a failed snapshot write leaves them behind, as orphans), and the
        snapshot's ``.refs`` lists every file in ``data["files"]``."""
        def apply() -> tuple[Any, BaseException | None]:
            if new_files:
                if self._disk_full():
                    return None, BackendError(f"write of a shared file of {key} failed "
                                              "(ENOSPC)")
                self.objects.update(new_files)
            if self._disk_full() or self.plan.hit(self.world, Fault.WRITE_ERROR):
                return None, BackendError(f"write of snapshot {key} failed (EIO)")
            if self.plan.hit(self.world, Fault.PARTIAL_WRITE):
                self.partial.add(key)
                return None, BackendError(f"write of snapshot {key} failed half-way")
            handle = f"chk-{key[0]}/task-{key[1]}-g{key[2]}"
            if "files" in data:  # before the snapshot, as StateBackend.put_snapshot
                self.objects[refs_key(handle)] = seal_blob(encode_refs(data["files"]))
            self.snapshots[key] = data
            self.partial.discard(key)
            return handle, None
        self._call("put_snapshot", apply, alive, done)

    def read_shared(self, keys: list[str], alive: Callable[[], bool], done: Done) -> None:
        """Read the shared files ``keys`` (in order); a missing one is corrupt state, named."""
        def apply() -> tuple[Any, BaseException | None]:
            if self.plan.hit(self.world, Fault.READ_ERROR):
                return None, BackendError(f"read of {keys[0]} failed (EIO)")
            missing = [k for k in keys if k not in self.objects]
            if missing:
                return None, CorruptSnapshotError(f"shared file {missing[0]} is missing")
            return [self.objects[k] for k in keys], None
        self._call("read_shared", apply, alive, done)

    def materialize(self, snapshot: Any) -> Any:
        """A snapshot with its shared files (and a native RocksDB checkpoint's SST files)
        read back into ``states`` (what a rescale, a savepoint and the final check read,
        whole); None if a shared file is missing."""
        if not snapshot:
            return snapshot
        states = materialised(snapshot.get("states") or {})  # native RocksDB: read out
        if "files" not in snapshot:
            return {**snapshot, "states": states} if "states" in snapshot else snapshot
        if any(k not in self.objects for k in snapshot["files"]):
            return None
        out = {k: v for k, v in snapshot.items() if k != "files"}
        out["states"] = {**states, **merge_files([self.objects[k] for k in snapshot["files"]])}
        return out

    def read_snapshot(self, handle: str, alive: Callable[[], bool], done: Done) -> None:
        def apply() -> tuple[Any, BaseException | None]:
            if self.plan.hit(self.world, Fault.READ_ERROR):
                return None, BackendError(f"read of {handle} failed (EIO)")
            key = _key_of(handle)
            if key in self.partial:
                return None, CorruptSnapshotError(f"snapshot {handle} is truncated")
            if key not in self.snapshots:
                return None, SnapshotNotFoundError(f"snapshot {handle} does not exist")
            return self.snapshots[key], None
        self._call("read_snapshot", apply, alive, done)

    def put_metadata(self, checkpoint_id: int, metadata: dict[str, Any],
                     alive: Callable[[], bool], done: Done, late: float | None = None) -> None:
        """The commit point, create-only (``StateBackend.create_metadata``): a write that
        finds one under its id fails and replaces nothing. ``late``: the write of a
        deposed TM, which lands after that many ms, outside the TM's call queue (the
        queue is the new TM's now), and is answered to nobody."""
        def create() -> BaseException | None:
            if checkpoint_id in self.metadata:
                return ObjectExistsError(f"chk-{checkpoint_id}/_metadata exists")
            self.metadata[checkpoint_id] = metadata
            self.landed.add(checkpoint_id)
            return None

        def land() -> None:
            create()  # nobody hears the outcome

        def land_deposed() -> None:
            self.world.reach(Step.LATE_COMMIT_POINT)
            create()

        if late is not None:
            self.world.at(late, land_deposed,
                          f"storage: deposed TM's metadata of checkpoint {checkpoint_id} lands")
            return

        def apply() -> tuple[Any, BaseException | None]:
            if self._disk_full() or self.plan.hit(self.world, Fault.METADATA_WRITE_ERROR):
                return None, BackendError(f"write of chk-{checkpoint_id}/_metadata failed")
            if self.plan.hit(self.world, Fault.METADATA_TIMEOUT):
                # the write lands after the caller gave up on it
                self.world.at(self.world.latency(50, 400), land,
                              f"storage: late metadata of checkpoint {checkpoint_id} lands")
                return None, TimeoutError(f"chk-{checkpoint_id}/_metadata: no answer")
            return None, create()
        self._call("put_metadata", apply, alive, done, serial=True)

    def list_completed(self, alive: Callable[[], bool], done: Done) -> None:
        """Answers ``(completed, present)``: the checkpoints with metadata, and every one
        with any object (``StateBackend.list_completed`` and ``list_checkpoint_ids``)."""
        def apply() -> tuple[Any, BaseException | None]:
            if self.plan.hit(self.world, Fault.LISTING_ERROR):
                return None, BackendError("listing of checkpoints failed (EMFILE)")
            ids = sorted(self.metadata)
            present = sorted(set(ids) | {k[0] for k in self.snapshots}
                             | {k[0] for k in self.partial})
            if ids and self.plan.hit(self.world, Fault.LISTING_SHORT):
                ids = ids[:self.world.rng.randrange(len(ids))]
                # the store lags: it misses the newest checkpoints, complete or not
                cut = sorted(self.metadata)[len(ids)]
                present = [c for c in present if c < cut]
            return (ids, present), None
        self._call("list_completed", apply, alive, done, serial=True)

    def read_metadata(self, checkpoint_id: int, alive: Callable[[], bool],
                      done: Done) -> None:
        def apply() -> tuple[Any, BaseException | None]:
            if self.plan.hit(self.world, Fault.READ_ERROR):
                return None, BackendError(f"read of chk-{checkpoint_id}/_metadata failed")
            if checkpoint_id not in self.metadata:
                return None, SnapshotNotFoundError(f"checkpoint {checkpoint_id} has no "
                                                   "metadata")
            return self.metadata[checkpoint_id], None
        self._call("read_metadata", apply, alive, done, serial=True)

    def put_meta(self, name: str, value: Any, alive: Callable[[], bool], done: Done) -> None:
        def apply() -> tuple[Any, BaseException | None]:
            if self._disk_full() or self.plan.hit(self.world, Fault.META_WRITE_ERROR):
                return None, BackendError(f"write of meta/{name} failed")
            self.meta[name] = value
            return None, None
        self._call("put_meta", apply, alive, done, serial=True)

    def checkpoint_ids(self) -> set[int]:
        """Every checkpoint id with objects in storage (metadata, snapshots, ``.refs``),
        complete or not (``list_objects("chk-")``)."""
        ids = set(self.metadata) | {k[0] for k in self.snapshots}
        ids |= {int(k.partition("/")[0][4:]) for k in self.objects if k.startswith("chk-")}
        return ids

    def discard_checkpoints(self, doomed: tuple[int, ...]) -> list[int]:
        """Retention: delete these checkpoints' objects (``discard_checkpoint``; savepoints
        keep theirs: they are copies)."""
        gone = set(doomed)
        for c in doomed:
            self.metadata.pop(c, None)
            for k in [k for k in self.objects if k.startswith(f"chk-{c}/")]:
                del self.objects[k]  # the .refs beside its snapshots
        for key in [k for k in self.snapshots if k[0] in gone]:
            del self.snapshots[key]
        return list(doomed)

    # -- helpers ---------------------------------------------------------------------------
    def _disk_full(self) -> bool:
        window = self.plan.disk_full
        full = window is not None and window[0] <= self.world.now < window[1]
        if full:
            self.world.reach(Step.WRITE_ON_FULL_DISK)
        return full

    def _call(self, what: str, apply: Callable[[], tuple[Any, BaseException | None]],
              alive: Callable[[], bool], done: Done, serial: bool = False) -> None:
        """``serial``: a TM call, run after every TM call issued before it (the TM's
        ``BackendIO`` thread: a recovery's listing sees every metadata write before it)."""
        # a bounded number of slow calls, as every fault here (MAX_HITS): with a task's
        # uploads in order, slowness without end times every checkpoint out for ever
        slow = self.plan.hit(self.world, Fault.SLOW_STORAGE)
        delay = self.world.latency(1, 8) * (self.world.rng.uniform(10, 100) if slow else 1)

        def complete() -> None:
            result, error = apply()
            if serial:
                self._next_tm_call()
            if alive():
                done(result, error)
        if not serial:
            self.world.at(delay, complete, f"storage: {what} completes")
            return
        self.tm_queue.append((delay, complete, f"storage: {what} completes"))
        if not self.tm_busy:
            self._next_tm_call()

    def _next_tm_call(self) -> None:
        if not self.tm_queue:
            self.tm_busy = False
            return
        self.tm_busy = True
        delay, complete, label = self.tm_queue.pop(0)
        self.world.at(delay, complete, label)


def merge_files(files: list[Any]) -> dict[str, dict[Any, Any]]:
    """Keyed states from a chain of shared files: a base replaces, a delta updates."""
    states: dict[str, dict[Any, Any]] = {}
    for f in files:
        if f["kind"] == "base":
            states = {n: dict(v) for n, v in f["states"].items()}
        else:
            for n, v in f["states"].items():
                states.setdefault(n, {}).update(v)
    return states


class SharedFilesView:
    """The calls :func:`~jstormpy.state_backends.shared_files.collect_shared_files` makes
    of a state backend, answered from the simulated storage (synchronously, as the TM's
    retention runs inline here)."""

    def __init__(self, storage: SimStorage) -> None:
        self.storage = storage

    def list_objects(self, prefix: str) -> list[str]:
        return sorted(k for k in self.storage.objects if k.startswith(prefix))

    def read_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        if checkpoint_id not in self.storage.metadata:
            raise SnapshotNotFoundError(f"checkpoint {checkpoint_id} has no metadata")
        return self.storage.metadata[checkpoint_id]

    def get_object(self, key: str) -> bytes:
        if key not in self.storage.objects:
            raise SnapshotNotFoundError(f"{key} does not exist")
        data = self.storage.objects[key]
        assert isinstance(data, bytes)
        return data

    def delete_objects(self, prefix: str) -> None:
        for k in [k for k in self.storage.objects if k.startswith(prefix)]:
            del self.storage.objects[k]


def _key_of(handle: str) -> tuple[int, int, int]:
    chk, task = handle.split("/")
    t, g = task[len("task-"):].split("-g")
    return int(chk[len("chk-"):]), int(t), int(g)
