"""Which channels exist between tasks, and which tasks run chained into their upstream.

A channel ``src → dst`` carries data, barriers, watermarks and end-of-stream, in order
(DESIGN §5). A grouping may send any tuple to any task of the consumer, so each emitting
task has a channel to every consumer task, and each consumer task aligns barriers and
tracks watermarks over every emitting task.

**Chaining** (Flink's operator chaining): a bolt whose only subscription is
``local_or_shuffle`` and whose tasks pair up one to one with the source's tasks, worker by
worker (each worker that hosts either hosts exactly one task of each), gets exactly one
input: the source task in its own worker, which is the only task that ever sends it a
tuple. Its channels are then *pointwise*: the pair is connected, nothing else is (no
barrier from the other workers to align on). And the consumer runs in its source's
thread: the source's batch goes straight into the consumer's ``execute`` path, with no
queue, no credit and no thread hand-off (``TaskExecutor.run_chained``). In the word
count, ``lines → split`` and ``count → sink`` chain; the fields-grouped ``split → count``
does not. ``Config(chaining=False)`` turns it off (every channel, every task in its own
thread, as before).

Every worker computes the same plan from the topology, the config and the task placement
of the generation (``task_workers`` of ``Prepare``), so both ends of every channel agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def chain_pairs(spec: Any, component_tasks: Mapping[str, Sequence[int]],
                task_workers: Mapping[int, int]) -> dict[int, int] | None:
    """Consumer task → the source task it runs chained into, if ``spec`` chains."""
    if spec.kind != "bolt" or len(spec.inputs) != 1 or spec.inputs[0].kind != "local_or_shuffle":
        return None
    sources = component_tasks[spec.inputs[0].source]
    consumers = component_tasks[spec.name]
    by_worker: dict[int | None, tuple[list[int], list[int]]] = {}
    for t in sources:
        by_worker.setdefault(task_workers.get(t), ([], []))[0].append(t)
    for t in consumers:
        by_worker.setdefault(task_workers.get(t), ([], []))[1].append(t)
    if None in by_worker or any(len(s) != 1 or len(c) != 1 for s, c in by_worker.values()):
        return None
    return {c[0]: s[0] for s, c in by_worker.values()}


def chain_plan(components: Mapping[str, Any], component_tasks: Mapping[str, Sequence[int]],
               task_workers: Mapping[int, int], enabled: bool) -> dict[int, int]:
    """Every chained consumer task → its source task (empty when chaining is off)."""
    plan: dict[int, int] = {}
    if enabled:
        for spec in components.values():
            plan.update(chain_pairs(spec, component_tasks, task_workers) or {})
    return plan


def input_channels(components: Mapping[str, Any], component_tasks: Mapping[str, Sequence[int]],
                   chained: Mapping[int, int]) -> dict[int, tuple[int, ...]]:
    """Every task → the emitting tasks it has input channels from (sorted; a spout: ())."""
    inputs: dict[int, tuple[int, ...]] = {}
    for name, spec in components.items():
        every = tuple(sorted({t for g in spec.inputs for t in component_tasks[g.source]}))
        for t in component_tasks[name]:
            inputs[t] = (chained[t],) if t in chained else every
    return inputs


def output_targets(task_id: int, targets: Sequence[int], chained: Mapping[int, int]
                   ) -> list[int]:
    """The consumer tasks among ``targets`` that task ``task_id`` has channels to."""
    if any(t in chained for t in targets):  # a chained subscription: only its pair
        return [t for t in targets if chained.get(t) == task_id]
    return list(targets)
