"""One task's checkpoint path without processes, for tests and ``bench/incremental_bench.py``.

:class:`TaskCheckpointer` does what a task executor and the Topology Master do for one
stateful task at a checkpoint — capture on the "task thread", serialise and upload
(incremental segment first when ``Config.incremental_checkpoints``), then commit the
checkpoint metadata — against any state backend.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jstormpy.api.component import Bolt, managed_states, restore_managed_states
from jstormpy.api.config import Config
from jstormpy.runtime.incremental import IncrementalKeyedState, make_incremental
from jstormpy.runtime.snapshots import capture, serialise_stream, verify
from jstormpy.state_backends.base import StateBackend
from jstormpy.state_backends.changelog import load_task_snapshot


class KeyedCounter(Bolt):
    """A bolt whose only state is managed keyed state ``counts``."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        """Bind ``self.counts``."""
        self.counts = self.state("counts")


@dataclass(frozen=True)
class CheckpointResult:
    """One checkpoint of one task."""

    handle: str
    bytes_written: int
    """Snapshot plus segment bytes."""
    capture_s: float
    """Time on the task thread (the processing pause)."""
    total_s: float
    """Capture, serialisation, upload and metadata."""
    kind: str
    """"full" (no incremental checkpoints), "base" or "delta"."""
    cpu_s: float = 0.0
    """CPU time of this process over the whole checkpoint (less sensitive to a loaded
    machine than ``total_s``)."""


class TaskCheckpointer:
    """Checkpoints one task's managed keyed state into ``backend`` like the runtime does."""

    def __init__(self, backend: StateBackend, config: Config, task_id: int = 0,
                 key_groups: range | None = None, max_parallelism: int = 128,
                 restored: dict[str, Any] | None = None, generation: int = 0,
                 component: Any = None) -> None:
        self.backend = backend
        self.task_id = task_id
        self.generation = generation
        self.max_parallelism = max_parallelism
        self.comp = component if component is not None else KeyedCounter()
        if restored is not None:
            restore_managed_states(self.comp, restored.get("states", {}))
        self.inc: IncrementalKeyedState | None = make_incremental(
            self.comp, task_id, key_groups or range(max_parallelism), max_parallelism,
            config, restored)
        self.verified: set[str] = set()  # like TaskExecutor.verified_states
        if hasattr(self.comp, "prepare"):
            self.comp.prepare({}, None)

    @property
    def states(self) -> dict[str, Any]:
        """The task's managed state dicts by name."""
        return managed_states(self.comp)

    def checkpoint(self, checkpoint_id: int, commit: bool = True) -> CheckpointResult:
        """Snapshot, upload and (if ``commit``) write the checkpoint metadata.

        The steps the runtime splits between the task thread (capture, until ``t1``) and
        the task's snapshot thread (segment, serialisation, upload) run back to back
        here, then the metadata write the TM does once every task acked: ``total_s`` is
        the barrier-to-committed time of an idle task, which is what a user waits for."""
        t0 = time.perf_counter()
        c0 = time.process_time()
        snap: dict[str, Any] = {"states": self.states, "max_parallelism": self.max_parallelism}
        cap = self.inc.capture(snap) if self.inc is not None else None
        view = capture(snap, self.verified)
        t1 = time.perf_counter()
        verify(view)  # the type scan the capture skipped (snapshot thread)
        refs = None
        seg_bytes = 0
        kind = "full"
        if cap is not None and self.inc is not None:
            entry, refs, seg_bytes = self.inc.write(self.backend, cap, checkpoint_id,
                                                    self.generation)
            view.extra = {"incremental": entry}
            kind = cap.kind
        stream = serialise_stream(view)  # written as it is made, as the runtime does
        handle = self.backend.put_snapshot(checkpoint_id, self.task_id, stream,
                                           self.generation, refs=refs)
        if commit:
            self.backend.create_metadata(checkpoint_id, {
                "tasks": {str(self.task_id): {"handle": handle, "size": stream.size}}})
        t2 = time.perf_counter()
        return CheckpointResult(handle, stream.size + seg_bytes, t1 - t0, t2 - t0, kind,
                                time.process_time() - c0)

    def compact_next(self) -> None:
        """Make the next checkpoint write a new base (a compaction)."""
        if self.inc is not None:
            self.inc.need_base = True

    def restore(self, checkpoint_id: int, groups: range | None = None) -> dict[str, Any]:
        """The task snapshot of a committed checkpoint, chain replayed."""
        handle = self.backend.read_metadata(checkpoint_id)["tasks"][str(self.task_id)]["handle"]
        return load_task_snapshot(self.backend, handle, groups)
