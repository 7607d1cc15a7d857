"""Savepoints: self-contained, relocatable copies of a completed checkpoint.

A savepoint is written into any state-backend URI (file://, hdfs://, hbase://) as
objects with relative keys only (docs/savepoints.md), so copying them elsewhere keeps it
valid; checkpoint retention never touches it (it lives outside ``chk-*``):

- ``savepoint.json`` — the manifest: format, engine version, topology descriptor,
  ``max_parallelism``, source checkpoint id and, per component, its old parallelism,
  ``state_version`` and the key groups present;
- ``components/<name>/kg-<group>.state`` — managed keyed state of one key group,
  a pickled ``{state_name: {key: value}}``;
- ``components/<name>/task-<index>.state`` — the rest of old task ``index``'s snapshot
  (non-keyed ``custom`` state, spout/bolt progress), a pickled dict; it also holds the
  task's managed state whole (``states``) when the component's is not partitioned by key
  group (manifest ``state_layout: "task"``, e.g. a shuffle-fed bolt's partial counts).

Every object is sealed with a checksum like checkpoint blobs. :func:`import_savepoint`
turns a savepoint into a completed checkpoint of a new run's backend, redistributed by
key group to the new parallelism, so the Topology Master restores it as usual (and the
workers apply ``migrate_state`` when a component's ``state_version`` changed).
"""

from __future__ import annotations

import json
import pickle
import time
from typing import Any

from jstormpy.api.errors import CheckpointError, JStormError, ObjectExistsError
from jstormpy.api.topology import Topology
from jstormpy.keygroups import (
    check_max_parallelism,
    key_group_range,
    merge_key_groups,
    misplaced_key,
    redistribute,
    redistribution_hook,
    resolve_max_parallelism,
    split_by_key_group,
)
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.run_identity import RunIdentity, load_run_identity, store_run_identity
from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.state_backends.base import (
    CHECKPOINT_IDS_META,
    COMPLETED_META,
    open_blob,
    seal_blob,
)
from jstormpy.state_backends.changelog import load_task_snapshot
from jstormpy.version import __version__

FORMAT = "jstormpy-savepoint/1"
MANIFEST = "savepoint.json"
STATE_BY_KEY_GROUP = "key_groups"
"""A component's managed state is stored per key group (``kg-*.state``): it can move to
any parallelism. Savepoints without a ``state_layout`` (before 0.1.1) are all of this kind."""
STATE_BY_TASK = "task"
"""A component's managed state is not partitioned by key group (some task holds keys of
another task's groups): it stays whole in ``task-*.state`` and restores only at the same
parallelism."""


def _put(backend: StateBackend, key: str, obj: Any) -> None:
    backend.put_object(key, seal_blob(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)))


def _get(backend: StateBackend, key: str) -> Any:
    return pickle.loads(open_blob(backend.get_object(key), f"savepoint object {key!r}"))


def write_savepoint(source: StateBackend, checkpoint_id: int, topology: Topology,
                    target_uri: str, max_parallelism: int = 0,
                    **target_options: Any) -> str:
    """Copy completed checkpoint ``checkpoint_id`` of ``topology`` into a savepoint.

    Returns ``target_uri``. The manifest is written last: a savepoint without one is
    incomplete and refused on read.
    """
    # retention (in the TM) keeps a pinned checkpoint and the incremental segments it
    # references until the copy is done
    pin = source.pin_checkpoint(checkpoint_id)
    try:
        return _write_savepoint(source, checkpoint_id, topology, target_uri, max_parallelism,
                                **target_options)
    finally:
        source.unpin(pin)


def _write_savepoint(source: StateBackend, checkpoint_id: int, topology: Topology,
                     target_uri: str, max_parallelism: int, **target_options: Any) -> str:
    meta = source.read_metadata(checkpoint_id)
    tasks = topology.task_ids()
    max_p = resolve_max_parallelism(max_parallelism, (len(t) for t in tasks.values()))
    target = open_backend(target_uri, **target_options)
    try:
        components: dict[str, Any] = {}
        for name, task_ids in tasks.items():
            snaps = []
            for task_id in task_ids:
                entry = meta.get("tasks", {}).get(str(task_id))
                if not entry or not entry.get("handle"):
                    raise JStormError(f"checkpoint {checkpoint_id} has no snapshot of task "
                                      f"{task_id} ({name!r}); cannot write a savepoint")
                # incremental chains are replayed here: a savepoint never references them
                snap = load_task_snapshot(source, entry["handle"])
                snap.pop("incremental", None)
                check_max_parallelism(snap.get("max_parallelism"), max_p,
                                      f"component {name!r}, task {task_id}")
                snap["max_parallelism"] = max_p
                snaps.append(snap)
            # state keyed by the fields grouping moves by key group; state that is not (a
            # shuffle-fed bolt's partial values) stays whole with its task (hole 5)
            spec = topology.components[name]
            by_task = not spec.is_sink and any(
                misplaced_key(snap.get("states", {}), max_p, len(snaps), index)
                for index, snap in enumerate(snaps))
            groups: dict[int, dict[str, dict[Any, Any]]] = {}
            for index, snap in enumerate(snaps):
                if not by_task:
                    for g, part in split_by_key_group(snap.pop("states", {}), max_p).items():
                        group = groups.setdefault(g, {})
                        for state_name, entries in part.items():
                            group.setdefault(state_name, {}).update(entries)
                _put(target, f"components/{name}/task-{index:05d}.state", snap)
            for g, part in groups.items():
                _put(target, f"components/{name}/kg-{g:05d}.state", part)
            components[name] = {"parallelism": len(task_ids),
                                "state_version": getattr(spec.cls, "state_version", None),
                                "key_groups": sorted(groups),
                                "state_layout": STATE_BY_TASK if by_task else STATE_BY_KEY_GROUP}
        run = RunIdentity.from_dict(meta.get("run")) or load_run_identity(source)
        manifest = {"format": FORMAT, "engine_version": __version__,
                    "topology": topology.descriptor(), "max_parallelism": max_p,
                    "checkpoint_id": checkpoint_id, "created_at": time.time(),
                    "components": components, "run": run.to_dict() if run else None}
        target.put_object(MANIFEST, seal_blob(json.dumps(manifest, sort_keys=True).encode()))
    finally:
        target.close()
    return target_uri


def read_manifest(uri: str, **options: Any) -> dict[str, Any]:
    """The manifest of the savepoint at ``uri`` (JStormError if it has none)."""
    backend = open_backend(uri, **options)
    try:
        return _manifest(backend, uri)
    finally:
        backend.close()


def _manifest(backend: StateBackend, uri: str) -> dict[str, Any]:
    try:
        raw = open_blob(backend.get_object(MANIFEST), f"{MANIFEST} of {uri}")
    except JStormError as exc:
        raise JStormError(f"{uri} holds no complete savepoint ({exc})") from exc
    manifest: dict[str, Any] = json.loads(raw)
    if manifest.get("format") != FORMAT:
        raise JStormError(f"{uri}: unknown savepoint format {manifest.get('format')!r} "
                          f"(this engine reads {FORMAT})")
    return manifest


def describe(uri: str, **options: Any) -> str:
    """A human-readable summary of the savepoint at ``uri`` (``jstorm savepoint inspect``)."""
    m = read_manifest(uri, **options)
    lines = [f"savepoint {uri}",
             f"  format {m['format']}, engine {m['engine_version']}, topology "
             f"{m['topology']['name']!r}, from checkpoint {m['checkpoint_id']}",
             f"  max_parallelism {m['max_parallelism']}, created "
             f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(m['created_at']))} UTC"]
    for name, c in m["components"].items():
        lines.append(f"  {name}: parallelism {c['parallelism']}, state_version "
                     f"{c['state_version']!r}, {len(c['key_groups'])} key group(s) with state")
    return "\n".join(lines)


def old_task_snapshots(backend: StateBackend, manifest: dict[str, Any],
                       component: str) -> list[dict[str, Any]]:
    """The snapshots of ``component``'s old tasks, rebuilt from the savepoint objects."""
    info = manifest["components"][component]
    n, max_p = info["parallelism"], manifest["max_parallelism"]
    groups = {g: _get(backend, f"components/{component}/kg-{g:05d}.state")
              for g in info["key_groups"]}
    by_task = info.get("state_layout", STATE_BY_KEY_GROUP) == STATE_BY_TASK
    out = []
    for index in range(n):
        snap = _get(backend, f"components/{component}/task-{index:05d}.state")
        if not by_task:
            snap["states"] = merge_key_groups(groups, key_group_range(max_p, n, index))
        out.append(snap)
    return out


def _reserve_import_id(backend: StateBackend, savepoint_id: int) -> int:
    """The imported checkpoint's id, allocated like any checkpoint's
    (``CheckpointCoordinator.allocate_id``): above the savepoint's id, every checkpoint
    with objects in ``backend`` and every id the stored ids record reserved (a Topology
    Master still running on ``backend`` may hand any of those out), within a new ids
    record's reservation, stored before anything of the import is written. The earlier
    run's bad checkpoints and epochs are not carried over: its checkpoints are gone."""
    earlier = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                    tolerable_timeouts=0)
    stored = backend.get_meta(CHECKPOINT_IDS_META)
    if stored:
        try:
            earlier.adopt_ids_record(stored)
        except ValueError:
            pass  # unreadable: the listing and the savepoint's id still bound the ids
    ids = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                tolerable_timeouts=0)
    ids.ids_seen([savepoint_id, earlier.id_floor, *backend.list_checkpoint_ids()])
    ids.resume_after(ids.id_floor, 0.0)
    record = ids.ids_record()
    backend.put_meta(CHECKPOINT_IDS_META, record)
    ids.ids_record_stored(record)
    return ids.allocate_id()


def _check_still_ours(backend: StateBackend, run: RunIdentity, cid: int) -> None:
    """The fence after the import's commit point: the store still names ``run``."""
    stored = load_run_identity(backend)
    if stored is not None and stored != run:
        raise CheckpointError(
            f"{backend.uri} was taken over by {stored} while the savepoint was imported as "
            f"checkpoint {cid} of {run}: another restore or Topology Master runs on this "
            "state backend; stop it and restore again")


def check_fits(uri: str, manifest: dict[str, Any], topology: Topology,
               max_parallelism: int = 0, allow_non_restored_state: bool = False) -> int:
    """Whether ``topology`` can take the savepoint at ``uri`` (its ``manifest``); returns
    the number of key groups (``max_parallelism``) it restores with.

    Raises:
        JStormError: another ``max_parallelism``, or state of a component that no longer
            exists (unless ``allow_non_restored_state``).
    """
    tasks = topology.task_ids()
    max_p = resolve_max_parallelism(max_parallelism or manifest["max_parallelism"],
                                    (len(t) for t in tasks.values()))
    check_max_parallelism(manifest["max_parallelism"], max_p, f"savepoint {uri}")
    gone = sorted(set(manifest["components"]) - set(tasks))
    if gone and not allow_non_restored_state:
        raise JStormError(
            f"savepoint {uri} holds state of component(s) {', '.join(map(repr, gone))} "
            f"that the topology no longer has; pass --allow-non-restored-state "
            f"(allow_non_restored_state=True) to drop it")
    return max_p


def import_savepoint(uri: str, topology: Topology, backend: StateBackend,
                     max_parallelism: int = 0, allow_non_restored_state: bool = False,
                     run: RunIdentity | None = None, **options: Any) -> int:
    """Write the savepoint at ``uri`` into ``backend`` as a completed checkpoint of
    ``topology`` (possibly another parallelism); returns its checkpoint id.

    The commit point takes the one commit path (docs/checkpointing.md): its id is
    reserved in the ids record first, it is created and never replaced, stamped with
    ``run`` (the restored run's identity, already stored in ``backend``: a Topology Master
    of another run still writing there is fenced by it) and checked against the stored
    identity after the write, then stored as the completed floor.

    Raises:
        JStormError: state of a component that no longer exists (unless
            ``allow_non_restored_state``), another ``max_parallelism``, or non-keyed
            state that cannot be redistributed (the error names the component).
        CheckpointError: a commit point under the imported checkpoint's id exists
            already (another writer on ``backend``); it is left as it was.
    """
    source = open_backend(uri, **options)
    try:
        manifest = _manifest(source, uri)
        tasks = topology.task_ids()
        max_p = check_fits(uri, manifest, topology, max_parallelism, allow_non_restored_state)
        cid = _reserve_import_id(backend, int(manifest["checkpoint_id"]))
        entries: dict[str, dict[str, Any]] = {}
        for name, task_ids in tasks.items():
            if name not in manifest["components"]:
                continue
            spec = topology.components[name]
            snaps = redistribute(name, old_task_snapshots(source, manifest, name),
                                 len(task_ids), max_p, redistribution_hook(spec.cls, max_p),
                                 keyed_state=not spec.is_sink)
            for task_id, snap in zip(task_ids, snaps, strict=True):
                data = pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)
                handle = backend.put_snapshot(cid, task_id, data)
                entries[str(task_id)] = {"handle": handle, "size": len(data)}
        metadata: dict[str, Any] = {"generation": 0, "tasks": entries,
                                    "spouts_finished": False, "size_bytes": 0,
                                    "completed_at": time.time(), "duration_ms": 0,
                                    "from_savepoint": uri}
        if run is not None:
            metadata["run"] = run.to_dict()
        try:
            backend.create_metadata(cid, metadata)
        except ObjectExistsError as exc:
            raise CheckpointError(
                f"cannot import savepoint {uri} as checkpoint {cid}: a commit point of "
                f"checkpoint {cid} already exists in {backend.uri} (a Topology Master still "
                "writes to this state backend?). It was not replaced; stop that topology "
                "(jstorm kill NAME) and restore again") from exc
        if run is not None:
            _check_still_ours(backend, run, cid)
        # the restored run never restores below the savepoint: a listing that comes back
        # without it (a 404 on HDFS, an unmounted directory) waits instead of replaying
        # from nothing (found by the deterministic simulator; issue 23 hole 1's floor)
        backend.put_meta(COMPLETED_META, str(cid).encode())
        return cid
    finally:
        source.close()


def default_uri(home: Any, name: str, checkpoint_id: int) -> str:
    """Where ``handle.savepoint()`` writes without a URI: ``$JSTORM_HOME/savepoints/NAME/...``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"file://{home}/savepoints/{name}/sp-{checkpoint_id:06d}-{stamp}"


def savepoint_run(run_dir: Any, force_checkpoint: Any, uri: str | None, home: Any,
                  stop: Any = None, attempts: int = 3) -> str:
    """Savepoint a running topology: force a checkpoint, then copy it out of the run's
    backend (``run_dir`` holds topology.pkl and config.json). Retried with a newer
    checkpoint if retention deleted the forced one while it was being copied.

    With ``stop`` (a callable killing the topology), the topology is stopped right after
    the forced checkpoint and the savepoint is its last completed checkpoint, so no output
    is committed after the savepoint's position (restoring it then stays exactly-once)."""
    from pathlib import Path

    import cloudpickle

    from jstormpy.api.config import Config
    from jstormpy.api.errors import SnapshotNotFoundError

    run = Path(run_dir)
    topology = cloudpickle.loads((run / "topology.pkl").read_bytes())
    config = Config.from_dict(json.loads((run / "config.json").read_text()))
    backend = open_backend(config.state_backend, **config.state_backend_options)
    try:
        if stop is not None:
            force_checkpoint()
            stop()
            last = backend.latest_completed()
            if last is None:
                raise JStormError("the topology was stopped but has no completed checkpoint")
            return write_savepoint(backend, last, topology,
                                   uri or default_uri(home, topology.name, last),
                                   config.max_parallelism)
        for attempt in range(attempts):
            cid = force_checkpoint()
            target = uri or default_uri(home, topology.name, cid)
            try:
                return write_savepoint(backend, cid, topology, target, config.max_parallelism)
            except SnapshotNotFoundError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")
    finally:
        backend.close()


def check_restore_output(topology: Topology, checkpoint_id: int) -> None:
    """Before a savepoint restore touches anything: refuse sinks whose output already holds
    what the restored run would write (``FileSink.check_savepoint_restore``: part files
    committed after the savepoint's checkpoint ``checkpoint_id``, whose names the restored
    run's checkpoint ids would take again).

    Raises:
        SinkError: A sink's output is in use past the savepoint; the message names it.
    """
    for spec in topology.components.values():
        check = getattr(spec.obj, "check_savepoint_restore", None)
        if callable(check) and not isinstance(spec.obj, type):
            check(checkpoint_id)


def prepare_restore(uri: str, topology: Topology, config: Any,
                    allow_non_restored_state: bool = False) -> int:
    """Make ``config.state_backend`` start from the savepoint: drop its old checkpoints,
    import the savepoint as its only completed checkpoint and record the new run it starts
    (:meth:`RunIdentity.from_savepoint`); then submit with resume.

    Raises:
        SinkError: A sink's output already holds output written after the savepoint
            (:func:`check_restore_output`); nothing was changed.
        JStormError: The savepoint cannot be read or does not fit the topology.
    """
    manifest = read_manifest(uri)
    # before anything is changed: a refused restore leaves the run resumable
    check_fits(uri, manifest, topology, config.max_parallelism, allow_non_restored_state)
    check_restore_output(topology, int(manifest["checkpoint_id"]))
    backend = open_backend(config.state_backend, **config.state_backend_options)
    try:
        # first: a Topology Master of the earlier run still writing here is fenced from
        # now on (its check after a commit point sees another run)
        run = RunIdentity.from_savepoint(RunIdentity.from_dict(manifest.get("run")),
                                         int(manifest["checkpoint_id"]))
        store_run_identity(backend, run)
        backend.delete_objects("chk-")
        backend.delete_objects("inc/")  # incremental segments of the dropped checkpoints
        # the ids record is kept: the import's id goes above what it reserved
        return import_savepoint(uri, topology, backend, config.max_parallelism,
                                allow_non_restored_state, run=run)
    finally:
        backend.close()


def copy_savepoint(source_uri: str, target_uri: str, **target_options: Any) -> str:
    """Copy a savepoint to another place or backend kind (file://, hdfs://, hbase://);
    the manifest goes last, so an interrupted copy is not mistaken for a savepoint."""
    source = open_backend(source_uri)
    target = open_backend(target_uri, **target_options)
    try:
        _manifest(source, source_uri)
        keys = [k for k in source.list_objects("components/")]
        for key in keys + [MANIFEST]:
            target.put_object(key, source.get_object(key))
    finally:
        source.close()
        target.close()
    return target_uri
