"""One connected worker, as the Topology Master sees it: its control stream's session."""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from typing import Any

from jstormpy.proto import jstorm_pb2 as pb


@dataclass
class WorkerSession:
    """One connected worker (one control stream)."""

    worker_id: int
    pid: int
    host: str
    port: int
    code_version: str
    outq: queue.Queue[Any] = field(default_factory=queue.Queue)
    alive: bool = True
    last_seen: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    registered_mono: float = field(default_factory=time.monotonic)
    rss_bytes: int = 0
    cpu_percent: float = 0.0
    generation: int = 0
    launch_attempt: int = 0  # the deployer's launch attempt (Spark job attempt), 0 = untracked

    def send(self, **body: Any) -> None:
        """Queue one MasterMessage for this worker."""
        self.outq.put(pb.MasterMessage(**body))
