"""Metrics history kept in the Topology Master: the last hour at 10 s resolution.

A :class:`MetricsHistory` samples a :class:`~jstormpy.master.core.MasterCore` every
``interval_s`` (rates, latency percentiles from merged buckets, queue fill, worker memory,
generation) into a bounded ring. It also watches the core for operational *events*
(worker lost / restarted with a new PID, generation changes, state changes, live
log-level changes) at a finer
period, so the UI can show failures that are over before a person looks.
Served by ``master/http.py`` at ``/api/history``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from jstormpy.master.ops import live_log_levels
from jstormpy.master.topology_state import TopologyState

DEFAULT_INTERVAL_S = 10.0
DEFAULT_WINDOW_S = 3600.0


def _component_point(agg: dict[str, Any]) -> dict[str, Any]:
    return {"emit_rate": agg["emit_rate"], "execute_rate": agg["execute_rate"],
            "max_queue_fill": agg["max_queue_fill"], "latency_ms_p50": agg["latency_ms_p50"],
            "latency_ms_p99": agg["latency_ms_p99"], "errors": agg["errors"],
            "emitted": agg["emitted"], "executed": agg["executed"]}


class MetricsHistory:
    """Bounded time series of topology metrics plus an operational event log."""

    def __init__(self, core: Any, interval_s: float = DEFAULT_INTERVAL_S,
                 window_s: float = DEFAULT_WINDOW_S, watch_s: float = 0.1,
                 clock: Callable[[], float] = time.time) -> None:
        self.core = core
        self.interval_s = interval_s
        self.window_s = window_s
        self.watch_s = watch_s
        self.clock = clock
        self.points: deque[dict[str, Any]] = deque(maxlen=max(1, int(window_s / interval_s)))
        self.events: deque[dict[str, Any]] = deque(maxlen=200)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sample = float("-inf")
        self._workers: dict[int, tuple[bool, int | None]] = {}
        self._generation: int | None = None
        self._state: str | None = None
        self._log_levels: dict[str, str] = {}

    # -- sampling -------------------------------------------------------------------------
    def sample(self) -> dict[str, Any]:
        """Take one history point now (also called by the sampler thread)."""
        core = self.core
        with core.lock:
            snap = core.metrics.snapshot()
            workers = {str(s.worker_id): {"rss_bytes": s.rss_bytes,
                                          "cpu_percent": s.cpu_percent, "alive": s.alive}
                       for s in core.sessions.values()}
            last = core.checkpoints.last_completed or {}
            point = {
                "time": self.clock(), "state": core.state, "generation": core.generation,
                "restarts": core.restarts,
                "topology": _component_point(snap["topology"]),
                "components": {c: _component_point(a) for c, a in snap["components"].items()},
                "workers": workers,
                "last_checkpoint": {"id": last.get("id"), "duration_ms": last.get("duration_ms"),
                                    "size_bytes": last.get("size_bytes")},
            }
        with self.lock:
            self.points.append(point)
        return point

    def watch(self) -> list[dict[str, Any]]:
        """Compare the core with what was seen last; record and return new events."""
        core = self.core
        new: list[dict[str, Any]] = []
        now = self.clock()
        with core.lock:
            gen, state = core.generation, core.state
            sessions = {wid: (s.alive, s.pid) for wid, s in core.sessions.items()}
            recovery_reason = core.recovery_reason
        # the TM prepares workers in its "recovering" state on a fresh start too; say
        # what a user sees there: the topology is starting, not recovering
        starting = recovery_reason in ("start", "resume") and \
            self._state in (None, TopologyState.STARTING, "starting workers")
        shown = "starting workers" if starting and state == TopologyState.RECOVERING else state
        if self._generation is not None and gen != self._generation and not starting:
            new.append({"time": now, "kind": "generation", "generation": gen,
                        "message": f"generation {gen}: {recovery_reason}"})
        if self._state is not None and shown != self._state:
            new.append({"time": now, "kind": "state", "generation": gen,
                        "message": f"topology {self._state} -> {shown}"})
        for wid, (alive, pid) in sorted(sessions.items()):
            was = self._workers.get(wid)
            if was is None:
                self._workers[wid] = (alive, pid)
                continue
            was_alive, was_pid = was
            if was_alive and (not alive or pid != was_pid):
                new.append({"time": now, "kind": "worker_failed", "worker": wid,
                            "pid": was_pid, "generation": gen,
                            "message": f"worker {wid} failed (pid {was_pid})"})
            if alive and (not was_alive or pid != was_pid):
                new.append({"time": now, "kind": "worker_recovered", "worker": wid,
                            "pid": pid, "generation": gen,
                            "message": f"worker {wid} recovered (new pid {pid})"})
            self._workers[wid] = (alive, pid)
        self._generation, self._state = gen, shown
        levels = live_log_levels(core)
        for component, level in levels.items():
            if self._log_levels.get(component) != level:
                new.append({"time": now, "kind": "log_level", "component": component,
                            "generation": gen,
                            "message": f"log level of {component or 'every component'} "
                                       f"set to {level}"})
        self._log_levels = levels
        if new:
            with self.lock:
                self.events.extend(new)
        return new

    # -- thread ---------------------------------------------------------------------------
    def start(self) -> None:
        """Sample and watch in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="metrics-history", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the sampler thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _run(self) -> None:
        while not self._stop.wait(self.watch_s):
            try:
                self.watch()
                now = time.monotonic()
                if now - self._last_sample >= self.interval_s:
                    self._last_sample = now
                    self.sample()
            except Exception:  # never let the UI kill the TM
                import logging

                logging.getLogger("jstormpy.master.history").exception("history sampling failed")

    # -- reading --------------------------------------------------------------------------
    def to_dict(self, since: float = 0.0) -> dict[str, Any]:
        """Points (and events) newer than ``since`` (epoch seconds), JSON-serialisable."""
        with self.lock:
            return {"interval_s": self.interval_s, "window_s": self.window_s,
                    "points": [p for p in self.points if p["time"] > since],
                    "events": [e for e in self.events if e["time"] > since]}
