"""Topology-level backpressure (DESIGN §5, level 2), decided by the Topology Master.

Tasks report their input-queue fill (a level, not an edge) in every heartbeat. A task
whose fill reaches the high watermark becomes *congested*; it stays congested until its
fill falls to the low watermark (hysteresis, so throughput does not oscillate). The
spouts upstream of any congested task are throttled with **leases**: a throttle expires
``throttle_lease_ms`` after it was sent unless renewed, so a lost release can never
leave a spout stopped (JStorm issue #404); the TM renews leases every third of a lease
while the congestion lasts and sends an explicit release when it ends.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from jstormpy.faults import fault_enabled


def upstream_spouts(descriptor: Mapping[str, Any]) -> dict[str, set[int]]:
    """Component → the task ids of every spout upstream of it (transitively)."""
    comps = {c["name"]: c for c in descriptor["components"]}
    memo: dict[str, set[int]] = {}

    def visit(name: str) -> set[int]:
        if name not in memo:
            c = comps[name]
            found: set[int] = set(c["tasks"]) if c["kind"] == "spout" else set()
            for inp in c["inputs"]:
                found |= visit(inp["source"])
            memo[name] = found
        return memo[name]

    for name in comps:
        visit(name)
    return memo


class BackpressureCoordinator:
    """Decides which spouts to throttle from the reported queue levels."""

    def __init__(self, descriptor: Mapping[str, Any], high: float, low: float,
                 lease_ms: int, send_throttle: Callable[[list[int], bool, int], None]) -> None:
        self.task_component = {t: c["name"] for c in descriptor["components"]
                               for t in c["tasks"]}
        self.upstream = upstream_spouts(descriptor)
        self.high = high
        self.low = low
        self.lease_ms = lease_ms
        self.send_throttle = send_throttle
        self.fill: dict[int, float] = {}
        self.congested: dict[int, float] = {}
        self.throttled: set[int] = set()
        self.last_renewal = 0.0
        self.events: deque[dict[str, Any]] = deque(maxlen=100)
        self.throttle_count = 0

    def report(self, task_id: int, depth: int, capacity: int) -> None:
        """A task's queue level from a heartbeat."""
        if capacity > 0:
            self.fill[task_id] = depth / capacity

    def reset(self) -> None:
        """Forget levels and throttles (a new generation starts with empty queues)."""
        self.fill.clear()
        self.congested.clear()
        self.throttled.clear()

    def evaluate(self, now: float | None = None) -> None:
        """Update congestion with hysteresis and send throttles/renewals/releases."""
        now = time.monotonic() if now is None else now
        for task, fill in self.fill.items():
            if task in self.congested:
                if fill <= self.low:
                    del self.congested[task]
                    self._event("cleared", task, fill)
                else:
                    self.congested[task] = fill
            elif fill >= self.high:
                self.congested[task] = fill
                self._event("congested", task, fill)
        wanted: set[int] = set()
        for task in self.congested:
            wanted |= self.upstream.get(self.task_component.get(task, ""), set())
        released = self.throttled - wanted
        new = wanted - self.throttled
        if released:
            if not fault_enabled("drop_throttle_release"):
                self.send_throttle(sorted(released), True, 0)
            self.events.append({"time": time.time(), "action": "release",
                                "spouts": sorted(released)})
        renew_due = now - self.last_renewal >= self.lease_ms / 3000.0
        if wanted and (new or renew_due):
            self.send_throttle(sorted(wanted), False, self.lease_ms)
            self.last_renewal = now
            if new:
                self.throttle_count += 1
                self.events.append({"time": time.time(), "action": "throttle",
                                    "spouts": sorted(new), "reason": self.reason()})
        self.throttled = wanted

    def reason(self) -> str:
        """Why spouts are throttled, naming the bottleneck tasks."""
        if not self.congested:
            return ""
        worst = sorted(self.congested.items(), key=lambda kv: -kv[1])[:3]
        return "input queue of " + ", ".join(
            f"task {t} ({self.task_component.get(t)}) {f:.0%} full" for t, f in worst)

    def _event(self, action: str, task: int, fill: float) -> None:
        self.events.append({"time": time.time(), "action": action, "task": task,
                            "component": self.task_component.get(task), "fill": round(fill, 3)})

    def status(self) -> dict[str, Any]:
        """What `jstorm status` shows about backpressure."""
        bottleneck = max(self.fill.items(), key=lambda kv: kv[1], default=(None, 0.0))
        return {
            "congested": {str(t): round(f, 3) for t, f in sorted(self.congested.items())},
            "throttled_spouts": sorted(self.throttled),
            "reason": self.reason(),
            "bottleneck_task": bottleneck[0],
            "bottleneck_fill": round(bottleneck[1], 3),
            "throttle_count": self.throttle_count,
            "events": list(self.events)[-20:],
            "high_watermark": self.high, "low_watermark": self.low,
            "lease_ms": self.lease_ms,
        }
