"""Wiring one task of a worker: its restored component and the field index of its inputs.

Split out of :mod:`jstormpy.runtime.worker` (which builds the tasks of a generation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jstormpy.api.component import restore_finished, restore_managed_states
from jstormpy.api.topology import Topology
from jstormpy.keygroups import check_max_parallelism
from jstormpy.operations.codepkg import migrate_snapshot


def restore_component(comp: Any, snap: dict[str, Any] | None, max_parallelism: int,
                      where: str) -> dict[str, Any] | None:
    """Load a task's snapshot into its component, migrating it if the code changed.

    Args:
        comp: the freshly unpickled component instance.
        snap: the task's snapshot from the checkpoint, or None for a fresh task.
        max_parallelism: the job's number of key groups (must match the snapshot's).
        where: names the task in errors ("component 'count', task 7").

    Returns:
        The snapshot as restored (migrated by ``migrate_state`` when the component's
        ``state_version`` changed in a gray release), or None for a fresh task.
    """
    if snap is None:
        return None
    check_max_parallelism(snap.get("max_parallelism"), max_parallelism, where)
    migrated = migrate_snapshot(comp, snap)  # gray release: state_version changed
    if migrated is not snap:  # new state: the old increment chain no longer describes it
        migrated.pop("incremental", None)
    restore_managed_states(comp, migrated.get("states", {}))
    if "custom" in migrated and callable(getattr(comp, "restore", None)):
        comp.restore(migrated["custom"])
    if migrated.get("finished"):
        restore_finished(comp)
    return migrated


def input_field_index(topo: Topology, name: str, component_tasks: Mapping[str, Sequence[int]]
                      ) -> dict[tuple[int, str], tuple[str, dict[str, int]]]:
    """``(source task, stream) -> (source component, field -> position)`` for the inputs of
    component ``name``. Markers (barrier/watermark/eos) use stream "" and need no index."""
    source_index: dict[tuple[int, str], tuple[str, dict[str, int]]] = {}
    for g in topo.components[name].inputs:
        fields = topo.components[g.source].streams.get(g.stream, ())
        index = {f: i for i, f in enumerate(fields)}
        for t in component_tasks[g.source]:
            source_index[(t, g.stream)] = (g.source, index)
    return source_index
