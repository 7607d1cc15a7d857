"""Seeded, reproducible SIGKILL schedules (part of :mod:`jstormpy.testing.chaos`).

A :class:`ChaosSchedule` is a list of :class:`Kill` events drawn from a seed:

* ``Kill("worker", at_s=1.2, worker=1)`` — SIGKILL worker 1 about 1.2 s after start;
* ``Kill("master", at_s=0.8)`` — SIGKILL the Topology Master (the launcher restarts it
  with ``--resume``);
* ``Kill("point", point="after_snapshot", checkpoint=3, worker=0)`` — the process kills
  itself at a precise protocol moment (see :mod:`jstormpy.faults`): during a checkpoint,
  between checkpoint completion and sink commit, after the TM's commit point.

Run one with :func:`run_with_chaos`, or start a :class:`ChaosMonkey` on a handle.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from jstormpy.faults import POINTS
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState


@dataclass(frozen=True)
class Kill:
    """One kill: of a worker or the TM at a time, or at a protocol point."""

    target: str  # "worker" | "master" | "point"
    at_s: float = 0.0
    worker: int | None = None
    point: str = ""
    checkpoint: int = 0

    def describe(self) -> str:
        """Human-readable form."""
        if self.target == "point":
            who = ("master" if self.point == "master_after_metadata" else
                   "any worker" if self.worker is None else f"worker {self.worker}")
            return f"{who} at {self.point} of checkpoint {self.checkpoint}"
        who = "master" if self.target == "master" else f"worker {self.worker}"
        return f"{who} at {self.at_s:.2f} s"


@dataclass(frozen=True)
class ChaosSchedule:
    """A reproducible list of kills."""

    seed: int
    kills: tuple[Kill, ...] = field(default_factory=tuple)

    @classmethod
    def random(cls, seed: int, kills: int = 2, window_s: tuple[float, float] = (0.3, 2.0),
               workers: int = 2, master: bool = False, points: bool = False,
               max_checkpoint: int = 4) -> ChaosSchedule:
        """Draw ``kills`` kills from ``seed``: random times within ``window_s``, optionally
        including the TM and protocol points."""
        rng = random.Random(seed)
        out: list[Kill] = []
        kinds = ["worker"] + (["master"] if master else []) + (["point"] if points else [])
        t = window_s[0]
        for _ in range(kills):
            kind = rng.choice(kinds)
            t += rng.uniform(0.0, (window_s[1] - window_s[0]) / max(kills, 1))
            if kind == "worker":
                out.append(Kill("worker", round(t, 3), worker=rng.randrange(workers)))
            elif kind == "master":
                out.append(Kill("master", round(t, 3)))
            else:
                point = rng.choice(POINTS)
                out.append(Kill("point", point=point, checkpoint=rng.randint(1, max_checkpoint),
                                worker=rng.randrange(workers) if point == "after_snapshot"
                                else None))
        return cls(seed, tuple(out))

    def describe(self) -> str:
        """Human-readable form."""
        return f"seed {self.seed}: " + "; ".join(k.describe() for k in self.kills)

    def environment(self, fault_dir: str) -> dict[str, str]:
        """Environment that arms this schedule's protocol-point kills."""
        armed = []
        for k in self.kills:
            if k.target == "point":
                armed.append(f"{k.point}@{k.checkpoint}" +
                             (f"@{k.worker}" if k.worker is not None else ""))
        if not armed:
            return {}
        return {"JSTORM_FAULTS": ",".join(armed), "JSTORM_FAULT_DIR": fault_dir}


class ChaosMonkey:
    """Carries out the timed kills of a schedule against a running topology."""

    def __init__(self, handle: Any, schedule: ChaosSchedule) -> None:
        self.handle = handle
        self.schedule = schedule
        self.done: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def start(self) -> None:
        """Start the kill timer (it begins when the topology first reaches ``running``)."""
        self._t0 = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop (kills not yet due are skipped)."""
        self._stop.set()
        self._thread.join(5)

    def _pid(self, kill: Kill) -> int | None:
        launcher = self.handle.launcher
        if launcher is None:
            return None
        if kill.target == "worker" and kill.worker not in launcher.workers:
            # workers that are not the launcher's children (Spark tasks): the TM knows pids
            return next((w.pid for w in self.handle.workers()
                         if w.id == kill.worker and w.alive and w.pid), None)
        with launcher.lock:
            if kill.target == "master":
                return launcher.master.pid if launcher.master else None
            proc = launcher.workers.get(kill.worker)
            return proc.pid if proc is not None and proc.poll() is None else None

    def _wait_running(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                if self.handle.status().get("state") == TopologyState.RUNNING:
                    return
            except Exception:
                pass
            self._stop.wait(0.01)

    def _run(self) -> None:
        # kill times count from the moment the topology first runs (all workers registered)
        self._wait_running()
        self._t0 = time.monotonic()
        for kill in sorted((k for k in self.schedule.kills if k.target != "point"),
                           key=lambda k: k.at_s):
            if self._stop.wait(max(self._t0 + kill.at_s - time.monotonic(), 0)):
                return
            try:
                state = self.handle.status().get("state")
            except Exception:
                state = "unknown"
            if state in TERMINAL_STATES:
                self.done.append(f"skipped {kill.describe()} (topology already {state})")
                continue
            pid = self._pid(kill)
            if pid is None:
                self.done.append(f"skipped {kill.describe()} (process not running)")
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                self.done.append(f"SIGKILLed {kill.describe()} (pid {pid})")
            except ProcessLookupError:
                self.done.append(f"skipped {kill.describe()} (already gone)")


_FAULT_WORDS = {
    "after_snapshot": "{who} was SIGKILLed right after a task wrote its snapshot for "
                      "checkpoint {cid}",
    "after_segment": "{who} was SIGKILLed right after writing an incremental segment of "
                     "checkpoint {cid}",
    "during_sst_upload": "{who} was SIGKILLed in the middle of uploading the SST files of "
                         "checkpoint {cid}",
    "sink_before_commit": "{who} was SIGKILLed in a sink between pre-commit and commit of "
                          "checkpoint {cid}",
    "sink_after_commit": "{who} was SIGKILLed in a sink right after committing checkpoint "
                         "{cid}",
    "master_after_metadata": "the Topology Master was SIGKILLed right after writing the "
                             "metadata (the commit point) of checkpoint {cid}",
    "rescale_after_commit": "the Topology Master was SIGKILLed right after committing a "
                            "rescale",
}


def describe_fired_fault(marker: str) -> str:
    """A fired fault point's marker (``point@checkpoint@worker``, see
    :func:`jstormpy.faults.fault_point`) in words: ``point@checkpoint (what happened)``."""
    point, _, rest = marker.partition("@")
    cid, _, wid = rest.partition("@")
    who = "a worker" if wid in ("", "None") else f"worker {wid}"
    words = _FAULT_WORDS.get(point, "{who} was SIGKILLed at fault point " + point)
    return f"{point}@{cid} ({words.format(who=who, cid=cid)})"


def run_with_chaos(topology: Any, config: Any, schedule: ChaosSchedule, timeout: float = 120,
                   home: str | None = None) -> tuple[dict[str, Any], list[str], Any]:
    """Run ``topology`` to completion under ``schedule``.

    Returns (final status, the kills carried out, final metrics).
    """
    from jstormpy.deploy.local import LocalCluster

    fault_dir = tempfile.mkdtemp(prefix="jstorm-faults-")
    try:
        env = schedule.environment(fault_dir)
        with LocalCluster(home=home, env=env) as cluster:
            handle = cluster.submit(topology, config)
            monkey = ChaosMonkey(handle, schedule)
            monkey.start()
            try:
                status = handle.wait(timeout=timeout)
            finally:
                monkey.stop()
            metrics = handle.metrics()
        fired = sorted(os.listdir(fault_dir))
    finally:  # the workers are gone: nothing writes a marker any more
        shutil.rmtree(fault_dir, ignore_errors=True)
    return status, monkey.done + [f"fault point fired: {describe_fired_fault(f)}"
                                  for f in fired], metrics
