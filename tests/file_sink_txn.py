"""One ``FileSink`` transaction driven by hand, as the engine drives a sink task: started
(pickled as it is shipped, prepared, recovered, transaction 1 open), then committed and
its one part file read back. The unit tests of the sink's write paths share it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle

from jstormpy.api.component import TopologyContext
from jstormpy.connectors.sinks import FileSink, committed_files


def started(sink: FileSink, wrap: Callable[[Any], Any] = lambda s: s) -> Any:
    """``sink`` as a task holds it (``wrap``: what the engine puts around it, e.g. the
    dataflow's sink adapter), with transaction 1 open."""
    task = wrap(cloudpickle.loads(cloudpickle.dumps(sink)))
    task.prepare({}, TopologyContext(topology="t", component="out", task_id=3, task_index=0,
                                     worker_id=0, generation=0))
    task.recover(None)
    task.begin(1)
    return task


def committed(sink: Any) -> bytes:
    """Commit transaction 1; the bytes of its part file."""
    sink.pre_commit(1)
    sink.commit(1)
    (part,) = committed_files(Path(sink.directory))
    return part.read_bytes()
