"""Incremental checkpoints on disk: changelog segments of managed keyed state, and chains.

With ``Config(incremental_checkpoints=True)`` a task does not rewrite its whole keyed
state at every checkpoint. It writes one *segment* object per checkpoint, next to (not
inside) the checkpoint's directory, so later checkpoints can keep referencing it:

    inc/task-00007/seg-0000000042-g3.base    every key of the task's key groups
    inc/task-00007/seg-0000000043-g3.delta   keys written or deleted since checkpoint 42

A *base* holds full copies of the task's tracked state dicts; a *delta* holds, per key
group, the keys put since the previous segment and the keys deleted. The task snapshot
of checkpoint ``n`` (the usual ``chk-n/task-*.snap``) then carries the *chain*: the base
and every delta after it, oldest first, under ``snapshot["incremental"]``; a ``.refs``
object beside it lists the same segment keys, so retention can tell which segments a
retained checkpoint still needs (retention: ``state_backends/shared_files.py``).

Segment layout (every part checksummed, so a damaged key group is named, not guessed):

    b"JSEG" | version u8 | header length u32 | header crc32 u32 | header JSON | sections

The header is ``{"kind", "checkpoint_id", "task_id", "generation", "max_parallelism",
"groups": [first, end), "sections": [[group, offset, length, crc32], ...]}``. A delta
has one section per key group it touches (``group`` = the key group; its payload is a
pickled ``{state: ((put_keys, put_values), deleted_keys)}``, three lists, the i-th put
value belonging to the i-th put key -- version 1 segments held a ``{key: value}`` dict of
the puts instead, still read); a base has chunk sections (``group`` = -1, payload a
pickled ``{state: {key: value}}`` of up to ``CHUNK_KEYS`` keys of one state) covering the
whole key-group range ``groups`` (bases are not split by key group: hashing every key at
every compaction would cost more than it saves; restoring a subset of key groups from a
base filters by :func:`~jstormpy.keygroups.key_groups_of`).
"""

from __future__ import annotations

import itertools
import json
import pickle
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from jstormpy.api.errors import CorruptSnapshotError, MissingSegmentError, SnapshotNotFoundError
from jstormpy.keygroups import key_groups_of
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.shared_files import (
    SHARED_PREFIX,
    encode_refs,
    referenced_files,
    refs_key,
    shared_file_checkpoint,
)

# re-exported: they lived here first
__all__ = ["encode_refs", "key_groups_of", "referenced_files", "refs_key"]
referenced_segments = referenced_files

SEGMENT_PREFIX = SHARED_PREFIX
CHUNK_KEYS = 20000
_MAGIC = b"JSEG"
_VERSION = 2  # 2: delta puts as (keys, values) lists
_READABLE = (1, 2)
_HEAD = struct.Struct("!4sBII")  # magic, version, header length, header crc32


def segment_key(task_id: int, checkpoint_id: int, generation: int, kind: str,
                attempt: str = "") -> str:
    """Where the segment of ``task_id`` for ``checkpoint_id`` lives (``attempt``, the
    writing worker process's incarnation, fences a zombie of the same generation)."""
    token = f"g{generation}-a{attempt}" if attempt else f"g{generation}"
    return f"{SEGMENT_PREFIX}task-{task_id:05d}/seg-{checkpoint_id:010d}-{token}.{kind}"


segment_checkpoint = shared_file_checkpoint
"""The checkpoint id a segment key was written for (None if ``key`` is not one)."""


def _pickle(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def encode_segment(kind: str, header: dict[str, Any], sections: list[tuple[int, bytes]]
                   ) -> bytes:
    """Assemble a segment from ``(group, payload)`` sections (group -1 for base chunks)."""
    offset = 0
    index = []
    for group, payload in sections:
        index.append([group, offset, len(payload), zlib.crc32(payload)])
        offset += len(payload)
    head = json.dumps({**header, "kind": kind, "sections": index},
                      sort_keys=True).encode()
    return b"".join([_HEAD.pack(_MAGIC, _VERSION, len(head), zlib.crc32(head)), head,
                     *(p for _g, p in sections)])


def build_base(states: Mapping[str, Mapping[Any, Any]], header: dict[str, Any]) -> bytes:
    """A base segment: full copies of ``states``, chunked (runs on the snapshot thread)."""
    sections: list[tuple[int, bytes]] = []
    for name, entries in states.items():
        it = iter(entries.items())
        while True:
            part = dict(itertools.islice(it, CHUNK_KEYS))
            if not part:
                break
            sections.append((-1, _pickle({name: part})))
    return encode_segment("base", {**header, "states": sorted(states)}, sections)


def build_delta(changes: Mapping[str, Mapping[Any, Any]], deleted_marker: object,
                header: dict[str, Any],
                value_types: dict[str, set[type]] | None = None) -> bytes:
    """A delta segment: per key group, the keys put and deleted (``deleted_marker`` as the
    value of a key in ``changes`` means it was deleted).

    Runs on the snapshot thread, and costs what touching each dirty key and value a few
    times costs (at 10M keys they are mostly out of the CPU cache, so every pass over
    them counts): the keys are hashed in batches (:func:`key_groups_of`), one pass puts
    each key and its value, or the deleted key, into its key group's lists (no dict is
    built and no key is looked up again), and each key group is pickled with one call.
    With ``value_types``, the types of each state's put values are added to
    ``value_types[state]`` (collected just before each key group is pickled, while its
    values are in the CPU cache: the caller's type check costs no pass of its own)."""
    max_p = header["max_parallelism"]
    groups: dict[int, dict[str, Any]] = {}
    for name, entries in changes.items():
        keys = list(entries)
        buckets: dict[int, tuple[list[Any], list[Any], list[Any]]] = {}
        get = buckets.get
        for g, key, value in zip(key_groups_of(keys, max_p), keys, entries.values(),
                                 strict=True):
            bucket = get(g)
            if bucket is None:
                bucket = buckets[g] = ([], [], [])
            if value is deleted_marker:
                bucket[2].append(key)
            else:
                bucket[0].append(key)
                bucket[1].append(value)
        for g, (put_keys, put_values, deleted) in buckets.items():
            groups.setdefault(g, {})[name] = ((put_keys, put_values), deleted)
    sections = []
    for g in sorted(groups):
        payload = groups[g]
        if value_types is not None:
            for name, ((_keys, put_values), _deleted) in payload.items():
                value_types[name].update(map(type, put_values))
        sections.append((g, _pickle(payload)))
    return encode_segment("delta", {**header, "states": sorted(changes)}, sections)


def _read_header(data: bytes, where: str) -> tuple[dict[str, Any], int]:
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(f"{where}: truncated ({len(data)} bytes, no header)")
    magic, version, hlen, hcrc = _HEAD.unpack_from(data)
    if magic != _MAGIC or version not in _READABLE:
        raise CorruptSnapshotError(f"{where}: not a jstormpy segment (bad magic/version)")
    head = data[_HEAD.size:_HEAD.size + hlen]
    if len(head) != hlen or zlib.crc32(head) != hcrc:
        raise CorruptSnapshotError(f"{where}: header damaged (truncated or checksum mismatch)")
    try:
        header: dict[str, Any] = json.loads(head)
    except ValueError as exc:
        raise CorruptSnapshotError(f"{where}: header is not JSON: {exc}") from exc
    return header, _HEAD.size + hlen


def iter_segment(data: bytes, where: str, wanted: Iterable[int] | None = None
                 ) -> tuple[dict[str, Any], Iterator[tuple[int, Any]]]:
    """The header of a segment and an iterator over its unpickled ``(group, payload)``
    sections, each checked when reached (a restore applies one section before unpickling
    the next, so a base is never held twice in memory).

    Only delta sections of the key groups in ``wanted`` are read (all if None).

    Raises:
        CorruptSnapshotError: naming the key group (or base range) that is damaged (from
            the iterator, for a damaged section).
    """
    header, start = _read_header(data, where)
    want = None if wanted is None else set(wanted)
    lo, hi = header.get("groups", [0, 0])
    view = memoryview(data)

    def sections() -> Iterator[tuple[int, Any]]:
        for group, offset, length, crc in header["sections"]:
            if group >= 0 and want is not None and group not in want:
                continue
            payload = view[start + offset:start + offset + length]
            if len(payload) != length or zlib.crc32(payload) != crc:
                what = (f"key group {group}" if group >= 0 else
                        f"a base chunk of key groups {lo}..{hi - 1}")
                why = "truncated" if len(payload) != length else "checksum mismatch"
                raise CorruptSnapshotError(f"{where}: {what} is damaged ({why})")
            yield group, pickle.loads(payload)

    return header, sections()


def decode_segment(data: bytes, where: str, wanted: Iterable[int] | None = None
                   ) -> tuple[dict[str, Any], list[tuple[int, Any]]]:
    """The header and the unpickled ``(group, payload)`` sections of a segment
    (:func:`iter_segment`, all sections read and checked now).

    Raises:
        CorruptSnapshotError: naming the key group (or base range) that is damaged.
    """
    header, sections = iter_segment(data, where, wanted)
    return header, list(sections)


def split_delta(data: bytes) -> tuple[bytes, list[tuple[int, bytes]]] | None:
    """``(head, [(group, payload), ...])`` of a delta segment, ``head`` being its bytes up
    to the first payload (magic, header with the section index and checksums); None if
    ``data`` is not a well-formed delta (then it is stored whole). A backend that keeps a
    row per key group (HBase) stores the payloads apart; :func:`join_delta` reassembles."""
    try:
        header, start = _read_header(data, "segment")
    except CorruptSnapshotError:
        return None
    if header.get("kind") != "delta":
        return None
    parts: list[tuple[int, bytes]] = []
    at = start
    for group, offset, length, _crc in header.get("sections", []):
        if group < 0 or start + offset != at:
            return None
        parts.append((group, data[at:at + length]))
        at += length
    return (data[:start], parts) if at == len(data) else None


def join_delta(head: bytes, payloads: Mapping[int, bytes],
               wanted: Iterable[int] | None = None) -> bytes:
    """A delta segment from its ``head`` and key-group ``payloads`` (:func:`split_delta`):
    the original bytes when ``wanted`` is None, else a segment of the wanted key groups
    only (offsets renumbered, each payload's original checksum kept, so damage stored in
    a key group's row is still reported as that key group's).

    Raises:
        CorruptSnapshotError: the head is damaged, or a wanted key group has no payload.
    """
    header, _start = _read_header(head, "segment")
    want = None if wanted is None else set(wanted)
    if want is None:
        missing = [g for g, *_ in header["sections"] if g not in payloads]
        if missing:
            raise CorruptSnapshotError(f"key group(s) {missing} of the segment are missing")
        return head + b"".join(payloads[g] for g, *_ in header["sections"])
    index, body, offset = [], [], 0
    for group, _offset, length, crc in header["sections"]:
        if group not in want:
            continue
        payload = payloads.get(group)
        if payload is None:
            raise CorruptSnapshotError(f"key group {group} of the segment is missing")
        index.append([group, offset, length, crc])
        body.append(payload)
        offset += len(payload)
    text = json.dumps({**header, "sections": index}, sort_keys=True).encode()
    version = _HEAD.unpack_from(head)[1]  # the payloads keep the format they were written in
    return b"".join([_HEAD.pack(_MAGIC, version, len(text), zlib.crc32(text)), text, *body])


def restore_key_groups(backend: StateBackend, chain: list[dict[str, Any]],
                       groups: Iterable[int] | None, max_parallelism: int,
                       where: str = "") -> dict[str, dict[Any, Any]]:
    """The keyed state of key groups ``groups`` (all of the chain's if None), replayed
    from an incremental chain: the base, then every delta in checkpoint order.

    ``chain`` is ``snapshot["incremental"]["chain"]`` (several tasks' chains may be
    concatenated, e.g. after a rescale: segments are applied in checkpoint order and
    each only holds its own task's key groups). Pass ``groups=range(a, b)`` to restore
    key groups ``[a, b)`` only.

    Raises:
        CorruptSnapshotError: a segment is missing or damaged; the message names the
            checkpoint whose segment it is and the key group(s) that cannot be restored.
    """
    wanted = None if groups is None else set(groups)
    states: dict[str, dict[Any, Any]] = {}
    at = f" (restoring {where})" if where else ""
    for seg in sorted(chain, key=lambda s: (s["cid"], s["kind"] != "base")):
        lo, hi = seg.get("groups", [0, max_parallelism])
        if wanted is not None and not wanted.intersection(range(lo, hi)):
            continue
        label = (f"{seg['kind']} of checkpoint {seg['cid']} ({seg['key']}, key groups "
                 f"{lo}..{hi - 1})")
        try:
            data = backend.get_segment(seg["key"], wanted)
        except SnapshotNotFoundError as exc:
            raise MissingSegmentError(f"{label} is missing{at}: {exc}; the state of key "
                                      f"groups {lo}..{hi - 1} cannot be restored from "
                                      "this checkpoint") from exc
        _header, sections = iter_segment(data, label + at, wanted)
        for group, payload in sections:
            if group < 0:  # base chunk: whole dicts, filter by key group if asked
                for name, entries in payload.items():
                    target = states.setdefault(name, {})
                    if wanted is None or wanted.issuperset(range(lo, hi)):
                        target.update(entries)
                    else:
                        groups = key_groups_of(entries, max_parallelism)  # batched hash
                        target.update(itertools.compress(
                            entries.items(), map(wanted.__contains__, groups)))
                continue
            for name, (puts, dels) in payload.items():
                target = states.setdefault(name, {})
                for k in dels:
                    target.pop(k, None)
                if puts.__class__ is tuple:  # (keys, values); a version 1 segment: a dict
                    target.update(zip(*puts, strict=True))
                else:
                    target.update(puts)
    return states


def load_task_snapshot(backend: StateBackend, handle: str,
                       groups: Iterable[int] | None = None,
                       keep_native: bool = False) -> dict[str, Any]:
    """A task snapshot as a plain dict, with incremental keyed state replayed into
    ``snapshot["states"]`` (every reader of task snapshots goes through this).

    ``groups`` limits the replayed keyed state to those key groups. The chain stays
    under ``snapshot["incremental"]`` so the restored task can continue it. A RocksDB
    native checkpoint (``snapshot["rocksdb"]``, ``state_backends/rocksdb_files.py``) is
    read into ``snapshot["states"]`` too, unless ``keep_native`` (a restore that opens
    its files as they are).
    """
    from jstormpy.state_backends.rocksdb_files import materialise_into

    snap: dict[str, Any] = pickle.loads(backend.get_snapshot(handle))
    inc = snap.get("incremental")
    if inc:
        replayed = restore_key_groups(backend, inc["chain"], groups, inc["max_parallelism"],
                                      f"task snapshot {handle}")
        states = snap.setdefault("states", {})
        for name in inc.get("states", ()):
            if name not in states:  # a state written whole meanwhile is newer: keep it
                states[name] = replayed.get(name, {})
    if not keep_native:
        materialise_into(backend, snap, groups, f"task snapshot {handle}")
    return snap
