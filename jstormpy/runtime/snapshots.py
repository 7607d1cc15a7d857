"""Asynchronous task snapshots: a cheap copy on the task thread, the rest off it.

At a barrier the task thread calls :func:`capture`: every managed-state dict whose values
are all immutable (numbers, strings, bytes, None, and tuples of those) is copied with
``dict.copy()`` (a C-level copy, ~10-20 ms for 1M keys; the O(n) scan of the value
types runs on the task thread only the first time, then on the snapshot thread);
everything else — the custom
``snapshot()`` result, executor fields, state dicts holding mutable values — is pickled
right there, as before, so a later in-place mutation can never leak into the snapshot.

A per-task :class:`Snapshotter` thread then serialises the copies in chunks of
:data:`CHUNK_KEYS` keys (so the GIL is handed back to the task thread between chunks),
streaming each chunk to the state backend as it is made (:class:`SnapshotStream`: a full
dump takes a few chunks of memory, whatever the state's size), and only then acks the
checkpoint: the checkpoint waits for the upload, processing does not (Flink's
asynchronous snapshots).

The stored bytes are still one pickle that loads as the plain snapshot dict
(``{"states": {...}, "custom": ..., ...}``): :func:`_assemble_dump` rebuilds it, so
restore, migration and savepoint inspection read it with ``pickle.loads`` as before.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import queue
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import CheckpointError
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.rocksdb_files import sst_keys, upload_checkpoint
from jstormpy.state_store import FrozenStore, RocksState

log = logging.getLogger("jstormpy.task")

CHUNK_KEYS = 20000
"""Keys per pickled chunk of a copied state dict."""

ATOMIC_TYPES = frozenset({int, float, str, bytes, bool, type(None), complex})
"""Value types a snapshot may share instead of copy (immutable all the way down)."""


def immutable_values(d: dict[Any, Any]) -> bool:
    """Whether every value of ``d`` is atomic-immutable or a tuple of such values."""
    types = set(map(type, d.values()))
    if types <= ATOMIC_TYPES:
        return True
    if types <= ATOMIC_TYPES | {tuple}:
        inner = set(map(type, itertools.chain.from_iterable(
            v for v in d.values() if v.__class__ is tuple)))
        return inner <= ATOMIC_TYPES
    return False


@dataclass
class SnapshotView:
    """What the task thread hands to the snapshot thread (never touched by the task)."""

    rest: bytes
    """The snapshot dict without the copied states, already pickled."""
    copies: dict[str, Any]
    """Private copies of the managed-state dicts with immutable values, and RocksDB states
    as of the barrier (:class:`~jstormpy.state_store.FrozenState`, read here)."""
    extra: dict[str, Any] | None = None
    """Entries added to the snapshot dict on the snapshot thread (the incremental chain)."""
    unchecked: list[str] = field(default_factory=list)
    """Copies whose values were not type-scanned on the task thread (see :func:`capture`)."""
    verified: set[str] | None = None
    """The caller's set of states known immutable-valued (updated by :func:`serialise`)."""
    frozen: FrozenStore | None = None
    """The native RocksDB checkpoint the RocksDB states in ``copies`` read (released by
    :func:`release` once the snapshot is serialised)."""
    native: dict[str, int | None] = field(default_factory=dict)
    """RocksDB states whose snapshot is ``frozen``'s files (name -> ttl_ms; uploaded by
    the snapshot thread, ``state_backends/rocksdb_files.py``), not their entries."""
    decline: str | None = None
    """Why this checkpoint is declined (a native RocksDB checkpoint could not be taken)."""


def capture(snap: dict[str, Any], verified: set[str] | None = None) -> SnapshotView:
    """Task-thread part: copy immutable-valued state dicts, pickle the rest now.

    ``verified`` (kept by the caller across checkpoints) names the states found
    immutable-valued at an earlier capture: they are copied without the O(n) type scan,
    which the snapshot thread runs on the copy instead (:func:`serialise` declines the
    checkpoint if a mutable value turned up, and the state is scanned here again next
    time). Without it every state is scanned here."""
    states: dict[str, Any] = snap.get("states") or {}
    copies: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    unchecked: list[str] = []
    frozen: FrozenStore | None = None
    freeze_failed = False
    native: dict[str, int | None] = {}
    decline: str | None = None
    for name, d in states.items():
        if isinstance(d, RocksState) and d.store.native_checkpoints:
            if frozen is None and decline is None:
                try:
                    frozen = d.store.freeze()
                except Exception as exc:  # e.g. a full disk: this checkpoint fails
                    log.warning("native checkpoint of the task's RocksDB failed (%s); the "
                                "checkpoint is declined", exc)
                    decline = f"native RocksDB checkpoint failed: {exc}"
            native[name] = d.ttl_ms
            continue
        if isinstance(d, RocksState) and not freeze_failed:
            if frozen is None:
                try:
                    frozen = d.store.freeze()
                except Exception as exc:  # e.g. a full disk: write the states whole instead
                    log.warning("native checkpoint of the task's RocksDB failed (%s); its "
                                "states are read at the barrier instead", exc)
                    freeze_failed = True
                    kept[name] = d
                    continue
            copies[name] = frozen.state(name, d.ttl_ms)
            continue
        if type(d) is dict and len(d) > CHUNK_KEYS // 4:
            if verified is not None and name in verified:
                copies[name] = d.copy()
                unchecked.append(name)
                continue
            if immutable_values(d):
                copies[name] = d.copy()
                if verified is not None:
                    verified.add(name)
                continue
        kept[name] = d
    rest = dict(snap)
    rest["states"] = kept
    try:
        data = pickle.dumps(rest, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        if frozen is not None:
            frozen.release()
        raise
    if decline is not None and frozen is not None:
        frozen.release()
        frozen = None
    return SnapshotView(data, copies, unchecked=unchecked, verified=verified, frozen=frozen,
                        native=native, decline=decline)


def upload_native(view: SnapshotView, backend: StateBackend | None, *, task_id: int,
                  checkpoint_id: int, generation: int, attempt: str,
                  after_first_upload: Callable[[], None] | None = None
                  ) -> tuple[list[str], int]:
    """Snapshot thread: upload the native RocksDB checkpoint of ``view.native``'s states
    (only the SST files not in the backend yet, ``state_backends/rocksdb_files.py``) and
    put its ``"rocksdb"`` entry in ``view.extra``. Returns the SST keys the snapshot
    references (its ``.refs``) and the bytes written."""
    if not view.native:
        return [], 0
    frozen = view.frozen
    if backend is None or frozen is None or frozen.source is None:
        raise CheckpointError("a native RocksDB checkpoint needs a state backend")
    store = frozen.source
    frozen.materialise()  # the barrier's sealed writes into RocksDB, then its checkpoint
    entry, written = upload_checkpoint(
        backend, frozen.path, store.uploaded, store.crcs, task_id=task_id,
        checkpoint_id=checkpoint_id,
        generation=generation, attempt=attempt, states=view.native,
        key_groups=store.key_groups, max_parallelism=store.max_parallelism,
        now_ms=frozen.now_ms, after_first_upload=after_first_upload)
    view.extra = {**(view.extra or {}), "rocksdb": entry}
    if store.local is not None:  # local recovery: keep links to what was uploaded
        try:
            store.local.keep(frozen.path, entry)
        except OSError as exc:  # e.g. a full disk: the restore downloads instead
            log.warning("task %s: keeping local copies of checkpoint %s failed: %s",
                        task_id, checkpoint_id, exc)
    return sst_keys(entry), written


def stall_ms(view: SnapshotView) -> float:
    """How long the task thread waited for the RocksDB apply of ``view``'s barrier (a
    full write cache or a scan while it was pending; part of the barrier's pause)."""
    frozen = view.frozen
    if frozen is None or frozen.sealed is None:
        return 0.0
    return frozen.sealed.stall_ms


def release(view: SnapshotView) -> None:
    """Free what :func:`capture` took besides copies (a native RocksDB checkpoint)."""
    if view.frozen is not None:
        view.frozen.release()
        view.frozen = None


def _dict_from_chunks(chunks: list[bytes]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for c in chunks:
        out.update(pickle.loads(c))
    return out


def _assemble(rest: bytes, chunked: dict[str, list[bytes]],
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Loads a chunked snapshot: ``rest`` (the pickled dict without the chunked states),
    each state's pickled chunks, and the snapshot-thread entries ``extra``. Snapshots
    written before streamed dumps call it directly (keep it for them)."""
    snap: dict[str, Any] = pickle.loads(rest)
    if extra:
        snap.update(extra)
    states = snap.setdefault("states", {})
    for name, chunks in chunked.items():
        states[name] = _dict_from_chunks(chunks)
    return snap


def _assemble_dump(rest: bytes, chunked: dict[bytes, list[bytes]],
                   extra: bytes | None) -> dict[str, Any]:
    """Loads a streamed dump (:func:`dump_pieces`): :func:`_assemble`, with the state
    names and ``extra`` pickled."""
    return _assemble(rest, {pickle.loads(name): chunks for name, chunks in chunked.items()},
                     pickle.loads(extra) if extra is not None else None)


def _binbytes(data: bytes) -> bytes:
    """The opcode that pushes ``data`` onto the unpickler's stack, without ``data``."""
    return pickle.BINBYTES8 + _U64.pack(len(data))


def _pickled(obj: Any) -> bytes:
    """The opcode that pushes ``obj`` pickled, as bytes (:func:`_assemble_dump` loads it)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _binbytes(data) + data


_U64 = struct.Struct("<Q")
_DUMP_HEAD = (pickle.PROTO + bytes([4])
              + pickle.SHORT_BINUNICODE + bytes([len(__name__)]) + __name__.encode()
              + pickle.SHORT_BINUNICODE + bytes([len(_assemble_dump.__qualname__)])
              + _assemble_dump.__qualname__.encode()
              + pickle.STACK_GLOBAL + pickle.MARK)
"""A protocol 4 pickle up to the arguments of a call to :func:`_assemble_dump`."""


def dump_pieces(view: SnapshotView) -> Iterator[bytes]:
    """The snapshot of ``view`` as one pickle, produced piece by piece: a chunk of
    :data:`CHUNK_KEYS` entries of a copied state is read (a RocksDB state: from its
    native checkpoint), pickled and yielded before the next is read, so a full dump of
    any size takes a few chunks of memory while it is written out.

    The pieces concatenated are a pickle that loads (``pickle.loads``) as the plain
    snapshot dict, like a snapshot written whole. It calls :func:`_assemble_dump` with
    ``view.rest``, ``{pickled state name: [chunk, ...]}`` and the pickled
    ``view.extra``; the opcodes
    around the chunks are written here (a :class:`pickle.Pickler` cannot hand its output
    over before ``dump`` returns, and a thread between the two would be one more thing
    to stop), so only bytes objects, strings, one dict, lists and a global appear."""
    if not view.copies and not view.extra:
        yield view.rest
        return
    yield _DUMP_HEAD + _binbytes(view.rest)
    yield view.rest
    yield pickle.EMPTY_DICT
    for name, d in view.copies.items():
        opcodes = _pickled(name) + pickle.EMPTY_LIST
        entries = iter(d.items())
        while True:
            part = dict(itertools.islice(entries, CHUNK_KEYS))
            if not part:
                break
            chunk = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
            del part
            yield opcodes + _binbytes(chunk)
            yield chunk
            opcodes = pickle.APPEND
            del chunk
        yield opcodes + pickle.SETITEM  # the last chunk's APPEND, or the empty list
    yield _pickled(view.extra) if view.extra else pickle.NONE
    yield pickle.TUPLE + pickle.REDUCE + pickle.STOP


def verify(view: SnapshotView) -> None:
    """Snapshot thread: the type scan :func:`capture` skipped. Raises
    :class:`~jstormpy.api.errors.CheckpointError` (the checkpoint is declined, the task keeps
    running) if such a copy holds a mutable value: it shares that value with the live
    state, so the bytes could show a change made after the barrier."""
    if view.decline is not None:
        raise CheckpointError(view.decline)
    unchecked, view.unchecked = view.unchecked, []
    for name in unchecked:
        if not immutable_values(view.copies[name]):
            if view.verified is not None:
                view.verified.discard(name)
            raise CheckpointError(
                f"state {name!r} now holds mutable values; this checkpoint is declined and "
                f"the next one pickles the state at the barrier")


class SnapshotStream:
    """A view's snapshot as the pieces of :func:`dump_pieces`, produced anew each time it
    is iterated (a backend that retries a write starts over): what the snapshot thread
    hands to :meth:`~jstormpy.state_backends.base.StateBackend.put_snapshot`, which
    writes the pieces as they come. :attr:`size` counts the bytes of the last pass.

    :meth:`close` (before the view is released) ends a pass still running on another
    thread — a backend call given up by its deadline — at its next piece: no piece is
    read from a released RocksDB checkpoint."""

    def __init__(self, view: SnapshotView) -> None:
        self.view = view
        self.size = 0
        self._lock = threading.Lock()
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        self.size = 0
        pieces = dump_pieces(self.view)
        while True:
            with self._lock:
                if self._closed:
                    raise CheckpointError("the snapshot's upload was given up")
                piece = next(pieces, None)
            if piece is None:
                return
            self.size += len(piece)
            yield piece
            del piece  # not held while the next chunk is read and pickled

    def close(self) -> None:
        """Stop any pass at its next piece (waits for the piece being made)."""
        with self._lock:
            self._closed = True


def serialise_stream(view: SnapshotView) -> SnapshotStream:
    """Snapshot-thread part (:func:`verify` first): the snapshot as a stream of pickled
    pieces, read and pickled chunk by chunk while the backend writes them."""
    verify(view)
    return SnapshotStream(view)


def serialise(view: SnapshotView) -> bytes:
    """:func:`serialise_stream`, joined: the whole snapshot as one loadable pickle."""
    return b"".join(serialise_stream(view))


class Snapshotter:
    """One daemon thread per task running snapshot jobs in checkpoint order."""

    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.idle = threading.Event()
        self.idle.set()
        self.pending = 0
        self.lock = threading.Lock()
        self.thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` after the jobs submitted before it."""
        with self.lock:
            self.pending += 1
            self.idle.clear()
        self.jobs.put(job)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every submitted job has run."""
        return self.idle.wait(timeout)

    def close(self) -> None:
        """Stop the thread after the queued jobs."""
        self.jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("snapshot job failed")
            finally:
                with self.lock:
                    self.pending -= 1
                    if not self.pending:
                        self.idle.set()
