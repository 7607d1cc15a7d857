"""In-place rescale in the Topology Master (``jstorm rescale``, docs/rescaling.md).

One rescale changes the parallelism of running components and keeps every key's state. It
is a quiescent operation (master/quiescent.py, shared with gray release): steps 1-2 are the
shared cut, 3-6 its own.

1. **hold** — no periodic checkpoint is triggered; wait until none is in flight;
2. **quiesce** — checkpoint ``n`` with ``pause`` (the gray-release cut, master/upgrade.py):
   every spout emits barrier ``n`` and stops, so when ``n`` completes nothing is in flight;
3. **sinks** — wait until every sink task has committed ``n`` (its staged files belong to
   its old task id);
4. **redistribute** — on a thread, outside the lock: write checkpoint ``m`` for the new
   layout from ``n`` (:func:`jstormpy.operations.rescale_state.rescale_checkpoint`), key groups to
   their new owners, non-keyed state through ``redistribute_state`` hooks;
5. **commit** — write the new topology files as *pending* in the run directory, then
   checkpoint ``m``'s commit point through the TM's one commit path
   (``MasterCore.create_commit_point``: ``m`` was allocated from the ids record's
   reservation like any checkpoint; the commit point is fenced, stamped with the TM's
   epoch, created and never replaced, then stored as the completed floor), then adopt
   the pending files (``CheckpointCoordinator.adopt_layout``). A commit point that
   failed is marked bad and stored in the ids record at once (it may land late); a
   fenced TM (a standby took over) drops the pending files and leaves the run alone;
6. **restart** — every worker restarts (exit 75) and fetches the new topology; a new
   generation restores checkpoint ``m``; spouts start unpaused.

Steps 3-6 are one pure step list with one driver (master/rescale_steps.py): this controller
performs them through its port (``_ControllerPort``), and the simulator through its own.

Before the commit point any failure (a worker lost, the quiescent checkpoint failing, a
hook raising, a time-out) aborts: the spouts resume (or a normal recovery restores ``n``)
and the old layout runs on. After it, the new layout is the topology's: a Topology Master
restarted after a SIGKILL adopts the pending files when checkpoint ``m`` completed
(:func:`finish_pending_rescale`) and restarts any worker still running the old layout.

``jstorm upgrade NAME --code PKG --rescale`` (master/upgrade.py) is the same rescale with
new code: the package declares the new parallelisms, the state is redistributed by the
running code's classes (their ``redistribute_state`` hooks; the workers then apply the new
classes' ``migrate_state``), and the commit also makes the package the stable code of every
worker (``code/assignment.json`` is one of the pending files).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cloudpickle

from jstormpy import pickling
from jstormpy.api.errors import BackendError, JStormError
from jstormpy.api.topology import Topology
from jstormpy.faults import fault_point
from jstormpy.master.commit_point import CommitOutcome
from jstormpy.master.coordinator import CheckpointCoordinator
from jstormpy.master.quiescent import QuiescentOperation
from jstormpy.master.rescale_steps import RescaleSteps, pending_rescale_committed
from jstormpy.master.rescale_steps import perform as perform_rescale
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.master.upgrade import UpgradePhase
from jstormpy.operations.rescale_state import job_max_parallelism, plan_rescale, rescale_checkpoint
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends import StateBackend
from jstormpy.state_backends.base import CHECKPOINT_IDS_META

if TYPE_CHECKING:
    from jstormpy.master.operation_host import OperationHost
    from jstormpy.master.session import WorkerSession

log = logging.getLogger("jstormpy.master.rescale")

RESIZABLE_ENV = "JSTORM_RESIZABLE_WORKERS"
"""Set to 1 by a launcher that starts and stops workers as config.json's count changes."""
PENDING = "rescale-pending.json"
LAYOUT = "rescale.json"
FILES = ("topology.pkl", "descriptor.json", "config.json", "code/assignment.json")


class RescalePhase(StrEnum):
    """Where a rescale is (``status()["rescale"]["phase"]`` is the value)."""

    IDLE = "idle"
    HOLDING = "holding"                # 1
    QUIESCING = "quiescing"            # 2
    SINKS = "sinks"                    # 3
    REDISTRIBUTING = "redistributing"  # 4
    COMMITTING = "committing"          # 5: the commit point is being written
    RESTARTING = "restarting"          # 6


BEFORE_COMMIT = (RescalePhase.HOLDING, RescalePhase.QUIESCING, RescalePhase.SINKS,
                 RescalePhase.REDISTRIBUTING)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def finish_pending_rescale(run_dir: Path, backend: StateBackend) -> bool:
    """At Topology Master start: adopt a rescale whose checkpoint committed, or drop one
    that did not. True if a rescale was adopted."""
    pending = run_dir / PENDING
    if not pending.exists():
        return False
    info = json.loads(pending.read_text())
    # complete and not bad: a commit point that timed out is stored as bad at once, and
    # may land after the TM died with its staged files still here
    done = pending_rescale_committed(int(info["checkpoint"]), backend.list_completed(),
                                     _stored_bad(backend))
    if done:
        persisted = backend.get_meta("generation")
        layout = max(int(info["layout_generation"]),
                     int(persisted.decode()) + 1 if persisted else 0)
        _adopt(run_dir, layout, int(info["checkpoint"]))
        log.info("adopted the rescale committed as checkpoint %d", info["checkpoint"])
    else:
        # its commit point may still land (a deposed or dead TM's write): never restore
        # it into the old layout. Stored before the staged files go (a BackendError here
        # fails the start, and the next one retries)
        store_bad_checkpoint(backend, int(info["checkpoint"]))
        for name in FILES:
            (run_dir / f"{name}.rescale").unlink(missing_ok=True)
        log.warning("dropped an uncommitted rescale (checkpoint %d never completed; "
                    "stored as bad)", info["checkpoint"])
    pending.unlink()
    return done


def store_bad_checkpoint(backend: StateBackend, checkpoint_id: int) -> None:
    """Add ``checkpoint_id`` to the stored ids record's bad checkpoints."""
    record = backend.get_meta(CHECKPOINT_IDS_META)
    ids = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                tolerable_timeouts=0)
    if record:
        ids.adopt_ids_record(record)
    ids.mark_bad(checkpoint_id)
    backend.put_meta(CHECKPOINT_IDS_META, ids.ids_record())


def _stored_bad(backend: StateBackend) -> frozenset[int]:
    """The bad checkpoints of the stored ids record (none if there is none)."""
    record = backend.get_meta(CHECKPOINT_IDS_META)
    if not record:
        return frozenset()
    ids = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                tolerable_timeouts=0)
    ids.adopt_ids_record(record)
    return ids.bad


def _adopt(run_dir: Path, layout_generation: int, checkpoint_id: int) -> None:
    """Make the staged files the topology's; ``rescale.json`` records the generation the
    layout runs from and its first checkpoint (nothing older restores into it)."""
    _write_atomic(run_dir / LAYOUT, json.dumps({"layout_generation": layout_generation,
                                                "checkpoint": checkpoint_id}).encode())
    for name in FILES:
        staged = run_dir / f"{name}.rescale"
        if staged.exists():
            staged.replace(run_dir / name)


def _check_same_tasks(new: Topology, descriptor: dict[str, Any], code: str) -> None:
    """The package must lay its tasks out as the rescaled running topology does (checkpoint
    ``m`` is written for those task ids)."""
    want = {n: list(ids) for n, ids in new.task_ids().items()}
    got = {c["name"]: list(c["tasks"]) for c in descriptor.get("components", [])}
    if want != got:
        raise JStormError(f"the new code ({code}) numbers its tasks {got}, the running "
                          f"topology at the new parallelism would be {want}: declare the "
                          "components in the same order as the running code")


@dataclass(frozen=True)
class _Staged:
    """A rescale between staging its files and its commit point."""

    request: int
    checkpoint_id: int
    meta: dict[str, Any]
    config: Any
    descriptor: dict[str, Any]
    topology_blob: bytes | None


class RescaleController(QuiescentOperation[RescalePhase]):
    """The rescale state machine of one topology (everything under ``core.lock``)."""

    WAIT_FOR_COMMITS = False  # its steps wait for the sinks' commits of the cut anyway

    def __init__(self, core: OperationHost) -> None:
        super().__init__(core, "rescale", idle=RescalePhase.IDLE,
                         holding=RescalePhase.HOLDING, quiescing=RescalePhase.QUIESCING)
        self.run_dir: Path | None = None
        self.requested = 0                 # ids of requests; done = the last one finished
        self.done = 0
        self.changes: dict[str, int] = {}
        self.new_topology: Topology | None = None
        self.restored_id: int | None = None
        self.generation = 0                # generation the rescale started in
        self.layout_generation = 0         # workers of older generations run the old layout
        self.error = ""
        self.history: list[dict[str, Any]] = []
        self.topology_blob: bytes | None = None   # what GetTopology serves after a rescale
        self.config_json: str | None = None
        self.descriptor_json: str | None = None
        self.sink_commits: dict[int, tuple[int, int]] = {}  # task -> (generation, id)
        self.max_parallelism = 0
        self.old_topology: Topology | None = None
        self.workers = 0                   # the new worker count (0 = unchanged)
        self.code = ""                     # upgrade --rescale: the package the layout runs
        self.code_descriptor: dict[str, Any] | None = None
        self._loaded: dict[str, Topology] = {}  # stable package label -> its topology
        self.dropped_below = 0             # old-layout checkpoints below it were deleted
        self._sinks_then: Callable[[], None] | None = None  # step 3's continuation

    def attach_run_dir(self, run_dir: str | Path) -> None:
        """Where the topology files live (called by the TM's main)."""
        self.run_dir = Path(run_dir)
        layout = self.run_dir / LAYOUT
        if layout.exists():
            info = json.loads(layout.read_text())
            self.layout_generation = int(info["layout_generation"])
            self.core.checkpoints.adopt_layout(int(info.get("checkpoint", 0)))

    # -- hooks called by MasterCore (under core.lock) ------------------------------------
    def holds_checkpoints(self) -> bool:
        """Periodic checkpoints wait while a rescale runs."""
        return self.phase in BEFORE_COMMIT or self.phase == RescalePhase.COMMITTING

    def on_register(self, session: WorkerSession, reported_generation: int) -> bool:
        """A worker that ran a generation before the current layout still holds the old
        topology (it survived a Topology Master restart): restart it. True = handled."""
        if 0 < reported_generation < self.layout_generation:
            log.warning("worker %d ran generation %d, before the rescale of generation %d: "
                        "restarting it on the new layout", session.worker_id,
                        reported_generation, self.layout_generation)
            self._restart(session, "rescale: restart on the new layout")
            return True
        return False

    def on_new_generation(self, reason: str) -> None:
        """A recovery starts: a rescale before its commit point cannot go on."""
        if self.phase in BEFORE_COMMIT:
            self._abort(f"recovery during the rescale: {reason}", resume=False)

    def on_sink_committed(self, msg: Any) -> None:
        """A sink committed a checkpoint (step 3 waits for the quiescent one; a commit may
        arrive before the tick that notices the checkpoint completed)."""
        generation, last = self.sink_commits.get(msg.task_id, (0, 0))
        if msg.generation != generation or msg.checkpoint_id > last:
            self.sink_commits[msg.task_id] = (msg.generation, msg.checkpoint_id)
        if self.phase == RescalePhase.SINKS:
            self._check_sinks()

    def _check_sinks(self) -> None:
        core = self.core
        assert self.checkpoint_id is not None
        if self._sinks_then is not None and all(
                self.sink_commits.get(t, (0, 0)) >= (core.generation, self.checkpoint_id)
                for t in core.sink_tasks):
            then, self._sinks_then = self._sinks_then, None
            then()

    def tick(self, now: float) -> None:
        """Drive the rescale: quiesce, watch the checkpoint, time-outs, completion."""
        core = self.core
        self.drop_old_layout()
        if self.phase in BEFORE_COMMIT and core.state in TERMINAL_STATES:
            self._abort(f"the topology is {core.state}", resume=False)
            return
        if self.phase in BEFORE_COMMIT and core.state == TopologyState.RUNNING and self.phase != \
                RescalePhase.REDISTRIBUTING:
            timed_out = self._step_timeout(now)
            if timed_out:
                self._abort(timed_out, resume=True)
                return
        if self._drive_to_cut():
            return
        if self.phase == RescalePhase.RESTARTING:
            if core.state in (TopologyState.RUNNING, TopologyState.DRAINED) \
                    and core.generation >= self.layout_generation:
                self._finish()
            elif core.state in TERMINAL_STATES:
                self._finish(f"topology {core.state} while the new layout started")

    # -- the user's request (gRPC) ---------------------------------------------------------
    def request(self, changes: dict[str, int], code: str = "",
                descriptor: dict[str, Any] | None = None, workers: int = 0) -> dict[str, Any]:
        """Start a rescale (empty ``changes`` and no ``workers``: just the state);
        JStormError = refused.

        ``workers`` (0 = unchanged) is the new number of worker processes. With ``code`` (a
        package label of the upgrade store) and its ``descriptor``, the new layout runs
        that package (``upgrade --rescale``); ``changes`` are its parallelisms.
        """
        if not changes and not workers:
            return self.status()
        core = self.core
        if workers < 0:
            raise JStormError(f"rescale: the worker count must be >= 1, got {workers}")
        if workers and workers != core.config.workers and \
                os.environ.get(RESIZABLE_ENV) != "1":
            raise JStormError("rescale: this launcher cannot change the number of workers "
                              "(on Spark every worker holds a task slot of one barrier "
                              "stage); keep --workers at the current count "
                              f"({core.config.workers})")
        if not code and core.upgrade.stable != "v1":
            raise JStormError(
                f"the topology runs code {core.upgrade.stable} from a package, which declares "
                "its parallelism: change it together with the code, jstorm upgrade NAME "
                "--code PKG --rescale (docs/rescaling.md)")
        old = self._running_topology()
        with core.lock:
            if core.state != TopologyState.RUNNING:
                raise JStormError(f"the topology is {core.state}; rescale when it is running")
            if not core.stateful:
                raise JStormError("rescale needs checkpoints: the topology runs at_most_once")
            if self.phase != RescalePhase.IDLE:
                raise JStormError(f"a rescale is in progress ({self.phase}); wait for it")
            if core.checkpoints.final_checkpoint is not None:
                raise JStormError("every spout has finished and the topology is draining: "
                                  "nothing is left to rescale")
            if core.upgrade.phase not in (UpgradePhase.IDLE, UpgradePhase.COMPLETED,
                                UpgradePhase.ROLLED_BACK):
                raise JStormError("a gray release is in progress (phase "
                                  f"{core.upgrade.phase}): complete or roll it back, then rescale")
            max_p = job_max_parallelism(old, core.config.max_parallelism)
            new = plan_rescale(old, changes, max_p) if changes else old
            if code:
                _check_same_tasks(new, descriptor or {}, code)
            effective = {n: p for n, p in changes.items()
                         if old.components[n].parallelism != p}
            new_workers = workers if workers and workers != core.config.workers else 0
            if not effective and not new_workers:
                raise JStormError("nothing to change: the components already run at "
                                  f"{changes}" + (f" on {workers} workers" if workers else ""))
            self.requested += 1
            self.changes = effective
            self.workers = new_workers
            self.new_topology = new
            self.max_parallelism = max_p
            self.old_topology = old
            self.code, self.code_descriptor = code, descriptor
            self.error = ""
            self.restored_id = None
            self.generation = core.generation
            self._hold(time.monotonic())
            log.info("rescale %s: %s%s%s", self.requested, effective,
                     f" on {new_workers} workers" if new_workers else "",
                     f" with code {code}" if code else "")
            self.tick(self.t_start)
            return self.status()

    def _running_topology(self) -> Topology:
        """The running code's topology: its classes' hooks redistribute the state."""
        if self.run_dir is None:
            raise JStormError("this Topology Master has no run directory: rescale needs the "
                              "local launcher (jstorm run / submit, LocalCluster)")
        stable = self.core.upgrade.stable
        if stable != "v1":  # the package of an earlier rescaling upgrade or gray release
            return self._package_topology(stable)
        blob = self.topology_blob or (self.run_dir / "topology.pkl").read_bytes()
        topology: Topology = cloudpickle.loads(blob)
        return topology

    def _package_topology(self, label: str) -> Topology:
        from jstormpy.operations.codepkg import load_package_topology

        if label not in self._loaded:
            store = self.core.upgrade.store
            got = store.get(label) if store is not None else None
            if got is None or self.run_dir is None:
                raise JStormError(f"code package {label} is not in the run directory")
            data, entry, digest = got
            try:
                self._loaded[label] = load_package_topology(
                    data, entry, digest, label, self.run_dir / "code" / "unpacked")
            except JStormError:
                raise
            except Exception as exc:  # user code: never kill the TM
                raise JStormError(f"code package {label} does not load in the Topology "
                                  f"Master: {type(exc).__name__}: {exc}") from exc
        return self._loaded[label]

    # -- the steps ---------------------------------------------------------------------------
    def _quiesced(self) -> None:
        """Steps 3-6: master/rescale_steps.py's step list, through this controller's port."""
        assert self.checkpoint_id is not None
        perform_rescale(RescaleSteps(self.checkpoint_id), _ControllerPort(self, self.requested))

    def _quiescence_failed(self, reason: str) -> None:
        self._abort(reason, resume=True)

    def _drop_staged(self) -> None:
        """The rescale will not commit: the staged topology files go, so a restarted
        Topology Master never adopts them (finish_pending_rescale)."""
        assert self.run_dir is not None
        (self.run_dir / PENDING).unlink(missing_ok=True)
        for name in FILES:
            (self.run_dir / f"{name}.rescale").unlink(missing_ok=True)

    def _commit(self, staged: _Staged) -> None:
        """Under the lock, after the commit point: the new layout is the topology's."""
        core = self.core
        assert self.run_dir is not None
        new_id, config, descriptor = staged.checkpoint_id, staged.config, staged.descriptor
        layout = core.generation + 1
        _adopt(self.run_dir, layout, new_id)
        (self.run_dir / PENDING).unlink(missing_ok=True)
        self.layout_generation = layout
        core.checkpoints.adopt_layout(new_id)  # ids above it, the floor at it
        self.topology_blob = staged.topology_blob
        self.config_json = json.dumps(config.to_dict())
        self.descriptor_json = json.dumps(descriptor)
        core.adopt_layout(config, descriptor)
        core.upgrade.layout_rescaled(self.code)
        self.marks["committed"] = self.t_step = time.monotonic()
        self.phase = RescalePhase.RESTARTING
        if core.state not in (TopologyState.RUNNING, TopologyState.RECOVERING):
            return  # killed meanwhile: tick() records the end; a resume runs the new layout
        for s in core.alive_sessions():
            if s.worker_id < config.workers:
                self._restart(s, "rescale: restart on the new layout")
            else:  # fewer workers: it stops for good (the launcher does not restart it)
                s.alive = False
                s.send(shutdown=pb.Shutdown(reason="rescale: fewer workers", exit_code=0))
        core.forget_surplus_workers()
        core.begin_generation(
            f"rescale to {self.changes}" + (f" with code {self.code}" if self.code else ""),
            new_id, count_restart=False)

    def drop_old_layout(self) -> None:
        """Once the new layout completed a checkpoint of its own, delete the checkpoints of
        the old layout (on the backend thread). Until then the pre-rescale checkpoint is
        kept: it is the last state of the old layout if the rescaled one turns out
        unusable (docs/rescaling.md)."""
        core = self.core
        floor = core.checkpoints.layout_floor
        last = core.checkpoints.last_completed
        if not floor or floor <= self.dropped_below or last is None or last["id"] <= floor:
            return
        self.dropped_below = floor
        core.backend_io.submit(lambda: self._discard_below(floor))

    def _discard_below(self, floor: int) -> None:
        """BackendIO thread: delete every completed checkpoint older than ``floor``."""
        core = self.core
        try:
            old = [c for c in core.backend.list_completed() if c < floor]
            for cid in old:
                core.backend.discard_checkpoint(cid)
        except BackendError as exc:
            log.warning("could not drop the checkpoints of the old layout: %s", exc)
            return
        if old:
            log.info("dropped checkpoint(s) %s of the layout before the rescale", old)
            with core.lock:
                core.checkpoints.retention_deleted(old)

    def _finish(self, error: str = "") -> None:
        now = time.monotonic()
        m = self.marks
        record = {
            "request": self.requested, "changes": dict(self.changes),
            "checkpoint": self.checkpoint_id, "restored_checkpoint": self.restored_id,
            "generation": self.core.generation, "time": time.time(), "error": error,
            "pause_ms": round((now - m.get("pause", now)) * 1000, 1),
            "total_ms": round((now - m["start"]) * 1000, 1),
            "quiesce_ms": round((m.get("quiesced", now) - m.get("pause", now)) * 1000, 1),
            "redistribute_ms": round((m.get("committed", now) - m.get("sinks", now)) * 1000, 1),
            "restart_ms": round((now - m.get("committed", now)) * 1000, 1),
            "code": self.code, "workers": self.core.config.workers,
            "new_workers": self.workers,
        }
        self.history.append(record)
        if self.code:  # upgrade --rescale: also a switch of every worker to the package
            self.core.upgrade.record_switch(
                {**record, "kind": "rescale", "to": self.code,
                 "workers": list(range(self.core.config.workers))})
        self.error = error
        self.phase = RescalePhase.IDLE
        self.done = self.requested
        log.info("rescale %s done: spouts paused %.0f ms, total %.0f ms", self.changes,
                 record["pause_ms"], record["total_ms"])

    def _abort(self, reason: str, resume: bool) -> None:
        core = self.core
        log.error("rescale aborted: %s", reason)
        self._record_error(f"rescale aborted: {reason}")
        paused = self.phase != RescalePhase.HOLDING
        self.history.append({"request": self.requested, "changes": dict(self.changes),
                             "checkpoint": self.checkpoint_id, "time": time.time(),
                             "code": self.code, "new_workers": self.workers,
                             "error": f"aborted: {reason}"})
        if self.code:
            core.upgrade.rescale_aborted(self.code, reason)
        self.error = f"aborted: {reason}"
        self.phase = RescalePhase.IDLE
        self._sinks_then = None
        self.done = self.requested
        if resume and paused and core.state == TopologyState.RUNNING:
            self._resume_spouts()

    # -- reporting -----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """``status()["rescale"]``."""
        core = self.core
        commits = [self.sink_commits.get(t, (0, 0)) for t in core.sink_tasks]
        floor = min((cid if gen == core.generation else 0) for gen, cid in commits) \
            if commits else None
        return {"phase": self.phase.value, "requested": self.requested, "done": self.done,
                # the newest checkpoint every sink task committed in this generation (None:
                # no sinks); jstorm savepoint --stop waits for it (jstormpy/cli/client.py)
                "sinks_committed": floor,
                "changes": dict(self.changes), "code": self.code, "new_workers": self.workers,
                "checkpoint": self.checkpoint_id,
                "restored_checkpoint": self.restored_id, "error": self.error,
                "layout_generation": self.layout_generation,
                "history": self.history[-20:]}



class _ControllerPort:
    """How the Topology Master performs a rescale's steps
    (:class:`~jstormpy.master.rescale_steps.RescalePort`): the redistribution on a thread
    of its own, the commit point on the TM's BackendIO thread, everything else under
    ``core.lock``. A step answering for a request that is no longer the controller's (it
    was aborted meanwhile) never continues."""

    def __init__(self, rescale: RescaleController, request: int) -> None:
        self.rescale, self.core, self.request = rescale, rescale.core, request
        self.meta: dict[str, Any] = {}
        self.staged: _Staged | None = None

    def await_sinks(self, quiescent: int, then: Callable[[], None]) -> None:
        r = self.rescale
        r.phase = RescalePhase.SINKS
        r._sinks_then = then
        r._check_sinks()

    def allocate_id(self) -> int:
        r = self.rescale
        r.marks["sinks"] = r.t_step = time.monotonic()
        new_id = self.core.checkpoints.allocate_id()  # like any checkpoint's
        r.phase = RescalePhase.REDISTRIBUTING
        r.restored_id = new_id
        return new_id

    def write_rescaled(self, quiescent: int, target: int,
                       then: Callable[[str], None]) -> None:
        threading.Thread(target=self._redistribute, name="rescale", daemon=True,
                         args=(quiescent, target, then)).start()

    def _redistribute(self, cid: int, new_id: int, then: Callable[[str], None]) -> None:
        """Thread: write checkpoint ``new_id`` for the new layout, outside the lock."""
        r, core = self.rescale, self.core
        assert r.new_topology is not None and r.old_topology is not None
        try:
            self.meta = rescale_checkpoint(core.backend, cid, r.old_topology, r.new_topology,
                                           r.max_parallelism, new_id)
            failure = ""
        except (JStormError, BackendError) as exc:
            failure = str(exc)
        except Exception as exc:  # user hooks run here: never kill the TM
            failure = f"{type(exc).__name__}: {exc}"
        with core.lock:
            if r.phase != RescalePhase.REDISTRIBUTING or r.requested != self.request \
                    or core.state != TopologyState.RUNNING:
                if r.phase == RescalePhase.REDISTRIBUTING and r.requested == self.request:
                    r._abort(f"the topology is {core.state}", resume=False)
                return  # aborted meanwhile (a recovery restores the old layout)
            then(failure)

    def stage(self, target: int, then: Callable[[str], None]) -> None:
        """Write the new topology files as pending (under the lock). The commit point is
        queued on the TM's backend thread next (never under the lock: a hanging backend
        must not hang ``jstorm status``). From here on the rescale is not aborted by a
        recovery: the commit point's outcome decides which layout the next generation
        runs, and a recovery's listing, queued after it, sees that outcome."""
        r, core = self.rescale, self.core
        assert r.run_dir is not None and r.new_topology is not None
        new = r.new_topology
        config = core.config.replace(max_parallelism=r.max_parallelism,
                                     workers=r.workers or core.config.workers)
        descriptor = r.code_descriptor if r.code else new.descriptor()
        assert descriptor is not None
        texts = {"descriptor.json": json.dumps(descriptor).encode(),
                 "config.json": json.dumps(config.to_dict()).encode()}
        blob = r.topology_blob
        if r.code:  # every worker runs the package from now on; v1's pickle stays v1
            texts["code/assignment.json"] = core.upgrade.assignment_json(r.code)
        else:
            blob = texts["topology.pkl"] = pickling.dumps(new)
        try:
            for name, data in texts.items():
                _write_atomic(r.run_dir / f"{name}.rescale", data)
            _write_atomic(r.run_dir / PENDING, json.dumps(
                {"checkpoint": target, "layout_generation": core.generation + 1}).encode())
        except OSError as exc:
            (r.run_dir / PENDING).unlink(missing_ok=True)
            then(f"cannot stage the rescaled topology files: {exc}")
            return
        self.meta["completed_at"] = time.time()
        r.phase = RescalePhase.COMMITTING
        self.staged = _Staged(r.requested, target, self.meta, config, descriptor, blob)
        then("")

    def commit(self, target: int, then: Callable[[CommitOutcome], None]) -> None:
        """On the BackendIO thread: the TM's one commit path
        (``MasterCore.create_commit_point``: fenced, epoch-stamped, create-only, then the
        completed floor)."""
        staged = self.staged
        assert staged is not None and staged.checkpoint_id == target
        core = self.core
        core.backend_io.submit(lambda: then(core.create_commit_point(target, staged.meta)))

    def mark_bad(self, target: int, outcome: CommitOutcome, then: Callable[[], None]) -> None:
        """In the ids record before the staged files go, so a TM killed in between never
        finds ``target`` complete and not bad."""
        core = self.core
        with core.lock:
            core.checkpoints.mark_bad(target)
        core.store_ids_record_now(f"bad rescaled checkpoint {target}")
        if not outcome.exists:  # another writer's commit point is not ours to delete
            try:
                core.backend.discard_checkpoint(target)
            except BackendError as again:
                log.warning("cannot discard the uncommitted rescaled checkpoint %d: %s",
                            target, again)
        then()

    def adopt_layout(self, target: int) -> None:
        assert self.staged is not None
        with self.core.lock:
            fault_point("rescale_after_commit", 0)
            self.rescale._commit(self.staged)

    def abort(self, reason: str, resume: bool, staged: bool) -> None:
        r, core = self.rescale, self.core
        with core.lock:
            if staged:
                r._drop_staged()
            if core.fenced and not resume:
                reason = f"{reason} ({core.fenced})"
            r._abort(reason, resume=resume)
