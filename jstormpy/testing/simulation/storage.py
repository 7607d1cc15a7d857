"""Simulated checkpoint storage: the real state backend over a simulated filesystem.

The checkpoints, snapshots, shared files and ``meta/`` objects are stored by the real
:class:`~jstormpy.state_backends.file.FileBackend` (``StateBackend``'s commit points,
listing, retention and shared files) on the simulated filesystem (``filesystem.py``),
which injects the seed's filesystem faults (issue 37). What this module adds is a call's
life: every call completes later, as an event (slowly with ``slow_storage``); the TM's
calls run one at a time (its ``BackendIO`` thread); a metadata write may time out and land
later; a completion whose caller died meanwhile (a crashed worker or TM) still changes
storage, but nobody hears of it.

Snapshots and shared files are the simulator's Python values, pickled into the objects.
The ``*_now`` methods are the operator's and the judge's view of the same disk, without
faults and without delay.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from jstormpy.api.errors import (
    BackendTimeoutError,
    CorruptSnapshotError,
    JStormError,
    ObjectExistsError,
    SnapshotNotFoundError,
)
from jstormpy.state_backends.base import COMPLETED_META
from jstormpy.state_backends.file import FileBackend
from jstormpy.state_backends.shared_files import encode_refs
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.filesystem import SimDisk, SimFilesystem
from jstormpy.testing.simulation.judging import Step
from jstormpy.testing.simulation.stores import materialised
from jstormpy.testing.simulation.world import World

Done = Callable[[Any, BaseException | None], None]
"""A storage completion: ``(result, error)``."""
ROOT = "/checkpoints"
URI = f"file://{ROOT}"
SAVEPOINT_PIN_TTL_S = 10.0 ** 9
"""The simulator's savepoints are copies that live as long as the run: pinned for good."""


class SimStorage:
    """One job's checkpoint storage: a ``file://`` backend on a simulated disk."""

    def __init__(self, world: World, plan: FaultPlan) -> None:
        self.world = world
        self.plan = plan
        self.disk = SimDisk()
        self.backend = FileBackend(URI, SimFilesystem(self.disk, world, plan, ROOT))
        """The protocol's calls: the seed's faults strike them."""
        self.inspect = FileBackend(URI, SimFilesystem(self.disk, world, None, ROOT))
        """The operator's and the judge's view of the same disk: no faults."""
        self.tm_queue: list[Any] = []  # the TM's calls run one at a time (BackendIO)
        self.tm_busy = False
        self.landed: set[int] = set()
        """Every checkpoint whose metadata ever landed (retention does not forget it)."""
        self.lost: set[str] = set()
        """Shared files the ``shared_file_loss`` fault removed (not retention)."""

    # -- the calls ---------------------------------------------------------------------------
    def put_snapshot(self, key: tuple[int, int, int], data: Any, alive: Callable[[], bool],
                     done: Done, new_files: dict[str, Any] | None = None) -> None:
        """``new_files``: shared files the snapshot needs that are not stored yet; they are
        uploaded first (a failed snapshot write leaves them behind, as orphans), and the
        snapshot's ``.refs`` lists every file in ``data["files"]``."""
        def apply() -> tuple[Any, BaseException | None]:
            cid, task, generation = key
            try:
                for name, value in (new_files or {}).items():
                    self.backend.put_object(name, pickle.dumps(value))
                refs = encode_refs(data["files"]) if "files" in data else None
                handle = self.backend.put_snapshot(cid, task, pickle.dumps(data),
                                                   generation=generation, refs=refs)
            except JStormError as exc:
                return None, exc
            return handle, None
        self._call("put_snapshot", apply, alive, done)

    def read_shared(self, keys: list[str], alive: Callable[[], bool], done: Done) -> None:
        """Read the shared files ``keys`` (in order); a missing one is corrupt state, named."""
        def apply() -> tuple[Any, BaseException | None]:
            out = []
            for k in keys:
                try:
                    out.append(pickle.loads(self.backend.get_object(k)))
                except SnapshotNotFoundError:
                    return None, CorruptSnapshotError(f"shared file {k} is missing")
                except JStormError as exc:
                    return None, exc
            return out, None
        self._call("read_shared", apply, alive, done)

    def read_snapshot(self, handle: str, alive: Callable[[], bool], done: Done) -> None:
        def apply() -> tuple[Any, BaseException | None]:
            try:
                return pickle.loads(self.backend.get_snapshot(handle)), None
            except JStormError as exc:
                return None, exc
        self._call("read_snapshot", apply, alive, done)

    def put_metadata(self, checkpoint_id: int, metadata: dict[str, Any],
                     alive: Callable[[], bool], done: Done, late: float | None = None) -> None:
        """The commit point, create-only (``StateBackend.create_metadata``): a write that
        finds one under its id fails and replaces nothing. ``late``: the write of a
        deposed TM, which lands after that many ms, outside the TM's call queue (the
        queue is the new TM's now), and is answered to nobody."""
        def land() -> None:  # a write its caller gave up on: it lands, nobody hears
            try:
                self.inspect.create_metadata(checkpoint_id, metadata)
            except ObjectExistsError:
                return
            self.landed.add(checkpoint_id)

        def land_deposed() -> None:
            self.world.reach(Step.LATE_COMMIT_POINT)
            land()

        if late is not None:
            self.world.at(late, land_deposed,
                          f"storage: deposed TM's metadata of checkpoint {checkpoint_id} lands")
            return

        def apply() -> tuple[Any, BaseException | None]:
            if self.plan.hit(self.world, Fault.METADATA_TIMEOUT):
                # the write lands after the caller gave up on it
                self.world.at(self.world.latency(50, 400), land,
                              f"storage: late metadata of checkpoint {checkpoint_id} lands")
                return None, BackendTimeoutError(f"chk-{checkpoint_id}/_metadata: no answer")
            try:
                self.backend.create_metadata(checkpoint_id, metadata)
            except JStormError as exc:
                return None, exc
            self.landed.add(checkpoint_id)
            return None, None
        self._call("put_metadata", apply, alive, done, serial=True)

    def list_completed(self, alive: Callable[[], bool], done: Done) -> None:
        """Answers ``(completed, present)``: ``StateBackend.list_completed`` and
        ``list_checkpoint_ids``, as ``MasterCore`` lists them."""
        def apply() -> tuple[Any, BaseException | None]:
            try:
                return (self.backend.list_completed(),
                        self.backend.list_checkpoint_ids()), None
            except JStormError as exc:
                return None, exc
        self._call("list_completed", apply, alive, done, serial=True)

    def read_metadata(self, checkpoint_id: int, alive: Callable[[], bool],
                      done: Done) -> None:
        def apply() -> tuple[Any, BaseException | None]:
            try:
                return self.backend.read_metadata(checkpoint_id), None
            except JStormError as exc:
                return None, exc
        self._call("read_metadata", apply, alive, done, serial=True)

    def put_meta(self, name: str, value: int | bytes, alive: Callable[[], bool],
                 done: Done) -> None:
        """A ``meta/`` object, as ``MasterCore`` stores it (an int as its digits)."""
        def apply() -> tuple[Any, BaseException | None]:
            try:
                self.backend.put_meta(name, _meta_bytes(value))
            except JStormError as exc:
                return None, exc
            return None, None
        self._call("put_meta", apply, alive, done, serial=True)

    def collect_garbage(self, keep: int, bad: frozenset[int], upto: int | None,
                        alive: Callable[[], bool], done: Done) -> None:
        """``StateBackend.garbage_collect``, a TM call (``MasterCheckpoints.garbage_collect``);
        answers the ids it deleted."""
        def apply() -> tuple[Any, BaseException | None]:
            try:
                return self.backend.garbage_collect(keep, bad, upto), None
            except JStormError as exc:
                return None, exc
        self._call("garbage_collect", apply, alive, done, serial=True)

    # -- the operator's and the judge's view (no faults, no delay) -------------------------
    def completed_now(self) -> list[int]:
        return self.inspect.list_completed()

    def metadata_now(self, checkpoint_id: int) -> dict[str, Any] | None:
        try:
            return self.inspect.read_metadata(checkpoint_id)
        except SnapshotNotFoundError:
            return None

    def snapshot_now(self, handle: str) -> Any:
        """A snapshot as stored; None if it is missing or unreadable (torn)."""
        try:
            return pickle.loads(self.inspect.get_snapshot(handle))
        except (SnapshotNotFoundError, CorruptSnapshotError):
            return None

    def meta_now(self, name: str) -> bytes | None:
        return self.inspect.get_meta(name)

    def meta_int_now(self, name: str) -> int:
        raw = self.inspect.get_meta(name)
        return int(raw) if raw else 0

    def set_meta_now(self, name: str, value: int | bytes) -> None:
        self.inspect.put_meta(name, _meta_bytes(value))

    def stored(self, key: str) -> bool:
        """Whether object ``key`` (a shared file) is in storage."""
        return key in self.inspect.list_objects(key)

    def shared_files_now(self) -> list[str]:
        return sorted(self.inspect.list_objects("inc/"))

    def lose(self, key: str) -> None:
        """The ``shared_file_loss`` fault: an operator's cleanup, a lost disk."""
        self.inspect.delete_objects(key)
        self.lost.add(key)

    def materialize(self, snapshot: Any) -> Any:
        """A snapshot with its shared files (and a native RocksDB checkpoint's SST files)
        read back into ``states`` (what a rescale, a savepoint and the final check read,
        whole); None if a shared file is missing."""
        if not snapshot:
            return snapshot
        states = materialised(snapshot.get("states") or {})  # native RocksDB: read out
        if "files" not in snapshot:
            return {**snapshot, "states": states} if "states" in snapshot else snapshot
        files = []
        for k in snapshot["files"]:
            try:
                files.append(pickle.loads(self.inspect.get_object(k)))
            except SnapshotNotFoundError:
                return None
        out = {k: v for k, v in snapshot.items() if k != "files"}
        out["states"] = {**states, **merge_files(files)}
        return out

    def checkpoint_copy(self, checkpoint_id: int) -> tuple[dict[str, Any],
                                                           dict[str, Any]] | None:
        """A savepoint of a completed checkpoint: its metadata and its snapshots (by handle)
        with their shared files read in; None if it is gone or a file it needs is. The
        checkpoint is pinned (``StateBackend.pin_checkpoint``): retention keeps it."""
        meta = self.metadata_now(checkpoint_id)
        if meta is None:
            return None
        copy = {t["handle"]: self.materialize(self.snapshot_now(t["handle"]))
                for t in meta.get("tasks", {}).values()}
        if any(v is None for v in copy.values()):
            return None
        self.inspect.pin_checkpoint(checkpoint_id, ttl_s=SAVEPOINT_PIN_TTL_S)
        return meta, copy

    def import_checkpoint(self, checkpoint_id: int, metadata: dict[str, Any],
                          snapshots: dict[str, Any]) -> None:
        """Store a savepoint's copy as checkpoint ``checkpoint_id`` of a new run, as
        ``savepoints.prepare_restore`` does (the completed floor with it)."""
        for handle, data in snapshots.items():
            cid, task, generation = handle_key(handle)
            self.inspect.put_snapshot(cid, task, pickle.dumps(data), generation=generation)
        self.inspect.create_metadata(checkpoint_id, metadata)
        self.landed.add(checkpoint_id)
        self.set_meta_now(COMPLETED_META, checkpoint_id)

    def write_rescaled(self, checkpoint_id: int, generation: int,
                       snapshots: dict[int, Any]) -> dict[str, dict[str, str]]:
        """A rescale's checkpoint ``checkpoint_id`` for the new layout: its tasks'
        ``snapshots`` (by new task id) written, no commit point (the rescale writes that
        through the one commit path); answers the metadata's ``tasks``."""
        return {str(t): {"handle": self.inspect.put_snapshot(
            checkpoint_id, t, pickle.dumps(data), generation=generation)}
            for t, data in snapshots.items()}

    def discard(self, checkpoint_id: int, alive: Callable[[], bool], done: Done) -> None:
        """``StateBackend.discard_checkpoint``, a TM call (a rescale's failed commit)."""
        def apply() -> tuple[Any, BaseException | None]:
            try:
                self.backend.discard_checkpoint(checkpoint_id)
            except JStormError as exc:
                return None, exc
            return None, None
        self._call("discard_checkpoint", apply, alive, done, serial=True)

    # -- helpers ---------------------------------------------------------------------------
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


def _meta_bytes(value: int | bytes) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def handle_key(handle: str) -> tuple[int, int, int]:
    """``(checkpoint, task, generation)`` of a snapshot's handle (its key,
    ``chk-0000000042/task-00007-g3.snap``)."""
    chk, task = handle.split("/")
    t, g = task[len("task-"):].removesuffix(".snap").split("-g")
    return int(chk[len("chk-"):]), int(t), int(g)

