"""Seeded fault scenarios: one topology, one fault, real processes, an exactly-once check.

A :class:`Scenario` is drawn from a seed (:meth:`Scenario.draw`): the topology (see
:mod:`jstormpy.testing.chaos.topologies`), the fault class and every parameter of the fault
(which worker, when, for how long). The same seed always gives the same scenario.
:func:`run_scenario` runs it on a :class:`~jstormpy.LocalCluster` and returns a
:class:`ScenarioResult`: events lost, duplicated and reordered in the committed output,
state differences against a batch recomputation, and the recovery time.

Fault classes (:data:`FAULT_KINDS`):

``kill``
    SIGKILL of a worker (or, one time in four, the Topology Master).
``reset``
    TCP RST, three times, on the connections between two workers: ``on="data"`` (A's
    frames to B), ``"credit"`` (B's connection back to A, which carries B's credit returns)
    or ``"both"`` — through :class:`~jstormpy.testing.chaos.network.ChaosNetwork` proxies.
    If the drawn pair carries no traffic (small topologies do not connect every pair), the
    first busy pair in an order drawn from the seed is used instead.
``partition``
    A worker cut off from its peers, the TM or both for a while (bytes stop flowing, new
    connections are refused), then healed.
``stall``
    SIGSTOP of a worker for longer than ``worker_timeout_ms``, then SIGCONT: a zombie that
    wakes up after the TM has given up on it.
``backend_hang`` / ``backend_slow``
    The checkpoint store (WebHDFS test server) behind a proxy that accepts connections and
    answers nothing for a while, or answers every chunk late.
``disk_full``
    The sink's output directory runs out of space (a small tmpfs filled by a ballast file,
    when run as root) or becomes unwritable (read-only permissions, otherwise) for a while.
``tm_kill_during_upgrade``
    A gray release (``handle.upgrade(..., n=1)``) is started and the TM is SIGKILLed once
    the switch has begun (0-0.4 s into it).
``kill_during_drain``
    A worker is SIGKILLed after a spout has finished its input, while the job drains (its
    FileSink's pre-commit made slow, :data:`DRAIN_COMMIT_PAUSE_S`, so the drain lasts).
``listing_error``
    The checkpoint store (WebHDFS test server) answers 404 for every listing of its
    checkpoint root for a while, and a worker is SIGKILLed as it begins: the recovery
    must wait for the listing, not read it as "no checkpoints" (issue 23 hole 1).
``metadata_write_error``
    Every ``_metadata`` write to the checkpoint store (WebHDFS test server) fails; once
    one has (its checkpoint's sink transactions are pre-committed), a worker is SIGKILLed,
    and the writes heal as the recovery begins: the sinks must recover to the restored
    checkpoint, not commit the one whose metadata never landed (issue 23 hole 2). Always
    the ``stateful`` job, its output also written to a real PostgreSQL (when installed)
    through a two-phase-commit ``PostgresSink`` and checked the same way.
``tm_generation_write_error``
    Every write of the TM's generation counter to the checkpoint store fails; a worker is
    SIGKILLed, so the recovery cannot store its new generation: it must wait (not prepare
    any worker under it, watched for :data:`GENERATION_WAIT_S`); the TM is then SIGKILLed
    and the writes heal: the restarted TM (``--resume``) must not hand out a generation
    twice (issue 23 hole 7).
``fresh_run_into_used`` / ``savepoint_into_used``
    After the job drained (it recovered once from a worker SIGKILL, so its generation
    passed 1) or, for the savepoint, was stopped a checkpoint after a savepoint taken
    while it ran, it is submitted again into the same FileSink directory, fresh or
    restored from the savepoint: the submit must be refused naming the directory,
    touching nothing. The fresh run then goes into an empty directory and the same,
    used, PostgreSQL table, Redis stream and Kafka topic (the ``stateful`` job writes to
    all four; :mod:`jstormpy.testing.chaos.brokers`), the worker of a Kafka sink task
    SIGKILLing itself in a sink between complete and commit of checkpoint 2: it must not
    be fenced by the first run's fence rows, nor take the first run's commit log for its
    own, and each run's output must be exactly once in each of them; the savepoint is
    restored into an empty directory and checked with the output up to it (issue 23
    holes 3 and 4; :mod:`jstormpy.testing.chaos.reuse`).
``rescale_unkeyed_state``
    On the ``shuffled`` topology, a live rescale of the shuffle-fed counter to another
    parallelism (must be refused naming the component and state, the job going on) or of
    its sink (must be exact): issue 23 hole 5.

Recovery time: from the end of the fault (the kill, the last reset, the heal, the SIGCONT)
until the TM next completes a checkpoint (or the job has drained): how long exactly-once
progress stops, as a user would see it.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jstormpy.api.config import Config
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.testing.chaos.brokers import BrokerServers, start_brokers
from jstormpy.testing.chaos.disk import FullDisk
from jstormpy.testing.chaos.network import PARTITION_FROM, RESET_ON, ChaosNetwork
from jstormpy.testing.chaos.reuse import (
    REUSE_KINDS,
    SecondRun,
    second_run,
    second_run_environment,
    take_savepoint,
)
from jstormpy.testing.chaos.topologies import (
    ALL_TOPOLOGIES,
    SHUFFLED,
    TOPOLOGIES,
    Verdict,
    build_topology,
    check_output,
    check_postgres,
    create_postgres_table,
    postgres_last_row,
)

FAULT_KINDS = ("kill", "reset", "partition", "stall", "backend_hang", "backend_slow",
               "disk_full", "tm_kill_during_upgrade", "kill_during_drain", "listing_error",
               "metadata_write_error", "tm_generation_write_error", *REUSE_KINDS,
               "rescale_unkeyed_state")
"""Every fault class :func:`run_scenario` injects."""
_SEEDED_KINDS = FAULT_KINDS[:10]
"""The classes before issue 23's: a seed's parameters are drawn as they were then."""
RESCALE_TO = ("other", "same")
"""``rescale_unkeyed_state``: the shuffle-fed bolt to another parallelism (refused), or
the sink rescaled while the shuffle-fed bolt keeps its parallelism (exact)."""

WORKERS = 3
LISTING_ROOT = "/ckpt"
"""``listing_error``: the checkpoint root in the WebHDFS test server."""
METADATA_PATH = LISTING_ROOT + r"/chk-\d+/_metadata"
"""``metadata_write_error``: every checkpoint's ``_metadata`` in the WebHDFS test server."""
GENERATION_PATH = LISTING_ROOT + r"/meta/generation/v-\d+"
"""``tm_generation_write_error``: the versions of the TM's generation counter."""
GENERATION_WAIT_S = 2.5
"""``tm_generation_write_error``: how long the recovery is watched (it must not leave
``recovering``) while its generation cannot be stored, before the TM is killed."""
POSTGRES_KINDS = ("metadata_write_error", "fresh_run_into_used")
"""Fault classes run on the ``stateful`` job with its output also in a real PostgreSQL."""
BROKER_KINDS = ("fresh_run_into_used",)
"""Fault classes whose ``stateful`` job also writes to a Redis stream and a Kafka topic."""
HDFS_KINDS = ("listing_error", "metadata_write_error", "tm_generation_write_error")
"""Fault classes whose checkpoint store is the WebHDFS test server (no proxy)."""
WORKER_TIMEOUT_MS = 2_000
UPGRADE_SLOW = 4.0
"""``tm_kill_during_upgrade`` runs its topology this many times slower: the gray release's
compatibility check (both code versions loaded in child processes) takes seconds, and the
switch must begin before the input ends."""


DRAIN_COMMIT_PAUSE_S = 0.5
"""``kill_during_drain`` runs its topology with a FileSink whose pre-commit takes this long
(:class:`~jstormpy.testing.chaos.topologies.SlowCommitFileSink`): the drain's final
checkpoint then lasts at least this long after the TM shows the spouts finished, and the
kill (0-0.05 s later) lands in it however loaded the machine is."""


def _slow(kind: str) -> float:
    return UPGRADE_SLOW if kind == "tm_kill_during_upgrade" else 1.0


def _commit_pause(kind: str) -> float:
    return DRAIN_COMMIT_PAUSE_S if kind == "kill_during_drain" else 0.0


@dataclass(frozen=True)
class Fault:
    """One fault: its class and parameters (all drawn from the scenario's seed).

    Attributes:
        kind: One of :data:`FAULT_KINDS`.
        at_s: When, in seconds after the topology first runs.
        worker: The worker hit (kill, reset's sender, partition, stall, drain kill);
            None with ``kind="kill"`` means the Topology Master.
        peer: ``reset``: the other worker.
        on: ``reset``: data / credit / both; ``partition``: peers / tm / both.
        duration_s: How long a partition, stall, hang, slowness or full disk lasts; for
            ``tm_kill_during_upgrade``, the delay between starting the upgrade and the kill.
    """

    kind: str
    at_s: float = 0.0
    worker: int | None = None
    peer: int | None = None
    on: str = ""
    duration_s: float = 0.0

    def describe(self) -> str:
        """Short human-readable form, e.g. ``reset 0>2 credit @0.8s``."""
        who = "" if self.worker is None else f" w{self.worker}"
        if self.kind == "kill":
            who = " tm" if self.worker is None else who
        elif self.kind == "reset":
            who = f" {self.worker}>{self.peer} {self.on}"
        elif self.kind == "partition":
            who += f" from {self.on}"
        elif self.kind == "rescale_unkeyed_state":
            who = " partial 2>3" if self.on == "other" else " out 2>3"
        elif self.kind in ("backend_hang", "backend_slow", "disk_full",
                           "tm_kill_during_upgrade"):
            who = ""
        when = "" if self.kind == "kill_during_drain" else f" @{self.at_s:.1f}s"
        span = f" {self.duration_s:.1f}s" if self.duration_s else ""
        return f"{self.kind}{who}{when}{span}"


@dataclass(frozen=True)
class Scenario:
    """A seeded scenario: a topology and a fault."""

    seed: int
    topology: str
    fault: Fault

    @classmethod
    def draw(cls, seed: int, topology: str | None = None, kind: str | None = None,
             workers: int = WORKERS) -> Scenario:
        """The scenario of ``seed`` (``topology`` / ``kind`` fix those choices).

        Raises:
            ValueError: an unknown topology or fault kind.
        """
        if topology is not None and topology not in ALL_TOPOLOGIES:
            raise ValueError(f"unknown chaos topology {topology!r}; choose one of "
                             f"{', '.join(ALL_TOPOLOGIES)}")
        if kind is not None and kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; choose one of "
                             f"{', '.join(FAULT_KINDS)}")
        rng = random.Random(seed)
        topo = rng.choice(TOPOLOGIES)
        k = rng.choice(_SEEDED_KINDS)  # the same stream of parameters as before
        if kind is None and seed % len(FAULT_KINDS) >= len(_SEEDED_KINDS):
            k = FAULT_KINDS[seed % len(FAULT_KINDS)]
        topology, kind = topology or topo, kind or k
        if kind == "rescale_unkeyed_state":
            topology = SHUFFLED  # the class needs a shuffle-fed stateful bolt
        elif kind in POSTGRES_KINDS:
            topology = "stateful"  # the job that also writes to PostgreSQL
        at = round(rng.uniform(0.4, 1.6), 2)
        w = rng.randrange(workers)
        timeout_s = WORKER_TIMEOUT_MS / 1000
        if kind == "kill":
            fault = Fault(kind, at, None if rng.random() < 0.25 else w)
        elif kind == "reset":
            peer = rng.choice([x for x in range(workers) if x != w])
            fault = Fault(kind, at, w, peer, rng.choice(RESET_ON))
        elif kind == "partition":
            fault = Fault(kind, at, w, on=rng.choice(PARTITION_FROM),
                          duration_s=round(rng.uniform(0.3, 1.5 * timeout_s), 2))
        elif kind == "stall":
            fault = Fault(kind, at, w, duration_s=round(timeout_s + rng.uniform(0.3, 1.2), 2))
        elif kind in ("backend_hang", "backend_slow", "disk_full"):
            fault = Fault(kind, at, duration_s=round(rng.uniform(0.5, 2.0), 2))
        elif kind == "listing_error":  # long enough for the restarted worker to register
            fault = Fault(kind, at, w, duration_s=round(rng.uniform(1.5, 3.0), 2))
        elif kind in ("metadata_write_error", "tm_generation_write_error"):
            fault = Fault(kind, at, w)
        elif kind == "fresh_run_into_used":  # a kill in the first run: generation 2
            fault = Fault(kind, at, w)
        elif kind == "savepoint_into_used":  # the savepoint's time
            fault = Fault(kind, at)
        elif kind == "rescale_unkeyed_state":
            fault = Fault(kind, at, on=rng.choice(RESCALE_TO))
        elif kind == "tm_kill_during_upgrade":  # early: the compatibility check takes time
            fault = Fault(kind, round(at / 3, 2), duration_s=round(rng.uniform(0.0, 0.4), 2))
        else:
            fault = Fault(kind, 0.0, w, duration_s=round(rng.uniform(0.0, 0.05), 2))
        return cls(seed, topology, fault)

    def describe(self) -> str:
        """``seed 7 stateful: stall w1 @0.9s 2.6s``."""
        return f"seed {self.seed} {self.topology}: {self.fault.describe()}"


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of one scenario.

    Attributes:
        scenario: What ran.
        verdict: Lost / duplicated / reordered events and state differences.
        drained: The job reached ``drained``.
        fired: The fault was actually injected (a kill during the drain can come too late).
        recovery_s: Seconds from the end of the fault to the next completed checkpoint
            (None if it never came or the fault did not fire).
        restarts: Recoveries the TM went through.
        seconds: Wall time of the whole scenario.
        events: What the injector did, in order.
        error: Why the run itself failed ("" if it did not).
        workdir: The scenario's directory when the caller gave one ("" for a temp dir,
            which is removed).
    """

    scenario: Scenario
    verdict: Verdict
    drained: bool
    fired: bool
    recovery_s: float | None
    restarts: int
    seconds: float
    events: tuple[str, ...] = field(default_factory=tuple)
    error: str = ""
    workdir: str = ""

    @property
    def ok(self) -> bool:
        """Drained with exactly-once output and state."""
        return self.drained and self.verdict.ok and not self.error


def scenario_config(state_backend: str = "") -> Config:
    """The Config every scenario runs with (short timeouts so faults are found fast)."""
    return Config(workers=WORKERS, guarantee="exactly_once", checkpoint_interval_ms=200,
                  worker_timeout_ms=WORKER_TIMEOUT_MS, checkpoint_timeout_ms=3_000,
                  tolerable_failed_checkpoints=1, max_restarts=100,
                  state_backend=state_backend)


class _Injector:
    """Runs a scenario's fault against a live topology and measures the recovery."""

    def __init__(self, scenario: Scenario, handle: Any, workdir: Path,
                 net: ChaosNetwork | None, backend_proxy: Any, disk: FullDisk | None,
                 hdfs: Any = None) -> None:
        self.fault = scenario.fault
        self.scenario = scenario
        self.handle = handle
        self.workdir = workdir
        self.net = net
        self.backend_proxy = backend_proxy
        self.disk = disk
        self.hdfs = hdfs
        self.events: list[str] = []
        self.stopped_job = False
        """``savepoint_into_used``: the injector stopped the job (it does not drain)."""
        self.problems: list[str] = []
        """What the user saw that is wrong although no output was (a refusal missing)."""
        self.fired = False
        self.recovery_s: float | None = None
        self._stop = threading.Event()
        self._last_status: dict[str, Any] = {}
        self._drained_at: float | None = None
        self._fault_end: tuple[float, float] | None = None
        """(wall, monotonic) time the fault ended; the recovery is measured from it."""
        self.thread = threading.Thread(target=self._run, name="chaos-injector", daemon=True)

    # -- helpers ----------------------------------------------------------------------------
    def status(self) -> dict[str, Any] | None:
        try:
            self._last_status = self.handle.client.status(timeout=2.0)
        except Exception:
            return None
        return self._last_status

    def _pid(self, worker: int | None) -> int | None:
        launcher = self.handle.launcher
        with launcher.lock:
            if worker is None:
                return launcher.master.pid if launcher.master else None
            proc = launcher.workers.get(worker)
            return proc.pid if proc is not None and proc.poll() is None else None

    def _signal(self, worker: int | None, sig: signal.Signals) -> bool:
        pid = self._pid(worker)
        who = "tm" if worker is None else f"worker {worker}"
        if pid is None:
            self.events.append(f"skipped {sig.name} of {who}: not running")
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            self.events.append(f"skipped {sig.name} of {who}: gone")
            return False
        self.events.append(f"{sig.name} {who} (pid {pid})")
        return True

    def _finished_state(self) -> bool:
        return self._last_status.get("state") in TERMINAL_STATES

    # -- the run ----------------------------------------------------------------------------
    def _run(self) -> None:
        deadline = time.monotonic() + 60
        while not self._stop.is_set() and time.monotonic() < deadline:
            st = self.status()
            if st and st.get("state") == TopologyState.RUNNING:
                break
            self._stop.wait(0.02)
        t0 = time.monotonic()
        if self.fault.kind != "kill_during_drain" and \
                self._stop.wait(max(0.0, t0 + self.fault.at_s - time.monotonic())):
            return
        self.status()
        if self._finished_state():
            self.events.append(f"skipped: topology already {self._last_status.get('state')}")
            return
        try:
            self._inject()
        finally:
            self._undo()
        if self._fault_end is None:
            self._fault_end = (time.time(), time.monotonic())
        if self.fired and self.recovery_s is None and not self.stopped_job:
            self._measure_recovery()

    def _inject(self) -> None:
        f = self.fault
        kind = f.kind
        if kind == "kill":
            self.fired = self._signal(f.worker, signal.SIGKILL)
        elif kind == "reset":
            assert self.net is not None and f.worker is not None and f.peer is not None
            a, b = self._busy_pair(f.worker, f.peer, f.on)
            for i in range(3):
                cut = self.net.reset(a, b, f.on)
                self.events.append(f"reset {a}>{b} {f.on}: {cut} connection(s)")
                self.fired = self.fired or cut > 0
                if i < 2 and self._stop.wait(0.3):
                    return
        elif kind == "partition":
            assert self.net is not None and f.worker is not None
            self.net.partition(f.worker, f.on)
            self.fired = True
            self.events.append(f"partition w{f.worker} from {f.on}")
            self._stop.wait(f.duration_s)
        elif kind == "stall":
            if self._signal(f.worker, signal.SIGSTOP):
                self.fired = True
                self._stop.wait(f.duration_s)
        elif kind == "backend_hang":
            self.backend_proxy.hang()
            self.fired = True
            self.events.append("backend hangs")
            self._stop.wait(f.duration_s)
        elif kind == "backend_slow":
            self.backend_proxy.delay_s = 0.05
            self.fired = True
            self.events.append("backend slow (50 ms per chunk)")
            self._stop.wait(f.duration_s)
        elif kind == "disk_full":
            assert self.disk is not None
            self.events.append(self.disk.fill())
            self.fired = True
            self._stop.wait(f.duration_s)
        elif kind == "listing_error":
            self.hdfs.fail_listings(LISTING_ROOT, -1)
            self.events.append(f"listing {LISTING_ROOT} answers 404")
            self.fired = self._signal(f.worker, signal.SIGKILL)
            self._stop.wait(f.duration_s)
            st = self.status() or {}
            waits = [e for e in st.get("errors", []) if "404" in e.get("message", "")]
            self.events.append(f"recovery {'waits for the listing' if waits else 'not waiting'}"
                               f" (state {st.get('state')!r})")
        elif kind == "metadata_write_error":
            self._metadata_write_error()
        elif kind == "tm_generation_write_error":
            self._generation_write_error()
        elif kind == "savepoint_into_used":
            self._savepoint_then_stop()
        elif kind == "fresh_run_into_used":  # its fence rows then hold generation 2
            self.fired = self._signal(f.worker, signal.SIGKILL)
        elif kind == "rescale_unkeyed_state":
            self._rescale_unkeyed_state()
        elif kind == "tm_kill_during_upgrade":
            self._upgrade_then_kill()
        elif kind == "kill_during_drain":
            self._kill_during_drain()

    def _wait_for(self, what: str, cond: Any, timeout_s: float) -> bool:
        """Poll ``cond()`` until true (False, with an event, on timeout or stop)."""
        deadline = time.monotonic() + timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            if cond():
                return True
            self._stop.wait(0.02)
        self.events.append(f"gave up waiting for {what} after {timeout_s:.0f}s")
        return False

    def _savepoint_then_stop(self) -> None:
        """A savepoint of the running job; once a later checkpoint has committed more
        output, the job is stopped (the savepoint is then restored, :mod:`.reuse`).
        Recovery: from the savepoint to that next completed checkpoint."""
        at = take_savepoint(self.handle, self.workdir)
        self.fired = True
        done = time.monotonic()
        self.events.append(f"savepoint at checkpoint {at}")

        def later() -> bool:
            last = (self.status() or {}).get("last_completed_checkpoint") or {}
            return int(last.get("id", 0)) > at or self._finished_state()

        if not self._wait_for("a checkpoint after the savepoint", later, 30):
            return
        self.recovery_s = round(time.monotonic() - done, 2)
        if self._finished_state():
            self.events.append(f"the job was {self._last_status.get('state')} before a stop")
            return
        self.handle.kill()
        self.stopped_job = True
        self.events.append(f"job stopped after checkpoint "
                           f"{self._last_status['last_completed_checkpoint']['id']}")

    def _wait_for_quietly(self, cond: Any, timeout_s: float) -> bool:
        """Poll ``cond()`` for up to ``timeout_s``: whether it became true."""
        deadline = time.monotonic() + timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            if cond():
                return True
            self._stop.wait(0.05)
        return False

    def _generation(self) -> int | None:
        st = self.status()
        return None if st is None else int(st.get("generation", 0))

    def _metadata_write_error(self) -> None:
        """Every ``_metadata`` write fails from now on; once one has, a worker is SIGKILLed
        and the writes heal when the recovery has begun (:meth:`_undo`): the sinks hold a
        pre-committed transaction of a checkpoint that never completed, and the recovery
        restores below it (issue 23 hole 2)."""
        assert self.hdfs is not None
        self.hdfs.fail_renames(METADATA_PATH, -1)
        self.events.append("every _metadata write fails")
        if not self._wait_for("a failed _metadata write", lambda: self.hdfs.renames_failed,
                              15):
            return
        gen = self._generation()
        failed = [c["id"] for c in self._last_status.get("checkpoints", [])
                  if "metadata write failed" in c.get("error", "")]
        self.events.append(f"_metadata of {self.hdfs.renames_failed[0].split('/')[-2]} "
                           f"refused (failed in status: {failed})")
        self.fired = self._signal(self.fault.worker, signal.SIGKILL)
        if self.fired and gen is not None:
            self._wait_for("the recovery", lambda: (self._generation() or 0) > gen, 30)
            self.events.append(f"recovery began (generation {self._last_status.get('generation')}"
                               f"); {len(self.hdfs.renames_failed)} _metadata write(s) refused")

    def _generation_write_error(self) -> None:
        """Every write of the TM's generation fails from now on; a worker is SIGKILLed, so
        the recovery needs a new generation and cannot store it; once it has tried, the TM
        is SIGKILLed and the writes heal (:meth:`_undo`) before the launcher's restart
        (``--resume``) reads the generation back (issue 23 hole 7)."""
        assert self.hdfs is not None
        self.hdfs.fail_renames(GENERATION_PATH, -1)
        self.events.append("every generation write fails")
        gen = self._generation()
        if not self._signal(self.fault.worker, signal.SIGKILL):
            return
        if not self._wait_for("a failed generation write", lambda: self.hdfs.renames_failed,
                              15):
            return
        st = self.status() or {}
        self.events.append(f"generation {(gen or 0) + 1} refused; TM at generation "
                           f"{st.get('generation')} in state {st.get('state')!r}")
        # the recovery must wait while its generation cannot be stored: a TM that prepared
        # workers under it would hand it out again after a restart (hole 7)
        went_on = self._wait_for_quietly(
            lambda: (self.status() or {}).get("state") == TopologyState.RUNNING,
            GENERATION_WAIT_S)
        st = self._last_status
        if went_on:
            self.problems.append(f"the TM prepared workers under generation "
                                 f"{st.get('generation')}, which it could not store")
        self.events.append(f"after {GENERATION_WAIT_S:.1f}s: state {st.get('state')!r}, "
                           f"{len(self.hdfs.renames_failed)} generation write(s) refused")
        self.fired = self._signal(None, signal.SIGKILL)

    def _rescale_unkeyed_state(self) -> None:
        """A live rescale of the shuffled topology: its shuffle-fed ``partial`` bolt to 3
        tasks (``on="other"``: must be refused naming the component, the state and what
        to do, the job running on unchanged), or its sink to 3 tasks while ``partial`` keeps
        2 (``on="same"``: must succeed; the verdict checks the partial counts stayed
        exact). Issue 23 hole 5."""
        from jstormpy import JStormError

        change = {"partial": 3} if self.fault.on == "other" else {"out": 3}
        try:
            record = self.handle.rescale(change, timeout_s=60)
        except JStormError as exc:
            message = str(exc)
            self.events.append(f"rescale {change} refused: {message[:200]}")
            self.fired = True
            if self.fault.on == "same":
                self.problems.append(f"a rescale keeping the shuffle-fed bolt's parallelism "
                                     f"was refused: {message}")
            elif "'partial'" not in message or "'counts'" not in message:
                self.problems.append(f"the refusal does not name component 'partial' and "
                                     f"state 'counts': {message}")
            return
        self.fired = True
        self.events.append(f"rescale {change} done: pause {record.get('pause_ms')} ms")
        if self.fault.on == "other":
            self.problems.append("a rescale of shuffle-fed managed state to another "
                                 "parallelism was accepted")

    def _busy_pair(self, a: int, b: int, on: str) -> tuple[int, int]:
        """``(a, b)`` if the connections ``on`` names carry traffic; else the first pair
        (in an order drawn from the seed) that does: a small topology does not connect
        every pair of workers."""
        assert self.net is not None
        net = self.net

        def live(x: int, y: int) -> bool:
            data = net.pairs[(x, y)].live_connections
            credit = net.pairs[(y, x)].live_connections
            return bool({"data": data, "credit": credit, "both": data or credit}[on])

        pairs = [(x, y) for x in range(net.workers) for y in range(net.workers) if x != y]
        random.Random(self.scenario.seed).shuffle(pairs)
        for x, y in [(a, b), *pairs]:
            if live(x, y):
                if (x, y) != (a, b):
                    self.events.append(f"{a}>{b} carries nothing ({on}); using {x}>{y}")
                return x, y
        return a, b

    def _undo(self) -> None:
        """End a lasting fault (also when the run is stopped early)."""
        f = self.fault
        if f.kind == "partition" and self.net is not None:
            self.net.heal()
            self.events.append("healed")
        elif f.kind == "stall" and self.fired:
            self._signal(f.worker, signal.SIGCONT)
        elif f.kind in ("backend_hang", "backend_slow") and self.backend_proxy is not None:
            self.backend_proxy.delay_s = 0.0
            self.backend_proxy.heal()
            self.events.append("backend back to normal")
        elif f.kind == "disk_full" and self.disk is not None:
            self.events.append(self.disk.free())
        elif f.kind == "listing_error" and self.hdfs is not None:
            self.hdfs.fail_listings(LISTING_ROOT, 0)
            self.events.append("listing healed")
        elif f.kind == "metadata_write_error" and self.hdfs is not None:
            self.hdfs.fail_renames(METADATA_PATH, 0)
            self.events.append("_metadata writes healed")
        elif f.kind == "tm_generation_write_error" and self.hdfs is not None:
            self.hdfs.fail_renames(GENERATION_PATH, 0)
            self.events.append(f"generation writes healed "
                               f"({len(self.hdfs.renames_failed)} refused)")

    def _upgrade_then_kill(self) -> None:
        code = self.workdir / "v2" / "topology.py"
        code.parent.mkdir(parents=True, exist_ok=True)
        code.write_text(
            "# v2 of the chaos topology (same graph): the gray release target\n"
            "from pathlib import Path\n"
            "from jstormpy.testing.chaos.topologies import build_topology\n"
            f"topology = build_topology({self.scenario.topology!r}, Path({str(self.workdir)!r}), "
            f"slow={_slow(self.fault.kind)!r})\n")

        def upgrade() -> None:
            try:
                state = self.handle.upgrade(str(code), n=1, wait=False)
                self.events.append(f"upgrade started: {state.get('phase', state)}")
            except Exception as exc:
                self.events.append(f"upgrade call failed: {type(exc).__name__}: {exc}")

        caller = threading.Thread(target=upgrade, daemon=True)
        caller.start()
        deadline = time.monotonic() + 30
        phase = "idle"
        while not self._stop.is_set() and time.monotonic() < deadline:  # the switch began
            st = self.status()
            phase = (st or {}).get("upgrade", {}).get("phase", phase)
            if phase not in ("idle", "completed", "rolled_back") or self._finished_state():
                break
            self._stop.wait(0.02)
        self.events.append(f"upgrade phase {phase!r}")
        if phase in ("idle", "completed", "rolled_back"):  # a TM kill now tests no upgrade
            self.events.append("skipped: the switch never began while the job ran "
                               f"(state {self._last_status.get('state')!r})")
            caller.join(30)
            return
        self._stop.wait(self.fault.duration_s)
        self.fired = self._signal(None, signal.SIGKILL)
        # the fault ends with the kill: the upgrade call may block until the new TM answers
        self._fault_end = (time.time(), time.monotonic())
        caller.join(30)

    def _kill_during_drain(self) -> None:
        deadline = time.monotonic() + 120
        while not self._stop.is_set() and time.monotonic() < deadline:
            st = self.status()
            if st is not None:
                if self._finished_state():
                    self.events.append(f"skipped: {st.get('state')} before a spout finished")
                    return
                if st.get("spouts_finished"):
                    break
            self._stop.wait(0.02)
        self.events.append(f"spout task(s) {self._last_status.get('spouts_finished')} finished")
        self._stop.wait(self.fault.duration_s)
        self.fired = self._signal(self.fault.worker, signal.SIGKILL)

    def _measure_recovery(self) -> None:
        """Seconds from the fault's end until a checkpoint triggered after it has
        completed, read from the TM's checkpoint history; or until the job drained."""
        end_wall, end = self._fault_end or (time.time(), time.monotonic())
        deadline = end + 120
        while not self._stop.is_set() and time.monotonic() < deadline:
            st = self.status()
            if st is not None:
                done = [c["started_at"] + c["duration_ms"] / 1000.0
                        for c in st.get("checkpoints", [])
                        if c.get("status") == "completed" and c.get("started_at", 0) >= end_wall]
                if done:
                    self.recovery_s = round(max(min(done) - end_wall, 0.0), 2)
                    return
                if st.get("state") == TopologyState.DRAINED:
                    self.recovery_s = round(time.monotonic() - end, 2)
                    return
                if self._finished_state():
                    return
            self._stop.wait(0.05)
        if self._drained_at is not None:  # drained before a status call showed it
            self.recovery_s = round(max(self._drained_at - end, 0.0), 2)

    def start(self) -> None:
        self.thread.start()

    def stop(self, drained: bool = False) -> None:
        """Stop; ``drained``: the job has just drained (ends a recovery still measured)."""
        if drained:
            self._drained_at = time.monotonic()
        self._stop.set()
        self.thread.join(30)


def _rundir_tm_port(home: Path, topology_name: str) -> Path:
    return home / "runs" / topology_name / "master.port"


def run_scenario(scenario: Scenario, workdir: str | Path | None = None,
                 timeout_s: float = 120.0, fork: bool = True) -> ScenarioResult:
    """Run ``scenario`` on real processes and check its committed output.

    Args:
        scenario: What to run.
        workdir: Where output, checkpoints and logs go (a fresh temp dir if None; it is
            removed afterwards unless given).
        timeout_s: Longest wait for the job to drain.
        fork: Start the TM and workers from the fork server (``LocalCluster(fork=)``).
    """
    from jstormpy.deploy.local import LocalCluster
    from jstormpy.testing.servers.webhdfs import WebHdfsServer

    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="jstorm-chaos-")) if workdir is None \
        else Path(workdir).absolute()  # the file:// checkpoint URI needs an absolute path
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    kind = scenario.fault.kind
    pg: Any = None
    notes: tuple[str, ...] = ()
    pg_dsn = None
    brokers: BrokerServers | None = None
    handle_box: dict[str, Any] = {}
    net = hdfs = backend_proxy = disk = None
    injector: _Injector | None = None
    status: dict[str, Any] = {}
    second: SecondRun | None = None
    error = ""
    try:
        pg, notes = _postgres_for(kind)
        if pg is not None:
            pg_dsn = pg.create_database("chaos")
            create_postgres_table(pg_dsn)
        if kind in BROKER_KINDS:
            brokers = start_brokers()
            notes += brokers.notes
        outputs = None if brokers is None else brokers.outputs
        topology = build_topology(scenario.topology, work, slow=_slow(kind), pg_dsn=pg_dsn,
                                  brokers=outputs, commit_pause_s=_commit_pause(kind))
        backend = ""
        if kind in ("backend_hang", "backend_slow"):
            from jstormpy.testing.servers.fault_proxy import FaultProxy

            hdfs = WebHdfsServer(work / "hdfs").start()
            backend_proxy = FaultProxy(("127.0.0.1", hdfs.port))
            backend = f"hdfs://127.0.0.1:{backend_proxy.start()}/ckpt"
        elif kind in HDFS_KINDS:
            hdfs = WebHdfsServer(work / "hdfs").start()
            backend = f"hdfs://127.0.0.1:{hdfs.port}{LISTING_ROOT}"
        else:
            backend = f"file://{work / 'ckpt'}"
        if kind == "disk_full":
            disk = FullDisk(work / "out")
        env: dict[str, str] = {}
        if kind in ("reset", "partition"):
            net = ChaosNetwork(WORKERS, _rundir_tm_port(work / "home", topology.name),
                               lambda w: _worker_address(handle_box, w))
            env = net.environment()
        # fork=False starts processes cold: slower, but immune to the fork server's exit
        # tracking, which under heavy load has reported a live TM dead (restarted in a loop
        # that cannot bind its port) and lost an exit (shutdown waiting for ever)
        with LocalCluster(home=work / "home", env=env, fork=fork) as cluster:
            handle = cluster.submit(topology, scenario_config(backend))
            handle_box["handle"] = handle
            injector = _Injector(scenario, handle, work, net, backend_proxy, disk, hdfs)
            injector.start()
            try:
                status = handle.wait(timeout=timeout_s)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                with contextlib.suppress(Exception):
                    status = handle.status()
            finally:
                injector.stop(drained=status.get("state") == TopologyState.DRAINED)
        if disk is not None:
            disk.release()
        stopped = injector is not None and injector.stopped_job
        if stopped:
            error = ""  # the injector's stop: the first run's output ends at some checkpoint
        verdict = Verdict() if stopped else check_output(scenario.topology, work)
        first_rows = None if pg_dsn is None else postgres_last_row(pg_dsn)
        first_mark = None if outputs is None else outputs.mark()
        if pg_dsn is not None and not stopped:
            verdict = _both(verdict, check_postgres(pg_dsn, upto=first_rows), "in PostgreSQL")
        if outputs is not None and not stopped:
            for where, other in outputs.check(upto=first_mark):
                verdict = _both(verdict, other, where)
        if kind in REUSE_KINDS and (stopped or status.get("state") == TopologyState.DRAINED):
            env = second_run_environment(kind, work, topology, WORKERS)
            with LocalCluster(home=work / "home", env=env, fork=fork) as cluster:
                second = second_run(kind, scenario.topology, work, scenario_config(backend),
                                    cluster, timeout_s, pg_dsn, outputs)
            verdict = check_output(scenario.topology, second.checked) if stopped else \
                _second_verdict(scenario.topology, work, verdict, second)
            error = second.error
            if pg_dsn is not None and second.postgres_after is not None:
                verdict = _both(verdict, check_postgres(pg_dsn, after=second.postgres_after),
                                "in PostgreSQL, second run")
            if outputs is not None and second.brokers_after is not None:
                for where, other in outputs.check(after=second.brokers_after):
                    verdict = _both(verdict, other, f"{where}, second run")
    except Exception as exc:
        error = error or f"{type(exc).__name__}: {exc}"
        verdict = Verdict(state_problems=("not checked: the run failed",))
    finally:
        if net is not None:
            net.close()
        if backend_proxy is not None:
            backend_proxy.close()
        if hdfs is not None:
            hdfs.stop()
        if pg is not None:
            pg.close()
        if brokers is not None:
            brokers.close()
        if disk is not None:
            disk.release()
        if own:
            shutil.rmtree(work, ignore_errors=True)
    if injector is not None and injector.problems and not error:
        error = "; ".join(injector.problems)
    drained = status.get("state") == TopologyState.DRAINED
    if injector is not None and injector.stopped_job:  # the job that wrote the output last
        drained = second is not None and second.drained
    if not drained and not error:
        error = f"not drained: state {status.get('state')!r}"
    events = (*notes, *(injector.events if injector else ()),
              *(second.events if second else ()))
    return ScenarioResult(
        scenario=scenario, verdict=verdict, drained=drained,
        fired=bool(injector and injector.fired) or bool(second and (second.refused
                                                                     or second.error)),
        recovery_s=injector.recovery_s if injector else None,
        restarts=int(status.get("restarts", 0)), seconds=round(time.monotonic() - started, 1),
        events=events, error=error, workdir="" if own else str(work))


def _second_verdict(topology: str, work: Path, first: Verdict, second: SecondRun) -> Verdict:
    """The first run's verdict, plus (if the second run wrote somewhere else: a savepoint
    restored, or a fresh run, into an empty directory) that output's: both must be
    exactly-once."""
    if second.checked == work:
        return first
    return _both(first, check_output(topology, second.checked), "in the second run's output")


def _both(first: Verdict, other: Verdict, where: str) -> Verdict:
    """Two outputs' verdicts as one (``where`` names the second's state problems)."""
    return Verdict(lost=first.lost + other.lost, duplicated=first.duplicated + other.duplicated,
                   reordered=first.reordered + other.reordered,
                   state_problems=first.state_problems + tuple(
                       f"{where}: {p}" for p in other.state_problems),
                   detail="\n".join(d for d in (first.detail, other.detail) if d))


def _postgres_for(kind: str) -> tuple[Any, tuple[str, ...]]:
    """:data:`POSTGRES_KINDS` also write the stateful job's output to a real PostgreSQL
    (started here, when its binaries are installed): a sink that commits a transaction no
    completed checkpoint covers duplicates rows there (issue 23 hole 2), while the
    FileSink keeps such a staged file uncommitted; a fresh run into a used table must not
    be fenced by the earlier run's fence rows (hole 3). Returns the started server (or
    None) and what was done."""
    if kind not in POSTGRES_KINDS:
        return None, ()
    from jstormpy.testing.servers.postgres import PostgresServer, find_pg_bindir

    if find_pg_bindir() is None:
        return None, ("no PostgreSQL server binaries here: FileSink output only",)
    pg = PostgresServer()
    try:
        pg.start()
    except BaseException:
        pg.close()
        raise
    return pg, (f"output also to PostgreSQL on port {pg.port}",)


def _worker_address(box: dict[str, Any], worker: int) -> tuple[str, int] | None:
    handle = box.get("handle")
    if handle is None:
        return None
    try:
        workers = handle.client.status(timeout=2.0)["workers"]
    except Exception:
        return None
    for w in workers:
        if w["id"] == worker and w.get("alive") and w.get("port"):
            return (str(w["host"]), int(w["port"]))
    return None


__all__ = ["FAULT_KINDS", "Fault", "Scenario", "ScenarioResult", "run_scenario",
           "scenario_config"]
