"""The embedded default launcher: a Topology Master and worker processes on this machine.

``LocalCluster`` plays Storm's supervisor: it starts the processes, restarts any that
die (a Topology Master restarted with ``--resume`` rolls the topology back to its last
completed checkpoint), and stops them all when the topology is killed or the cluster
is closed.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jstormpy import compiled, pickling
from jstormpy.api.config import Config, as_config
from jstormpy.api.errors import ConfigError, JStormError, TopologyError, TopologyStopped
from jstormpy.api.failure import (
    FINAL_STATUS_FILE,
    INTERRUPTED,
    MASTER_ERROR_FILE,
    describe_failure,
)
from jstormpy.api.topology import Topology
from jstormpy.cli.client import MasterClient, Registration, jstorm_home
from jstormpy.deploy.cpu_placement import worker_cpus
from jstormpy.deploy.forkserver import (
    ForkServer,
    forkserver_enabled,
    preload_launcher,
    zygote_env,
)
from jstormpy.deploy.launch_lock import submit_lock
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.operations.codepkg import UPGRADE_EXIT_CODE, build_package
from jstormpy.picklecheck import dump_topology
from jstormpy.security.tls import TLS_DIR_ENV, copy_certs_dir, create_topology_tls
from jstormpy.security.tokens import SECRET_ENV, new_secret
from jstormpy.state_backends import check_backend_options

log = logging.getLogger("jstormpy.deploy.local")
# how long LocalCluster() waits for its zygote to import the engine before starting cold
ZYGOTE_READY_S = 60.0
# longest Status long poll of TopologyHandle.wait() (it notices a launcher giving up this often)
WAIT_POLL_S = 0.5


def exit_text(code: int) -> str:
    """``was killed by SIGKILL`` / ``exited with code 1``: a process's end, in words."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exited with code {code}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host``."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_guarantee(topology: Topology, config: Config) -> None:
    """Refuse topologies whose spouts cannot honour the configured guarantee."""
    if config.guarantee == "at_most_once":
        return
    for spec in topology.spouts():
        cls = spec.cls
        replayable = callable(getattr(cls, "snapshot", None)) and callable(
            getattr(cls, "restore", None))
        if not replayable:
            raise TopologyError(
                f"spout {spec.name!r} ({cls.__name__}) is not replayable: guarantee="
                f"{config.guarantee!r} needs spouts that implement snapshot() and restore() "
                "(their read position), so a rollback can rewind them; use a replayable "
                "spout or guarantee='at_most_once'")
        # a component's own refusal (a multilang spout declared without message ids)
        check = getattr(spec.obj, "check_guarantee", None)
        if callable(check) and not inspect.isclass(spec.obj):
            check(config.guarantee, spec.name)


def check_fresh_output(topology: Topology) -> None:
    """Before a run that does not resume: refuse sinks whose output location holds an
    earlier run's committed output (``FileSink.check_fresh_run``); checkpoint ids restart
    at 1 in a fresh run and would collide with it.

    Raises:
        SinkError: A sink's output directory is in use; the message names it.
    """
    for spec in topology.components.values():
        check = getattr(spec.obj, "check_fresh_run", None)
        if callable(check) and not inspect.isclass(spec.obj):
            check()


def check_submission(topology: Topology, config: Config) -> None:
    """Everything every launcher checks before it starts anything (one shared path).

    Raises:
        TopologyError: Not a built topology, or spouts that cannot honour the guarantee.
        ConfigError: An invalid config, an unknown ``state_backend_options`` key, or a
            ``memory://`` backend (not shared between processes).
    """
    if not isinstance(topology, Topology):
        raise TopologyError("submit() needs a built Topology (call TopologyBuilder.build())")
    config.validate()
    check_guarantee(topology, config)
    check_backend_options(config.state_backend, config.state_backend_options)
    if config.state_backend.startswith("memory://"):
        raise ConfigError("Config.state_backend='memory://' cannot be shared between the "
                          "Topology Master and worker processes; use file:///dir (default) "
                          "or hdfs://")


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as the Topology Master sees it."""

    id: int
    pid: int | None
    tasks: tuple[int, ...]
    code_version: str | None
    alive: bool


class TopologyHandle:
    """A submitted topology: wait for it, inspect it, control it."""

    def __init__(self, name: str, client: MasterClient, launcher: Supervisor | None) -> None:
        self.name = name
        self.client = client
        self._launcher = launcher

    @property
    def launcher(self) -> Supervisor | None:
        """The local launcher that starts and restarts this topology's processes (None for
        a handle attached to a topology another process launched); the chaos harness reads
        its process table to pick kill targets."""
        return self._launcher

    @property
    def run_dir(self) -> Path | None:
        """Where the run's files and logs are."""
        return self._launcher.run_dir if self._launcher else None

    @property
    def master_pid(self) -> int | None:
        """PID of the Topology Master process (local launcher only)."""
        return self._launcher.master_pid() if self._launcher else None

    def status(self) -> dict[str, Any]:
        """The TM's status report."""
        return self.client.status()

    def metrics(self, component: str = "") -> dict[str, Any]:
        """Metrics aggregated task → component → worker → topology."""
        return self.client.metrics(component)

    def workers(self) -> list[WorkerInfo]:
        """The workers with their PIDs, tasks and code version."""
        return [WorkerInfo(w["id"], w["pid"], tuple(w["tasks"]), w["code_version"], w["alive"])
                for w in self.status()["workers"]]

    def checkpoint(self, timeout_s: float = 30.0) -> int:
        """Force a checkpoint; returns its id once completed."""
        return self.client.checkpoint(timeout_s)

    def last_completed_checkpoint(self) -> int | None:
        """Id of the newest completed checkpoint, or None."""
        last = self.status().get("last_completed_checkpoint")
        return int(last["id"]) if last else None

    def savepoint(self, uri: str | None = None, stop: bool = False) -> str:
        """Write a savepoint (docs/savepoints.md) and return its URI; with ``stop``, kill
        the topology afterwards. Default place: ``$JSTORM_HOME/savepoints/NAME/``."""
        from jstormpy.operations.savepoints import savepoint_run

        if self.run_dir is None:
            raise JStormError("savepoint() needs the handle returned by submit()")
        force = self.client.checkpoint_committed if stop else self.checkpoint
        return savepoint_run(self.run_dir, force, uri, jstorm_home(),
                             self.kill if stop else None)

    def rollback(self, to: int | None = None) -> int:
        """Roll back to a completed checkpoint (latest if None); returns its id."""
        return self.client.rollback(to)[0]

    def upgrade(self, code: str | None = None, action: str = "start", *,
                workers: list[int] | tuple[int, ...] = (), component: str = "", n: int = 0,
                entry: str = "", wait: bool = True, timeout_s: float = 180.0,
                rescale: bool = False) -> dict[str, Any]:
        """Gray release (docs/upgrade.md): ``action`` is start (with ``code``: a zip, a
        directory or a .py file), continue, complete or rollback. With ``wait``, returns
        once the switch is over; the upgrade state (``status()["upgrade"]``).

        ``rescale=True`` (with ``code``): the new code may declare other parallelisms; every
        worker switches to it in one in-place rescale (docs/rescaling.md). The state then
        also has ``"rescale"`` (without ``wait``), and the last of ``switches`` is the
        rescale's record (``pause_ms``, ``total_ms``, ``changes``)."""
        package = b""
        if code is not None:
            package, entry = build_package(code, entry)
        if rescale:
            if code is None or action != "start" or workers or component or n:
                raise JStormError("upgrade(rescale=True) takes the new code only: every "
                                  "worker switches to it at the parallelism it declares")
            state = self.client.upgrade("rescale", package, entry)
            if wait:
                r = state["rescale"]
                self.client.wait_rescale(int(r["requested"]), dict(r["changes"]), timeout_s)
                state = self.client.status()["upgrade"]
            return state
        state = self.client.upgrade(action, package, entry, workers, component, n)
        return self.client.wait_upgrade(timeout_s) if wait else state

    def rescale(self, parallelism: dict[str, int], *, workers: int = 0, wait: bool = True,
                timeout_s: float = 180.0) -> dict[str, Any]:
        """Change the parallelism of running components, keeping every key's state
        (docs/rescaling.md), e.g. ``handle.rescale({"count": 4, "split": 1})``;
        ``workers=3`` also changes the number of worker processes. With ``wait``, returns
        once the new layout runs: the rescale's record (``pause_ms``, ``total_ms``, ...).
        JStormError names the component when it is refused."""
        state = self.client.rescale(dict(parallelism), workers)
        if not wait:
            return state
        return self.client.wait_rescale(int(state["requested"]), dict(parallelism), timeout_s,
                                        workers)

    def wait(self, timeout: float | None = None, poll_s: float = 0.01) -> dict[str, Any]:
        """Block until the topology is drained (every spout finished and all output
        committed); returns the final status. Raises TimeoutError, TopologyStopped (it was
        stopped on request) or JStormError (it failed).

        Each status call is a long poll (the TM answers when the state becomes terminal,
        or after ``WAIT_POLL_S``); ``poll_s`` is the pause after a failed call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        status: dict[str, Any] = {}
        while True:
            hold = WAIT_POLL_S if deadline is None else \
                max(0.0, min(WAIT_POLL_S, deadline - time.monotonic()))
            asked = time.monotonic()
            try:
                status = self.client.status(timeout=5.0 + hold, wait_terminal_s=hold)
            except JStormError:
                status = {"state": "unreachable"}  # the TM may be restarting
            state = status.get("state")
            if state in TERMINAL_STATES and self.run_dir is not None:
                write_final_status(self.run_dir, status)
            if state == TopologyState.DRAINED:
                return status
            if state == TopologyState.KILLED:  # only the Kill call sets it: a planned stop
                last = (status.get("last_completed_checkpoint") or {}).get("id")
                raise TopologyStopped(f"topology {self.name!r} was stopped on request "
                                      f"(jstorm kill, jstorm savepoint --stop or kill()) "
                                      f"before it drained; last completed checkpoint: "
                                      f"{'#' + str(last) if last else 'none'}")
            if state in (TopologyState.FAILED, TopologyState.KILLED):
                raise JStormError(describe_failure(self.name, status))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"topology {self.name!r} not drained within {timeout} s "
                                   f"(state: {state})")
            if self._launcher is not None and self._launcher.gave_up:
                raise JStormError(f"topology {self.name!r}: {self._launcher.gave_up}")
            if time.monotonic() - asked < hold:  # not held (a TM restarting, say)
                time.sleep(poll_s)

    def abandon(self, reason: str) -> None:
        """SIGKILL the Topology Master and the workers now, without a word to them (an
        ``--ha`` leader that lost its ZooKeeper session: a successor may already run);
        ``wait()`` then raises JStormError(``reason``). Local launcher only."""
        if self._launcher is None:
            raise JStormError("abandon() needs the handle returned by submit()")
        self._launcher.abandon(reason)

    def kill(self, reason: str = "") -> None:
        """Stop the topology and its processes (``reason``: kept in its final status)."""
        if self._launcher is not None:
            self._launcher.shutdown(reason or "cluster shut down")
        else:
            self.client.kill(reason or "killed by the client")


class Supervisor:
    """Starts and restarts the TM and worker processes of one topology."""

    def __init__(self, name: str, run_dir: Path, config: Config, secret: str, port: int,
                 resume: bool, extra_env: dict[str, str] | None = None,
                 fork: bool = True, cpus: Sequence[int] = ()) -> None:
        self.name = name
        self.run_dir = run_dir
        self.config = config
        self.secret = secret
        self.port = port
        self.address = f"{config.host}:{port}"
        self.resume = resume
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = threading.Event()
        self.gave_up = ""
        self.restarts = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._watch, name=f"supervisor-{name}",
                                       daemon=True)
        self.fork = fork
        self.cpus = list(cpus)
        """The CPU of each worker id (``deploy/cpu_placement.py``; none: the OS places)."""
        self.forkserver: ForkServer | None = None
        self.base_env = zygote_env(extra_env)  # what a zygote for this topology starts with
        self.env = dict(self.base_env)
        self.env[SECRET_ENV] = secret
        self.tls_dir = str(run_dir / "tls") if config.tls else ""
        self.env[TLS_DIR_ENV] = self.tls_dir  # TM and workers find their certificates here
        self.env["JSTORM_RUN_DIR"] = str(run_dir)  # ops: per-task logs under run_dir/logs/tasks
        self.env["JSTORM_RESIZABLE_WORKERS"] = "1"  # a rescale may change the worker count

    def _log(self, name: str) -> Any:
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return open(logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child

    def start_master(self, resume: bool) -> None:
        args = [sys.executable, "-m", "jstormpy.master", "--run-dir", str(self.run_dir),
                "--port", str(self.port), "--launcher-pid", str(os.getpid())]
        if resume:
            args.append("--resume")
        forked = self._forked("master", args)
        if forked is not None:
            self.master = forked
            return
        with self._log("master") as out:
            self.master = subprocess.Popen(args, env=self.env, stdout=out, stderr=out,
                                           stdin=subprocess.DEVNULL)

    def start_worker(self, worker_id: int) -> None:
        args = [sys.executable, "-m", "jstormpy.runtime.worker", "--tm", self.address,
                "--worker-id", str(worker_id), "--log-level", self.config.log_level]
        if worker_id < len(self.cpus):
            args += ["--cpu", str(self.cpus[worker_id])]
        forked = self._forked(f"worker-{worker_id}", args)
        if forked is not None:
            self.workers[worker_id] = forked
            return
        with self._log(f"worker-{worker_id}") as out:
            self.workers[worker_id] = subprocess.Popen(args, env=self.env, stdout=out,
                                                       stderr=out, stdin=subprocess.DEVNULL)

    def _forked(self, log_name: str, args: list[str]) -> Any:
        """``args`` (``python -m MODULE ...``) forked from the zygote, or None (start cold)."""
        if self.forkserver is None or self.stopping.is_set():
            return None
        self._log(log_name).close()
        module = args[2] if args[2] != "jstormpy.master" else "jstormpy.master.__main__"
        return self.forkserver.launch(module, args[3:], self.env, os.getcwd(),
                                      self.run_dir / "logs" / f"{log_name}.log")

    def master_pid(self) -> int | None:
        return self.master.pid if self.master else None

    def start(self, zygote: ForkServer | None = None) -> None:
        """Start the TM and the workers at once (workers retry until the TM serves); return
        once the TM serves. ``zygote``: a ready one to fork from (LocalCluster's)."""
        if zygote is not None:
            self.forkserver = zygote
        elif self.fork and forkserver_enabled():
            self.forkserver = ForkServer(self.env, os.getcwd())
        self.start_master(self.resume)
        for wid in range(self.config.workers):
            self.start_worker(wid)
        try:
            self._await_master()
        except BaseException:
            self.stopping.set()
            for proc in [self.master, *self.workers.values()]:
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self._close_forkserver()
            raise
        self.thread.start()

    def _await_master(self) -> None:
        deadline = time.monotonic() + 60
        port_file = self.run_dir / "master.port"
        while not port_file.exists():
            if self.master is not None and self.master.poll() is not None:
                raise self._master_exited(self.master.returncode)
            if time.monotonic() > deadline:
                raise JStormError("Topology Master did not start within 60 s")
            time.sleep(0.005)

    def _master_exited(self, code: int) -> JStormError:
        """The TM died before serving: its own account of why (e.g. an unreachable state
        backend, from MASTER_ERROR_FILE), and where its log is."""
        error = self.run_dir / MASTER_ERROR_FILE
        why = f"{error.read_text().strip()}; " if error.exists() else ""
        return JStormError(f"Topology Master exited with code {code}: {why}"
                           f"see {self.run_dir / 'logs' / 'master.log'}")

    def _watch(self) -> None:
        while not self.stopping.wait(0.05):
            with self.lock:
                if self.stopping.is_set():
                    return
                master = self.master
                if master is not None and master.poll() is not None:
                    if master.returncode == 0:
                        self._stop_workers()
                        return
                    self._restart("Topology Master", master.returncode,
                                  lambda: self.start_master(resume=True))
                exited = [(w, p) for w, p in self.workers.items() if p.poll() is not None]
                if any(p.returncode != 0 for _w, p in exited):
                    self._sync_worker_count()  # a rescale (exit 75) may have changed it
                for wid, proc in exited:
                    if wid >= self.config.workers:
                        del self.workers[wid]  # the rescale stopped it: not a failure
                    elif proc.returncode != 0:
                        self._restart(f"worker {wid}", proc.returncode,
                                      lambda wid=wid: self.start_worker(wid))

    def _sync_worker_count(self) -> None:
        """Follow ``config.json``'s worker count (a rescale with ``workers`` commits a new
        one, then restarts the workers): start the new ids, forget the removed ones."""
        try:
            count = int(json.loads((self.run_dir / "config.json").read_text())["workers"])
        except (OSError, ValueError, KeyError):
            return
        if count == self.config.workers:
            return
        log.info("worker count %d -> %d (rescale)", self.config.workers, count)
        self.config = self.config.replace(workers=count)
        for wid in range(count):
            if wid not in self.workers:
                self.start_worker(wid)

    def _restart(self, what: str, code: int, start: Any) -> None:
        if code == UPGRADE_EXIT_CODE:  # told to restart on other code: not a failure
            log.info("%s exited to switch code; restarting it", what)
            start()
            return
        self.restarts += 1
        if self.restarts > self.config.max_restarts:
            self.gave_up = f"{what} died (exit {code}) and max_restarts is exhausted"
            log.error(self.gave_up)
            return
        log.warning("%s %s; restarting it", what, exit_text(code))
        start()

    def _stop_workers(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()

    def abandon(self, reason: str) -> None:
        """Stop supervising and SIGKILL every process at once (see TopologyHandle.abandon)."""
        self.stopping.set()
        self.gave_up = reason
        with self.lock:
            procs = [p for p in [self.master, *self.workers.values()] if p is not None]
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
            self._close_forkserver()

    def shutdown(self, reason: str = "cluster shut down") -> None:
        """Kill the topology (the TM tells the workers) and wait for every process; a run
        that had not ended yet gets its final status written, so that ``jstorm status
        NAME`` still answers for it."""
        self.stopping.set()
        with self.lock:
            client = MasterClient(self.address, self.secret.encode(), self.tls_dir)
            final: dict[str, Any] | None = None
            ended = (self.run_dir / FINAL_STATUS_FILE).exists()
            if not ended:
                with contextlib.suppress(JStormError):
                    final = client.status(timeout=2.0)
            live = final is not None and final.get("state") not in TERMINAL_STATES
            try:
                client.kill(reason)
            except JStormError:
                pass
            else:  # KILLED now: no checkpoint completes after this status
                if live:
                    with contextlib.suppress(JStormError):
                        final = client.status(timeout=2.0)
            finally:
                client.close()
            if final is not None and not ended:  # an ending the TM did not choose itself
                write_final_status(self.run_dir, {**final, "state": INTERRUPTED,
                                                  "stopped": reason} if live else final)
            procs = [p for p in [self.master, *self.workers.values()] if p is not None]
            deadline = time.monotonic() + 5
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(max(deadline - time.monotonic(), 0.01))
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
            self._close_forkserver()

    def _close_forkserver(self) -> None:
        if self.forkserver is not None:
            self.forkserver.close()
            self.forkserver = None


class LocalCluster:
    """Runs topologies as processes on this machine (the embedded default).

    Args:
        home: Where run directories and registrations live (default ``$JSTORM_HOME``).
        env: Extra environment for the TM and worker processes.
        fork: Fork the TM and workers of each topology from one pre-imported zygote
            (``jstormpy/deploy/forkserver.py``; start-up costs one import instead of one
            per process). The cluster starts it and returns once it is ready, so
            ``submit()`` only forks. False, or ``JSTORM_FORKSERVER=0``, starts each
            process cold.

    Example:
        with LocalCluster() as cluster:
            handle = cluster.submit(builder.build(), Config(workers=2))
            handle.wait(timeout=60)
    """

    def __init__(self, home: str | Path | None = None,
                 env: dict[str, str] | None = None, *, fork: bool = True) -> None:
        self.home = Path(home) if home else jstorm_home()
        self.env = dict(env or {})
        self.handles: list[TopologyHandle] = []
        compiled.announce()  # once per process: the record path is not compiled
        # fork the TM and workers from a pre-imported zygote (``fork=False`` or
        # JSTORM_FORKSERVER=0: start each process cold)
        self.fork = fork
        self._zygote: ForkServer | None = None
        if fork and forkserver_enabled():
            self._zygote = ForkServer.start_ready(zygote_env(self.env), os.getcwd(),
                                                ZYGOTE_READY_S, meanwhile=preload_launcher)
        else:
            preload_launcher()

    def _take_zygote(self, env: dict[str, str]) -> ForkServer | None:
        """The cluster's ready zygote if it started with the launch environment ``env``
        (else it is closed: the topology starts its own)."""
        zygote, self._zygote = self._zygote, None
        if zygote is None:
            return None
        if zygote.alive() and zygote.start_env == env \
                and zygote.cwd == os.getcwd():
            return zygote
        zygote.close()
        return None

    def submit(self, topology: Topology, config: Config | None = None, *,
               resume: bool = False, from_savepoint: str | None = None,
               allow_non_restored_state: bool = False) -> TopologyHandle:
        """Start ``topology``; returns its handle once the Topology Master is up.

        ``from_savepoint`` starts from a savepoint (possibly another parallelism or new
        code), refusing state of removed components unless ``allow_non_restored_state``.
        """
        config = as_config(config)  # a dict is converted, a typo named
        check_submission(topology, config)
        name = topology.name
        with submit_lock(self.home, name):  # one launcher at a time: deploy/launch_lock.py
            refuse_if_running(name, self.home)
            if not config.state_backend:
                config = config.replace(state_backend=f"file://{self.home / 'checkpoints' / name}")
            if from_savepoint:
                from jstormpy.operations.savepoints import prepare_restore

                prepare_restore(from_savepoint, topology, config, allow_non_restored_state)
                resume = True
            if not resume:
                check_fresh_output(topology)
            run_dir = write_run_dir(self.home, topology, config)
            secret = new_secret()
            port = free_port(config.host)
            cpus = worker_cpus(config, alone=not others_running(name, self.home))
            sup = Supervisor(name, run_dir, config, secret, port, resume, self.env, self.fork,
                             cpus)
            sup.start(self._take_zygote(sup.base_env) if self.fork else None)
            Registration(name, sup.address, secret, str(run_dir), os.getpid(),
                         sup.tls_dir).save(self.home)
        handle = TopologyHandle(name, MasterClient(sup.address, secret.encode(), sup.tls_dir),
                                sup)
        self.handles.append(handle)
        return handle

    def shutdown(self) -> None:
        """Kill every topology this cluster started (and stop its unused zygote)."""
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        for handle in self.handles:
            handle.kill()
            with contextlib.suppress(Exception):
                Registration.load(handle.name, self.home).remove(self.home)
        self.handles = []

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def write_final_status(run_dir: Path, status: dict[str, Any]) -> None:
    """Keep how a run ended in its run directory (``jstorm status NAME`` reads it).

    Two threads of the launcher may write it at once: ``wait()`` seeing the run end while
    ``kill()`` stops it. Each writes a temporary file of its own and renames it into place
    (the last rename wins, whole), so neither can move the other's file away mid-write."""
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=FINAL_STATUS_FILE + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(status))
        os.replace(tmp, run_dir / FINAL_STATUS_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def others_running(name: str, home: Path | None = None) -> bool:
    """Whether a topology other than ``name`` is registered under ``home`` by a live
    launcher (this process's included)."""
    return any(reg.name != name and _pid_alive(reg.launcher_pid)
               for reg in Registration.all(home))


def refuse_if_running(name: str, home: Path | None = None) -> None:
    """JStormError if a live launcher already runs a topology called ``name`` (registered
    under ``home``, default ``$JSTORM_HOME``)."""
    for reg in Registration.all(home):
        if reg.name == name and reg.launcher_pid != os.getpid() \
                and _pid_alive(reg.launcher_pid) and _master_answers(reg):
            raise JStormError(f"a topology named {name!r} is already running "
                              f"(launcher pid {reg.launcher_pid}, Topology Master at "
                              f"{reg.address}); kill it first: jstorm kill {name}")


def write_run_dir(home: Path, topology: Topology, config: Config) -> Path:
    """Create ``home/runs/NAME`` with what the Topology Master reads (topology.pkl,
    config.json, descriptor.json); logs and gray-upgrade code of an earlier run of the same
    name are dropped."""
    # first: a component that cannot be pickled is named; code objects keep the user's file
    # names (jstormpy.pickling), so tracebacks point into the user's file
    blob = dump_topology(topology, pickling.dumps)
    run_dir = home / "runs" / topology.name
    if run_dir.exists():
        shutil.rmtree(run_dir / "logs", ignore_errors=True)
        # an earlier run's gray upgrade (code/assignment.json, packages): this submit's
        # code is the file it gives, even on --resume or from a savepoint (docs/upgrade.md)
        shutil.rmtree(run_dir / "code", ignore_errors=True)
        (run_dir / "master.port").unlink(missing_ok=True)
        (run_dir / MASTER_ERROR_FILE).unlink(missing_ok=True)
        (run_dir / FINAL_STATUS_FILE).unlink(missing_ok=True)
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (run_dir / "topology.pkl").write_bytes(blob)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    (run_dir / "descriptor.json").write_text(json.dumps(topology.descriptor()))
    write_tls_dir(run_dir, topology.name, config)
    return run_dir


def write_tls_dir(run_dir: Path, name: str, config: Config) -> str:
    """``run_dir/tls`` for this submit (a fresh per-topology CA, or the CA/certificates
    the Config names); "" when ``Config.tls`` is off (docs/security.md)."""
    tls_dir = run_dir / "tls"
    shutil.rmtree(tls_dir, ignore_errors=True)
    if not config.tls:
        return ""
    if config.tls_certs_dir:
        return str(copy_certs_dir(config.tls_certs_dir, tls_dir))
    return str(create_topology_tls(tls_dir, name, config.tls_ca_cert, config.tls_ca_key))


def _master_answers(reg: Registration) -> bool:
    client = MasterClient.for_registration(reg)
    try:
        return client.status(timeout=2.0).get("state") not in TERMINAL_STATES
    except JStormError:
        return False
    finally:
        client.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
