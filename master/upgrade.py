"""Gray release (hot upgrade) in the Topology Master (DESIGN §9, ``docs/upgrade.md``).

One *switch* moves a batch of workers to a code version without touching the others. It is
a quiescent operation (master/quiescent.py, shared with in-place rescale): steps 1-2 are
the shared cut, 3-5 its own.

1. **hold** — no periodic checkpoint is triggered; wait until none is in flight;
2. **quiesce** — trigger checkpoint ``n`` with ``pause``: every spout emits barrier ``n``
   and then stops emitting. When ``n`` completes, every task has processed everything
   before its barrier and nothing follows it, so no data is in flight anywhere;
3. **stop** — the batch workers get ``Shutdown(exit_code=75)``; the launcher restarts
   them; at start-up ``GetTopology(worker_id)`` hands each its newly assigned version;
4. **restore** — once the batch registered, ``n``'s snapshot handles are read on the TM's
   backend thread (never under the lock); each batch worker gets ``Prepare(partial=True)``
   restoring its tasks from ``n`` in the *current* generation; every worker gets ``Peers``
   (new ports); the untouched workers keep their processes, tasks, state and generation;
5. **resume** — ``Start`` to the batch, then ``ResumeSpouts`` to everyone.

The untouched workers are idle from 2 to 5: that pause is measured and reported.
A switch that cannot finish (quiescent checkpoint fails, a worker dies or fails to
prepare, the step times out) aborts: assignments go back to the stable version and a
normal recovery (new generation, last completed checkpoint) brings every worker back,
which is exactly-once by the ordinary recovery argument.

Everything runs under ``core.lock`` except state-backend calls (on ``core.backend_io``);
``tick()`` is called by ``MasterCore.tick``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jstormpy.api.errors import BackendError, JStormError
from jstormpy.master.quiescent import QuiescentOperation
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.master.upgrade_steps import SwitchSteps
from jstormpy.master.upgrade_steps import perform as perform_switch
from jstormpy.operations.codepkg import (
    PackageStore,
    check_compatible,
    inspect_topology,
    parallelism_changes,
)
from jstormpy.proto import jstorm_pb2 as pb

if TYPE_CHECKING:
    from jstormpy.master.operation_host import OperationHost
    from jstormpy.master.session import WorkerSession

log = logging.getLogger("jstormpy.master.upgrade")

STABLE = "v1"


class UpgradePhase(StrEnum):
    """Where a gray release is (``status()["upgrade"]["phase"]`` is the value)."""

    IDLE = "idle"
    UPGRADING = "upgrading"      # some workers switched, waiting for the user
    HOLDING = "holding"          # a switch: 1
    QUIESCING = "quiescing"      # 2
    STOPPING = "stopping"        # 3
    RESTORING = "restoring"      # 4
    COMPLETED = "completed"      # every worker runs the new code
    ROLLED_BACK = "rolled_back"  # every worker runs the stable code again


SWITCHING = (UpgradePhase.HOLDING, UpgradePhase.QUIESCING, UpgradePhase.STOPPING,
             UpgradePhase.RESTORING)
ACTIVE = (UpgradePhase.UPGRADING, *SWITCHING)


class UpgradeController(QuiescentOperation[UpgradePhase]):
    """The upgrade state machine of one topology."""

    def __init__(self, core: OperationHost) -> None:
        super().__init__(core, "upgrade", idle=UpgradePhase.IDLE,
                         holding=UpgradePhase.HOLDING, quiescing=UpgradePhase.QUIESCING)
        self.run_dir: Path | None = None
        self.store: PackageStore | None = None
        self.stable = STABLE               # version every worker runs outside an upgrade
        self.target: str | None = None     # version being rolled out
        self.assigned: dict[int, str] = {}  # worker -> version (absent = stable)
        self.kind = ""                     # upgrade | complete | rollback
        self.batch: list[int] = []
        self.batch_size = 0
        self.batch_version = ""
        self.registered: set[int] = set()
        self.ready: set[int] = set()
        self._registered_then: Callable[[], None] | None = None  # step 3's continuation
        self._ready_then: Callable[[str], None] | None = None    # step 4's
        self.started_at = 0.0              # of the whole upgrade (for the expiry)
        self.error = ""
        self.switches: list[dict[str, Any]] = []
        self.infos: dict[str, dict[str, Any]] = {}

    # -- set-up and persistence -----------------------------------------------------------
    def attach_run_dir(self, run_dir: str | Path) -> None:
        """Where packages and the assignment live (called by the TM's main)."""
        self.run_dir = Path(run_dir)
        self.store = PackageStore(self.run_dir)
        state = self.run_dir / "code" / "assignment.json"
        if state.exists() and self.core.resume:
            data = json.loads(state.read_text())
            self.stable = data.get("stable", STABLE)
            self.target = data.get("target")
            self.assigned = {int(k): v for k, v in data.get("assigned", {}).items()}
            if any(v != self.stable for v in self.assigned.values()):
                self.phase = UpgradePhase.UPGRADING
                self.started_at = time.monotonic()

    def _persist(self) -> None:
        if self.run_dir is None:
            return
        path = self.run_dir / "code" / "assignment.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stable": self.stable, "target": self.target,
                                   "assigned": {str(k): v for k, v in self.assigned.items()}}))
        tmp.replace(path)

    def version_of(self, worker_id: int) -> str:
        """The code version ``worker_id`` must run."""
        return self.assigned.get(worker_id, self.stable)

    def package_for(self, worker_id: int) -> tuple[str, bytes, str, str]:
        """(version, zip, entry, digest) for GetTopology; empty zip for v1."""
        with self.core.lock:
            version = self.version_of(worker_id)
        got = self.store.get(version) if self.store is not None else None
        if got is None:
            return version, b"", "", ""
        return version, *got

    # -- hooks called by MasterCore (under core.lock) --------------------------------------
    def holds_checkpoints(self) -> bool:
        """Periodic checkpoints are held while a switch runs."""
        return self.phase in SWITCHING

    def on_register(self, session: WorkerSession, reported_generation: int) -> bool:
        """A worker registered. True = handled here (the core does nothing more)."""
        wid = session.worker_id
        want = self.version_of(wid)
        if self.store is not None and session.code_version != want:
            log.warning("worker %d registered with code %s but is assigned %s: restarting it",
                        wid, session.code_version, want)
            self._restart(session, f"assigned code version {want}")
            return True
        if self.phase == UpgradePhase.STOPPING and wid in self.batch \
                and self.core.state == TopologyState.RUNNING:
            self.registered.add(wid)
            if self.registered >= set(self.batch) and self._registered_then is not None:
                then, self._registered_then = self._registered_then, None
                then()
            return True
        return False

    def on_worker_failed(self, worker_id: int, reason: str) -> None:
        """A worker died or stopped heartbeating (the core then starts a recovery)."""
        if self.phase not in ACTIVE:
            return
        upgraded = self.version_of(worker_id) != self.stable or worker_id in self.batch
        if upgraded or self.phase in SWITCHING:
            self._abort(f"worker {worker_id} failed during the upgrade ({reason})",
                        revert_all=upgraded)

    def on_new_generation(self, reason: str) -> None:
        """The core starts a recovery: a switch in progress cannot go on."""
        if self.phase in SWITCHING:
            self._abort(f"recovery during the switch: {reason}", revert_all=False)

    def on_ready(self, msg: Any) -> bool:
        """A worker answered Prepare. True = it was one of ours."""
        if self.phase != UpgradePhase.RESTORING or msg.worker_id not in self.batch \
                or msg.generation != self.core.generation:
            return False
        then = self._ready_then
        if not msg.ok:
            self._ready_then = None
            if then is not None:
                then(f"worker {msg.worker_id} failed to prepare on {self.batch_version}: "
                     f"{msg.error}")
            return True
        self.ready.add(msg.worker_id)
        if self.ready >= set(self.batch) and then is not None:
            self._ready_then = None
            then("")
        return True

    def tick(self, now: float) -> None:
        """Drive the switch: quiesce, watch the checkpoint, time-outs, expiry."""
        core = self.core
        if self.phase in SWITCHING and core.state in TERMINAL_STATES:
            self._abort(f"the topology is {core.state}", revert_all=False)  # never proceeds
            return
        if self.phase in SWITCHING and core.state == TopologyState.RUNNING:
            timed_out = self._step_timeout(now)
            if timed_out:
                self._abort(timed_out, revert_all=True, recover=True)
                return
        if self._drive_to_cut():
            return
        if self.phase == UpgradePhase.UPGRADING and core.state == TopologyState.RUNNING:
            if now - self.started_at > core.config.upgrade_expiry_ms / 1000.0:
                log.warning("upgrade to %s abandoned for %.0f s: rolling back", self.target,
                            now - self.started_at)
                self.error = "upgrade expired (upgrade_expiry_ms): rolled back"
                self._begin("rollback", self._upgraded_workers(), self.stable)

    # -- user actions (gRPC) ---------------------------------------------------------------------
    def request(self, action: str, package: bytes = b"", entry: str = "",
                workers: list[int] | None = None, component: str = "",
                count: int = 0) -> dict[str, Any]:
        """Start / continue / complete / roll back; returns the status. JStormError = refused."""
        if action == "status":
            return self.status()
        if action == "start":
            return self._start(package, entry, workers or [], component, count)
        if action == "rescale":
            if workers or component or count:
                raise JStormError("an upgrade that changes parallelism switches every worker "
                                  "at once: --rescale takes no --workers, --component or -n")
            return self._start_rescaling(package, entry)
        with self.core.lock:
            self._check_can_act()
            if self.phase != UpgradePhase.UPGRADING:
                raise JStormError(f"no upgrade in progress (phase {self.phase})")
            if action == "continue":
                pending = [w for w in range(self.core.config.workers)
                           if self.version_of(w) != self.target]
                batch = self._select(workers or [], component, count, pending) \
                    if (workers or component or count) else pending[:max(self.batch_size, 1)]
                batch = [w for w in batch if w in pending]
                if not batch:
                    raise JStormError("every selected worker already runs "
                                      f"{self.target}; use --complete")
                assert self.target is not None
                self._begin("upgrade", batch, self.target)
            elif action == "complete":
                assert self.target is not None
                pending = [w for w in range(self.core.config.workers)
                           if self.version_of(w) != self.target]
                if pending:
                    self._begin("complete", pending, self.target)
                else:
                    self._finish_complete()
            elif action == "rollback":
                self.error = ""
                self._begin("rollback", self._upgraded_workers(), self.stable)
            else:
                raise JStormError(f"unknown upgrade action {action!r}")
            return self.status()

    def _check_can_act(self) -> None:
        if self.core.state != TopologyState.RUNNING:
            raise JStormError(f"the topology is {self.core.state}; try again when running")
        if self.phase in SWITCHING:
            raise JStormError(f"a switch is in progress ({self.phase}); wait for it")
        if not self.core.rescale.is_idle():
            raise JStormError(f"a rescale is in progress ({self.core.rescale.phase}); wait")
        if self.store is None:
            raise JStormError("this Topology Master has no run directory for code packages")

    def _start(self, package: bytes, entry: str, workers: list[int], component: str,
               count: int) -> dict[str, Any]:
        with self.core.lock:
            self._check_can_act()
            if self.phase == UpgradePhase.UPGRADING:
                raise JStormError(f"an upgrade to {self.target} is in progress: continue, "
                                  "complete or roll it back first")
            if not package:
                raise JStormError("upgrade start needs a code package")
            selected = self._select(workers, component, count,
                                    list(range(self.core.config.workers)))
        assert self.store is not None and self.run_dir is not None
        known = set(self.store.versions)
        label = self.store.add(package, entry)
        if label == self.stable:
            raise JStormError(f"the package is the code already running ({label})")
        try:
            new = self._info(label)   # runs user code, in a child process, without the lock
            old = self._info(self.stable)
            problems = check_compatible(old, new)
            if problems:
                hint = "\n(the new code changes parallelism: upgrade with --rescale to " \
                    "switch every worker to it in one step)" \
                    if parallelism_changes(old, new) else ""
                raise JStormError(f"the new code ({label}) is not compatible with the running "
                                  f"topology ({self.stable}); nothing was changed:\n  - " +
                                  "\n  - ".join(problems) + hint)
        except JStormError:
            self._forget_unless(label, known)
            raise
        with self.core.lock:
            self._check_can_act()
            if self.phase == UpgradePhase.UPGRADING:
                raise JStormError("another upgrade started meanwhile")
            self.target = label
            self.error = ""
            self.started_at = time.monotonic()
            self.batch_size = len(selected)
            self._begin("upgrade", selected, label)
            return self.status()

    def _start_rescaling(self, package: bytes, entry: str) -> dict[str, Any]:
        """``upgrade --rescale``: new code that may declare other parallelisms replaces the
        running code on every worker in one quiescent step, an in-place rescale whose new
        layout runs the new package (master/rescale.py). Returns the upgrade state plus
        ``"rescale"`` (its ``requested`` numbers the rescale to wait for)."""
        with self.core.lock:
            self._check_can_act()
            if self.phase == UpgradePhase.UPGRADING:
                raise JStormError(f"an upgrade to {self.target} is in progress: complete or "
                                  "roll it back before an upgrade that changes parallelism")
            if not package:
                raise JStormError("upgrade --rescale needs a code package")
        assert self.store is not None
        known = set(self.store.versions)
        label = self.store.add(package, entry)
        if label == self.stable:
            raise JStormError(f"the package is the code already running ({label}); change "
                              "parallelism with jstorm rescale")
        try:
            new, old = self._info(label), self._info(self.stable)
            problems = check_compatible(old, new, allow_parallelism=True)
            changes = parallelism_changes(old, new)
            if not problems and not changes:
                problems = ["the new code declares the parallelism already running: upgrade "
                            "without --rescale (a gray release keeps the other workers "
                            "running)"]
            if problems:
                raise JStormError(f"the new code ({label}) cannot replace the running topology "
                                  f"({self.stable}); nothing was changed:\n  - "
                                  + "\n  - ".join(problems))
            rescale = self.core.rescale.request(changes, code=label,
                                                descriptor=new["descriptor"])
        except JStormError:
            self._forget_unless(label, known)
            raise
        return {**self.status(), "rescale": rescale}

    def _forget_unless(self, label: str, known: set[str]) -> None:
        """Drop a refused package whole unless it was known before this request (a later
        upload may then reuse the label)."""
        if label not in known:
            assert self.store is not None
            self.store.remove(label)
            self.infos.pop(label, None)

    def layout_rescaled(self, code: str) -> None:
        """A rescale committed (under the lock): a later upgrade compares packages with the
        new layout; with ``code`` (``upgrade --rescale``) every worker runs that package."""
        if code:
            self.stable, self.target, self.assigned = code, None, {}
            self.phase, self.kind, self.error = UpgradePhase.COMPLETED, "rescale", ""
        self.infos.clear()

    def rescale_aborted(self, code: str, reason: str) -> None:
        """An ``upgrade --rescale`` to ``code`` aborted: the upgrade's error says why."""
        self.error = f"upgrade --rescale to {code} aborted: {reason}"

    def record_switch(self, record: dict[str, Any]) -> None:
        """A switch done outside a gray release (a rescaling upgrade), in its history."""
        self.switches.append(record)

    def assignment_json(self, stable: str) -> bytes:
        """``code/assignment.json`` once every worker runs ``stable``."""
        return json.dumps({"stable": stable, "target": None, "assigned": {}}).encode()

    def _info(self, label: str) -> dict[str, Any]:
        if label in self.infos:
            return self.infos[label]
        assert self.store is not None and self.run_dir is not None
        if label == STABLE:
            info = inspect_topology(pickle_path=str(self.run_dir / "topology.pkl"))
        else:
            meta = self.store.versions[label]
            info = inspect_topology(package=str(self.store.dir / meta["file"]),
                                    entry=meta["entry"])
        self.infos[label] = info
        return info

    def _select(self, workers: list[int], component: str, count: int,
                candidates: list[int]) -> list[int]:
        n = self.core.config.workers
        if sum(bool(x) for x in (workers, component, count)) != 1:
            raise JStormError("select the workers with exactly one of --workers, --component "
                              "or -n")
        if workers:
            bad = [w for w in workers if not 0 <= w < n]
            if bad:
                raise JStormError(f"no worker(s) {bad}: worker ids are 0..{n - 1}")
            return sorted(set(workers))
        if component:
            tasks = self.core.component_tasks.get(component)
            if tasks is None:
                raise JStormError(f"no component {component!r} (components: "
                                  f"{', '.join(self.core.component_tasks)})")
            hosts = {self.core.plan[t] for t in tasks}
            return [w for w in candidates if w in hosts]
        if count < 1:
            raise JStormError("-n needs a number >= 1")
        if count > len(candidates):
            raise JStormError(f"-n {count}: the topology has {n} workers and {len(candidates)} "
                              f"can be switched now ({candidates}); give -n "
                              f"{len(candidates)} or fewer")
        return candidates[:count]

    def _upgraded_workers(self) -> list[int]:
        return [w for w in range(self.core.config.workers) if self.version_of(w) != self.stable]

    # -- the switch ------------------------------------------------------------------------------
    def _begin(self, kind: str, batch: list[int], version: str) -> None:
        now = time.monotonic()
        self.kind = kind
        self.batch = sorted(batch)
        self.batch_version = version
        self.registered = set()
        self.ready = set()
        if not self.batch:
            self.checkpoint_id = None
            self._finish_batch()
            return
        log.info("upgrade: %s workers %s to %s", kind, self.batch, version)
        self._hold(now)
        self.tick(now)

    def _quiescence_failed(self, reason: str) -> None:
        self._abort(reason, revert_all=False, resume=True)

    def _quiesced(self) -> None:
        """Steps 3-5: master/upgrade_steps.py's step list, through this controller's port."""
        assert self.checkpoint_id is not None
        perform_switch(SwitchSteps(self.checkpoint_id), _ControllerPort(self))

    def _resume(self) -> None:
        core = self.core
        now = time.monotonic()
        self.marks["ready"] = now
        for w in self.batch:
            self._batch_session(w).send(start=pb.Start(generation=core.generation))
        self._resume_spouts()
        core.checkpoints.note_trigger(now)
        m = self.marks
        record = {
            "kind": self.kind, "workers": list(self.batch), "to": self.batch_version,
            "checkpoint": self.checkpoint_id, "generation": core.generation,
            "time": time.time(),
            "pause_ms": round((now - m["pause"]) * 1000, 1),
            "total_ms": round((now - self.t_start) * 1000, 1),
            "quiesce_ms": round((m["quiesced"] - m["pause"]) * 1000, 1),
            "restart_ms": round((m["registered"] - m["quiesced"]) * 1000, 1),
            "restore_ms": round((m["ready"] - m["registered"]) * 1000, 1),
            "untouched_pids": {str(s.worker_id): s.pid for s in core.alive_sessions()
                               if s.worker_id not in self.batch},
        }
        self.switches.append(record)
        log.info("upgrade: workers %s now run %s; untouched workers paused %.0f ms "
                 "(switch %.0f ms)", self.batch, self.batch_version, record["pause_ms"],
                 record["total_ms"])
        self._finish_batch()

    def _batch_session(self, worker_id: int) -> WorkerSession:
        """A batch worker's session: it registered on its new code before the switch
        restores it."""
        session = self.core.session(worker_id)
        assert session is not None, f"batch worker {worker_id} never registered"
        return session

    def _finish_batch(self) -> None:
        self.batch = []
        self.checkpoint_id = None
        if self.kind == "rollback":
            self.phase = UpgradePhase.ROLLED_BACK
            self.target = None
            self.assigned = {}
        elif self.kind == "complete":
            self._finish_complete()
        else:
            self.phase = UpgradePhase.UPGRADING
            self.started_at = time.monotonic()  # the expiry counts from the last action
        self._persist()

    def _finish_complete(self) -> None:
        assert self.target is not None
        self.stable = self.target
        self.target = None
        self.assigned = {}
        self.phase = UpgradePhase.COMPLETED
        self._persist()
        log.info("upgrade complete: every worker runs %s", self.stable)

    def _abort(self, reason: str, revert_all: bool, recover: bool = False,
               resume: bool = False) -> None:
        """Give up the current switch (and with ``revert_all`` the whole upgrade)."""
        core = self.core
        log.error("upgrade aborted: %s", reason)
        self.error = reason
        self._record_error(reason)
        if revert_all or self.kind == "rollback":
            revert_all = True  # a failed rollback still ends on the stable code
            self.assigned = {}
            self.target = None
        else:
            for w in self.batch:  # the batch was on the stable code before this switch
                self.assigned.pop(w, None)
        self._persist()
        self.batch = []
        self.checkpoint_id = None
        self._registered_then = self._ready_then = None
        self.phase = UpgradePhase.UPGRADING \
            if any(v != self.stable for v in self.assigned.values()) \
            else UpgradePhase.ROLLED_BACK if revert_all else UpgradePhase.IDLE
        if self.phase == UpgradePhase.UPGRADING:
            self.started_at = time.monotonic()
        else:
            self.target = None
        for s in core.alive_sessions():  # a topology that ended restarts no worker
            if s.code_version != self.version_of(s.worker_id) \
                    and core.state not in TERMINAL_STATES:
                self._restart(s, "upgrade aborted: back to the stable code")
        if resume and core.state == TopologyState.RUNNING \
                and len(core.alive_sessions()) == core.config.workers:
            self._resume_spouts()
        elif recover and core.state == TopologyState.RUNNING:
            core.begin_recovery(f"upgrade aborted: {reason}")

    # -- reporting -----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """``status()["upgrade"]``."""
        core = self.core
        now = time.monotonic()
        expires = None
        if self.phase == UpgradePhase.UPGRADING:
            expires = round(core.config.upgrade_expiry_ms / 1000.0 - (now - self.started_at), 1)
        last = self.switches[-1] if self.switches else None
        return {
            "phase": self.phase.value, "kind": self.kind, "stable_version": self.stable,
            "target_version": self.target,
            "versions": {str(w): self.version_of(w) for w in range(core.config.workers)},
            "batch": list(self.batch), "batch_version": self.batch_version,
            "checkpoint": self.checkpoint_id, "error": self.error,
            "expires_in_s": expires,
            "last_pause_ms": last["pause_ms"] if last else None,
            "last_switch_ms": last["total_ms"] if last else None,
            "switches": self.switches[-20:],
            "packages": sorted(self.store.versions) if self.store is not None else [],
        }


class _ControllerPort:
    """How the Topology Master performs a switch's steps
    (:class:`~jstormpy.master.upgrade_steps.SwitchPort`): under ``core.lock``, the
    checkpoint's read on the TM's BackendIO thread (never under the lock)."""

    def __init__(self, upgrade: UpgradeController) -> None:
        self.upgrade, self.core = upgrade, upgrade.core

    def stop_batch(self, then: Callable[[], None]) -> None:
        """Stop the batch: its workers restart on their new version."""
        u = self.upgrade
        u.phase = UpgradePhase.STOPPING
        u._registered_then = then
        for w in u.batch:
            u.assigned[w] = u.batch_version
        u._persist()
        for w in u.batch:
            s = self.core.session(w)
            if s is not None and s.alive:
                u._restart(s, f"switching to code {u.batch_version}")

    def read_checkpoint(self, quiescent: int,
                        then: Callable[[Mapping[int, str], str], None]) -> None:
        """Every batch worker registered on its new code: read the quiescent checkpoint's
        snapshot handles on the TM's backend thread, then go on under the lock."""
        u = self.upgrade
        now = time.monotonic()
        u.marks["registered"] = now
        u.t_step = now
        u.phase = UpgradePhase.RESTORING
        self.core.backend_io.submit(lambda: self._read(quiescent, then))

    def _read(self, cid: int, then: Callable[[Mapping[int, str], str], None]) -> None:
        u, core = self.upgrade, self.core
        error = ""
        restores: dict[int, str] = {}
        try:
            if core.stateful:  # at_most_once writes no commit point: nothing to restore
                meta = core.backend.read_metadata(cid)
                restores = {int(t): v["handle"] for t, v in meta["tasks"].items()}
        except (BackendError, KeyError, ValueError) as exc:
            error = str(exc)
        with core.lock:
            if u.phase != UpgradePhase.RESTORING or u.checkpoint_id != cid:
                return  # aborted meanwhile (a worker lost, a recovery, a time-out)
            then(restores, error)

    def prepare_batch(self, quiescent: int, handles: Mapping[int, str],
                      then: Callable[[str], None]) -> None:
        u, core = self.upgrade, self.core
        u._ready_then = then
        peers = core.peer_addresses()
        core.broadcast(peers=pb.Peers(peers=peers, generation=core.generation))
        for w in u.batch:
            tasks = [t for t, wid in core.plan.items() if wid == w]
            u._batch_session(w).send(prepare=pb.Prepare(
                generation=core.generation, checkpoint_id=quiescent, task_ids=tasks,
                restores=[pb.TaskRestore(task_id=t, handle=handles.get(t, "")) for t in tasks],
                peers=peers, task_workers=core.plan, partial=True,
                restored_checkpoint_id=quiescent))

    def resume(self) -> None:
        self.upgrade._resume()

    def abort(self, reason: str) -> None:
        self.upgrade._abort(reason, revert_all=True, recover=True)
