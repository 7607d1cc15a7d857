"""Rescaling a checkpoint: the state half of ``jstorm rescale`` (docs/rescaling.md).

The Topology Master takes a quiescent checkpoint ``n`` of the running layout, then calls
:func:`rescale_checkpoint` to write checkpoint ``m`` for the new layout: every component's
old task snapshots are redistributed to its new parallelism by key group
(:func:`jstormpy.keygroups.redistribute`), non-keyed state through the component's
``redistribute_state(old_states, new_parallelism)`` hook, and the progress fields that name
input channels (task ids shift when a parallelism changes) are reset. Checkpoint ``m`` is
committed by the caller writing the metadata this module returns.

:func:`plan_rescale` validates a request before anything is touched, so a refusal leaves
the running topology alone.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Mapping
from typing import Any

from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Topology
from jstormpy.keygroups import redistribute, redistribution_hook, resolve_max_parallelism
from jstormpy.state_backends import StateBackend
from jstormpy.state_backends.changelog import load_task_snapshot

__all__ = ["job_max_parallelism", "plan_rescale", "rescale_checkpoint"]


def job_max_parallelism(topology: Topology, configured: int) -> int:
    """The number of key groups the running job's state was written with."""
    return resolve_max_parallelism(configured, (s.parallelism
                                                for s in topology.components.values()))


def _has_custom_state(cls: type) -> bool:
    return callable(getattr(cls, "snapshot", None))


def plan_rescale(topology: Topology, changes: Mapping[str, int],
                 max_parallelism: int) -> Topology:
    """The topology with ``changes`` (component -> new parallelism) applied.

    Raises:
        JStormError: an unknown component, a parallelism below 1 or above
            ``max_parallelism``, or a component with non-keyed state
            (``snapshot()``/``restore()``) and no ``redistribute_state`` hook. The message
            names the component; nothing has been changed.
    """
    if not changes:
        raise JStormError("rescale needs at least one COMPONENT=PARALLELISM")
    specs = dict(topology.components)
    for name, value in changes.items():
        spec = specs.get(name)
        if spec is None:
            raise JStormError(f"rescale: no component {name!r} (components: "
                              f"{', '.join(specs)})")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise JStormError(f"rescale: component {name!r}: parallelism must be an int >= 1, "
                              f"got {value!r}")
        if value > max_parallelism:
            raise JStormError(
                f"rescale: component {name!r}: parallelism {value} exceeds the job's "
                f"max_parallelism {max_parallelism} (the number of key groups is fixed for "
                f"the life of the state; start from a savepoint with a larger "
                f"Config.max_parallelism instead)")
        if value == spec.parallelism:
            continue
        # a two-phase-commit sink rescales too: the rescale waits until every sink task
        # committed the quiescent checkpoint, so no transaction is open or staged when
        # its task ids change (master/rescale.py, step 3)
        if _has_custom_state(spec.cls) and redistribution_hook(spec.cls,
                                                               max_parallelism) is None:
            raise JStormError(
                f"rescale: component {name!r} ({spec.cls.__name__}) keeps non-keyed state "
                f"(snapshot()/restore()) and defines no redistribute_state(old_states, "
                f"new_parallelism) hook, so its state cannot be split over {value} tasks; "
                f"add the hook (docs/rescaling.md) or keep its parallelism at "
                f"{spec.parallelism}")
        specs[name] = dataclasses.replace(spec, parallelism=value)
    return Topology(topology.name, specs)


def _load_snapshot(backend: StateBackend, handle: str) -> dict[str, Any]:
    """A task snapshot with incremental keyed state replayed into it; the rescaled
    snapshot is written whole, so the chain it came from is not carried over."""
    snap = load_task_snapshot(backend, handle)
    snap.pop("incremental", None)
    return snap


def _reset_channels(snap: dict[str, Any], kind: str) -> dict[str, Any]:
    """Drop what names input channels or end-of-stream progress: task ids shift with the
    layout, and every spout re-sends end-of-stream after it restores."""
    if kind == "spout":
        snap["finished"] = False
        snap["eos_sent"] = False
    else:
        snap["eos_channels"] = []
        snap["channel_wm"] = {}
        snap["inputs_finished"] = False
        # the rescale waited for every sink to commit the quiescent checkpoint: nothing
        # pre-committed is left to re-commit, and the new task ids own no staged files
        snap["sink_pending"] = []
    return snap


def rescale_checkpoint(backend: StateBackend, checkpoint_id: int, old: Topology,
                       new: Topology, max_parallelism: int, new_id: int) -> dict[str, Any]:
    """Write the task snapshots of checkpoint ``new_id`` for layout ``new`` from completed
    checkpoint ``checkpoint_id`` of layout ``old``; returns the metadata that commits it.

    Raises:
        JStormError: a task snapshot is missing, or a hook failed (naming the component).
    """
    meta = backend.read_metadata(checkpoint_id)
    tasks = meta.get("tasks", {})
    old_ids, new_ids = old.task_ids(), new.task_ids()
    entries: dict[str, dict[str, Any]] = {}
    size = 0
    for name, spec in new.components.items():
        snaps = []
        for task_id in old_ids[name]:
            entry = tasks.get(str(task_id))
            if not entry or not entry.get("handle"):
                raise JStormError(f"checkpoint {checkpoint_id} has no snapshot of task "
                                  f"{task_id} ({name!r}); cannot rescale from it")
            snaps.append(_load_snapshot(backend, entry["handle"]))
        try:
            out = redistribute(name, snaps, len(new_ids[name]), max_parallelism,
                               redistribution_hook(spec.cls, max_parallelism),
                               keyed_state=not spec.is_sink)
        except JStormError:
            raise
        except Exception as exc:
            raise JStormError(f"rescale: {name}.redistribute_state failed: "
                              f"{type(exc).__name__}: {exc}") from exc
        for task_id, snap in zip(new_ids[name], out, strict=True):
            data = pickle.dumps(_reset_channels(snap, spec.kind),
                                protocol=pickle.HIGHEST_PROTOCOL)
            handle = backend.put_snapshot(new_id, task_id, data)
            entries[str(task_id)] = {"handle": handle, "size": len(data)}
            size += len(data)
    return {"generation": meta.get("generation", 0), "tasks": entries,
            "spouts_finished": False, "size_bytes": size,
            "completed_at": 0.0, "duration_ms": 0,
            "rescaled_from": checkpoint_id,
            "parallelism": {n: s.parallelism for n, s in new.components.items()}}
