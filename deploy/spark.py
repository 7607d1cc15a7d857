"""Run topologies on a Spark cluster: the Topology Master on the driver, each worker inside a
long-lived task of one barrier-mode stage (DESIGN §8).

    from pyspark.sql import SparkSession
    from jstormpy.deploy.spark import SparkCluster

    spark = SparkSession.builder.master("local[4]").getOrCreate()
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(topology, Config(workers=2))
        handle.wait(timeout=300)

How it maps onto Spark:

* ``submit`` starts the TM as a subprocess of the driver (exactly like the local launcher),
  checks the cluster has a task slot for every worker, then runs, in a driver thread, one
  job ``sc.parallelize(range(W), W).barrier().mapPartitions(run_worker)``. Task ``i`` starts
  ``python -m jstormpy.runtime.worker --tm DRIVER:PORT --worker-id i`` as a child process
  (the executor's Python, with the secret in its environment), waits for it and raises if
  it exits non-zero, which fails the Spark task.
* A failed task fails the barrier stage: Spark kills the other tasks (their workers die
  with them: they are started with ``PR_SET_PDEATHSIG``), and the driver thread resubmits
  the job, so every worker registers again. The TM sees the re-registrations and rolls the
  topology back to its last completed checkpoint as a new generation.
* When the topology drains (or is killed) every worker exits 0, the tasks end and so does
  the job. ``kill``/``shutdown`` also cancel the job group.

Entry point for ``spark-submit`` (the master comes from spark-submit)::

    spark-submit --master yarn --num-executors 2 --executor-cores 1 \\
        $(python -c 'import jstormpy.deploy.spark as m; print(m.__file__)') examples/wordcount.py

or, without spark-submit, ``python -m jstormpy.deploy.spark FILE --spark-master MASTER``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from jstormpy.api.config import Config, as_config
from jstormpy.api.errors import ConfigError, JStormError
from jstormpy.api.topology import Topology
from jstormpy.cli.client import MasterClient, Registration, jstorm_home
from jstormpy.deploy.launch_lock import submit_lock
from jstormpy.deploy.local import (
    Supervisor,
    TopologyHandle,
    check_fresh_output,
    check_submission,
    exit_text,
    free_port,
    refuse_if_running,
    write_run_dir,
)
from jstormpy.deploy.spark_logs import quiet_task_failures, restore_task_logging
from jstormpy.master.topology_state import TERMINAL_STATES
from jstormpy.operations.codepkg import UPGRADE_EXIT_CODE
from jstormpy.runtime.worker import WORKER_HOST_ENV, topology_hash_seed
from jstormpy.security.tls import TLS_DIR_ENV, pack_role, unpack_role
from jstormpy.security.tokens import SECRET_ENV, new_secret
from jstormpy.temp_dirs import process_temp_dir, remove_temp_dir

log = logging.getLogger("jstormpy.deploy.spark")

#: Spark settings the launcher needs at session creation (``create_session`` sets them):
#: without them a barrier job that cannot get its slots waits 40 x 15 s before failing.
SESSION_DEFAULTS = {
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "3",
    # the barrier stage runs for the topology's lifetime: a progress bar is only noise
    "spark.ui.showConsoleProgress": "false",
}

_LOCAL_RE = re.compile(r"^local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?$")
_LOCAL_CLUSTER_RE = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]$")
_SLOTS_ERROR = "BarrierJobSlotsNumberCheckFailed"
#: A job attempt failing this soon after submission, with no worker having registered with
#: the TM, is an "early failure"; this many in a row (workers that cannot start at all) end
#: the topology instead of resubmitting forever.
EARLY_FAILURE_S = 20.0
MAX_EARLY_FAILURES = 5


def is_local_master(master: str) -> bool:
    """True for masters whose executors run on this machine (local[N], local-cluster)."""
    return bool(_LOCAL_RE.match(master) or _LOCAL_CLUSTER_RE.match(master))


def create_session(master: str | None = None, app_name: str = "jstormpy",
                   conf: dict[str, str] | None = None) -> Any:
    """A SparkSession suited to the launcher: fast barrier slot checks and, for local
    masters, executors running this Python (``PYSPARK_PYTHON``). ``master=None`` takes the
    master from the environment (spark-submit)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    conf = dict(conf or {})
    if os.environ.get("JSTORM_SPARK_LOGS") != "spark" and \
            "spark.driver.extraJavaOptions" not in conf:
        # a quiet console (warnings and errors; deploy/log4j2-quiet.properties); applied
        # when the driver JVM starts, so only if this call starts it
        quiet = Path(__file__).with_name("log4j2-quiet.properties")
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{quiet}"
    if master:
        builder = builder.master(master)
        if is_local_master(master):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    for key, value in {**SESSION_DEFAULTS, **conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def task_slots(spark: Any) -> int:
    """How many tasks the cluster can run at once right now (barrier tasks need one each)."""
    sc = spark.sparkContext
    master = sc.master
    cpus = int(sc.getConf().get("spark.task.cpus", "1") or 1)
    m = _LOCAL_RE.match(master)
    if m:
        n = m.group(1)
        cores = 1 if n is None else (os.cpu_count() or 1) if n == "*" else int(n)
        return cores // cpus
    with contextlib.suppress(Exception):
        jsc = sc._jsc.sc()  # py4j: PySpark has no public API for resource profiles
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    return int(sc.defaultParallelism) // cpus


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """preexec_fn: SIGKILL this process when the Spark task's Python worker dies."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _log_tail(path: str, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - limit, 0))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def worker_task(spec: dict[str, Any]) -> Callable[[Iterator[Any]], Iterator[tuple[int, int]]]:
    """The barrier task function: run worker ``partitionId`` as a child process until it
    exits; raise (failing the task and so the stage) if it exits non-zero."""

    def run(_rows: Iterator[Any]) -> Iterator[tuple[int, int]]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        wid = ctx.partitionId()
        env = dict(os.environ)
        env[SECRET_ENV] = spec["secret"]
        env[TLS_DIR_ENV] = ""
        if spec.get("tls"):
            # mode 0700; removed below, or if this Python worker is killed, by the next
            # task's on this host (it holds the worker's key)
            tls_dir = process_temp_dir("jstorm-tls-")
            env[TLS_DIR_ENV] = str(unpack_role(spec["tls"], tls_dir))
        env["PYTHONHASHSEED"] = spec["hash_seed"]
        env["JSTORM_LAUNCH_ATTEMPT"] = str(spec.get("launch_attempt", 0))
        paths = [p for p in spec["python_path"] if os.path.isdir(p)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
            [*paths, *env.get("PYTHONPATH", "").split(os.pathsep)]))
        host = spec["worker_host"] or os.environ.get("SPARK_LOCAL_IP", "")
        if not host:
            with contextlib.suppress(Exception):
                host = ctx.getTaskInfos()[wid].address.rsplit(":", 1)[0]
        if host:
            env[WORKER_HOST_ENV] = host
        log_dir = spec["log_dir"]
        if not (os.path.isdir(log_dir) and os.access(log_dir, os.W_OK)):
            log_dir = os.path.join(tempfile.gettempdir(), f"jstorm-logs-{spec['name']}")
            os.makedirs(log_dir, exist_ok=True)
        log_path = os.path.join(log_dir, f"worker-{wid}.log")
        args = [sys.executable, "-m", "jstormpy.runtime.worker", "--tm", spec["tm"],
                "--worker-id", str(wid), "--log-level", spec["log_level"]]
        try:
            while True:
                with open(log_path, "ab") as out:
                    proc = subprocess.Popen(args, env=env, stdout=out,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=_die_with_parent)  # noqa: PLW1509
                try:
                    code = proc.wait()
                finally:
                    if proc.poll() is None:
                        proc.kill()
                if code != UPGRADE_EXIT_CODE:
                    break
                # told to restart on other code or a new layout (gray release, rescale):
                # not a failure, so the stage goes on
        finally:
            if env[TLS_DIR_ENV]:
                remove_temp_dir(env[TLS_DIR_ENV])
        if code != 0:  # the first line is what the launcher reports (_job_failure)
            raise RuntimeError(f"jstorm worker {wid} (pid {proc.pid}) {exit_text(code)}; "
                               f"log {log_path}\nlast lines of the log:\n"
                               f"{_log_tail(log_path)}")
        yield (wid, code)

    return run


def _job_failure(exc: BaseException) -> str:
    """The informative line of a failed job's (py4j) exception."""
    text = str(exc)
    for line in text.splitlines():
        if line.startswith("RuntimeError: jstorm worker"):
            return line.removeprefix("RuntimeError:").strip()[:500]
    for line in text.splitlines():
        if "Exception:" in line or "Error:" in line:
            return line.strip()[:500]
    return (text.strip().splitlines() or [type(exc).__name__])[0][:500]


class _SparkSupervisor(Supervisor):
    """The TM as a driver subprocess (restarted with --resume if it dies) and the workers
    as one barrier-mode Spark job (resubmitted when it fails)."""

    def __init__(self, spark: Any, name: str, run_dir: Path, config: Config, secret: str,
                 port: int, resume: bool, tm_host: str, worker_host: str,
                 slot_wait_s: float, extra_env: dict[str, str] | None = None) -> None:
        super().__init__(name, run_dir, config, secret, port, resume, extra_env)
        self.env["JSTORM_RESIZABLE_WORKERS"] = "0"  # one barrier stage: a fixed worker count
        self.spark = spark
        self.address = f"{tm_host}:{port}"
        self.worker_host = worker_host
        self.slot_wait_s = slot_wait_s
        self.group = f"jstormpy-{name}-{secret[:8]}"
        self.job_attempts = 0
        self.job_errors: list[str] = []
        self.early_failures = 0
        self.seen_pids: set[int] = set()
        self.quieted = False
        self.job_thread = threading.Thread(target=self._job_loop, name=f"spark-job-{name}",
                                           daemon=True)

    def wait_for_slots(self) -> None:
        """Raise ConfigError unless the cluster has a task slot per worker (waiting up to
        ``slot_wait_s`` for executors to register)."""
        need = self.config.workers
        deadline = time.monotonic() + self.slot_wait_s
        while True:
            have = task_slots(self.spark)
            if have >= need:
                return
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"Spark master {self.spark.sparkContext.master!r} has {have} task slot(s) "
                    f"but Config.workers={need} needs {need}: every worker holds one task slot "
                    f"of a barrier stage for the whole run; give the cluster more executor "
                    f"cores (or fewer workers)")
            time.sleep(0.5)

    def start(self) -> None:
        self.wait_for_slots()
        self.start_master(self.resume)
        deadline = time.monotonic() + 60
        port_file = self.run_dir / "master.port"
        while not port_file.exists():
            if self.master is not None and self.master.poll() is not None:
                raise self._master_exited(self.master.returncode)
            if time.monotonic() > deadline:
                raise JStormError("Topology Master did not start within 60 s")
            time.sleep(0.02)
        quiet_task_failures(self.spark.sparkContext)  # one line per failure (spark_logs.py)
        self.quieted = True
        self.job_thread.start()
        self.thread.start()

    def _spec(self) -> dict[str, Any]:
        return {"name": self.name, "secret": self.secret, "tm": self.address,
                "hash_seed": topology_hash_seed(self.name),
                "python_path": self.env["PYTHONPATH"].split(os.pathsep),
                "worker_host": self.worker_host, "log_dir": str(self.run_dir / "logs"),
                "log_level": self.config.log_level,
                # the TM drops a worker of an earlier attempt once one of this attempt registers
                "launch_attempt": self.job_attempts,
                # the workers' certificates travel inside the job's closure (never on a
                # command line); each task writes them to a private 0700 directory
                "tls": pack_role(self.tls_dir, "worker") if self.tls_dir else {}}

    def _client(self) -> MasterClient:
        return MasterClient(self.address, self.secret.encode(), self.tls_dir)

    def _topology_state(self) -> str:
        try:
            return str(self._client().status(timeout=5.0).get("state"))
        except JStormError:
            return "unreachable"

    def _registered_pids(self) -> set[int]:
        try:
            status = self._client().status(timeout=5.0)
        except JStormError:
            return set()
        return {int(w["pid"]) for w in status.get("workers", []) if w.get("pid")}

    def _job_loop(self) -> None:
        sc = self.spark.sparkContext
        workers = self.config.workers
        while not self.stopping.is_set():
            self.job_attempts += 1
            submitted = time.monotonic()
            sc.setJobGroup(self.group, f"jstormpy topology {self.name} "
                           f"(attempt {self.job_attempts})", interruptOnCancel=True)
            try:
                rdd = sc.parallelize(range(workers), workers)
                rdd.barrier().mapPartitions(worker_task(self._spec())).collect()
                failure = ""
            except Exception as exc:
                failure = _job_failure(exc)
                if _SLOTS_ERROR in str(exc):
                    failure = f"{_SLOTS_ERROR}: not enough task slots for {workers} workers"
            if self.stopping.is_set():
                return
            state = self._topology_state()
            if state in TERMINAL_STATES:
                return
            if failure:
                self.job_errors.append(failure)
                # a worker that cannot even start (not installed on the executors, bad
                # environment) fails every attempt at once: give up instead of looping
                pids = self._registered_pids()
                early = time.monotonic() - submitted < EARLY_FAILURE_S \
                    and not pids - self.seen_pids
                self.seen_pids |= pids
                self.early_failures = self.early_failures + 1 if early else 0
                if self.early_failures >= MAX_EARLY_FAILURES:
                    self.gave_up = (f"the Spark job of the workers failed {self.early_failures} "
                                    f"times in a row within {EARLY_FAILURE_S:.0f} s of its "
                                    f"submission; last: {failure}")
                    log.error(self.gave_up)
                    return
                if self.restarts < self.config.max_restarts:  # else gave_up says it below
                    # one line: which worker, why, and what is done about it
                    log.warning("%s: %s; resubmitting the workers' Spark job (restart %d of "
                                "max_restarts=%d)", self.name, failure, self.restarts + 1,
                                self.config.max_restarts)
            if failure.startswith(_SLOTS_ERROR):
                try:
                    self.wait_for_slots()
                except ConfigError as exc:
                    self.gave_up = str(exc)
                    return
            with self.lock:
                self.restarts += 1
                if self.restarts > self.config.max_restarts:
                    self.gave_up = (f"the Spark job of the workers failed {self.restarts} times "
                                    f"(max_restarts exhausted); last: {failure}")
                    log.error(self.gave_up)
                    return

    def _watch(self) -> None:
        while not self.stopping.wait(0.05):
            with self.lock:
                if self.stopping.is_set():
                    return
                master = self.master
                if master is not None and master.poll() is not None:
                    if master.returncode == 0:
                        return
                    self._restart("Topology Master", master.returncode,
                                  lambda: self.start_master(resume=True))

    def shutdown(self, reason: str = "cluster shut down") -> None:
        self.stopping.set()
        super().shutdown(reason)  # kills the TM: the workers are told to shut down and exit 0
        with contextlib.suppress(Exception):
            self.spark.sparkContext.cancelJobGroup(self.group)
        if self.job_thread.is_alive():
            self.job_thread.join(30)
        if self.quieted:
            self.quieted = False
            restore_task_logging(self.spark.sparkContext)


class SparkCluster:
    """Runs topologies with their workers inside Spark executors (same interface as
    :class:`~jstormpy.deploy.local.LocalCluster`).

    Args:
        spark: A SparkSession (or None: one is created with ``master``; it is stopped by
            :meth:`shutdown`). Sessions built by :func:`create_session` fail fast when slots
            are missing; others may wait ``spark.scheduler.barrier.maxConcurrentTasksCheck``
            times (default 10 minutes) once the up-front slot check has passed.
        master: Master URL used when ``spark`` is None.
        home: ``$JSTORM_HOME`` (runs, registry, default checkpoints for local masters).
        driver_host: Address executors reach the driver's TM at (default: 127.0.0.1 for
            local masters, else ``SPARK_LOCAL_IP`` or ``spark.driver.host``).
        slot_wait_s: How long ``submit`` waits for executors to offer one slot per worker
            (default 0 for local masters, 120 s otherwise).
        env: Extra environment for the TM process.
    """

    def __init__(self, spark: Any = None, *, master: str | None = None,
                 home: str | Path | None = None, driver_host: str | None = None,
                 slot_wait_s: float | None = None, env: dict[str, str] | None = None,
                 conf: dict[str, str] | None = None) -> None:
        self.owns_session = spark is None
        self.spark = spark if spark is not None else create_session(master, conf=conf)
        self.master = str(self.spark.sparkContext.master)
        self.local = is_local_master(self.master)
        self.home = Path(home) if home else jstorm_home()
        self.driver_host = driver_host
        local_cluster = bool(_LOCAL_CLUSTER_RE.match(self.master))
        self.slot_wait_s = slot_wait_s if slot_wait_s is not None else (
            120.0 if local_cluster or not self.local else 0.0)
        self.env = dict(env or {})
        self.handles: list[TopologyHandle] = []

    def _hosts(self, config: Config) -> tuple[Config, str, str]:
        """(config for the TM, address workers dial, address workers advertise)."""
        if self.local:
            return config, self.driver_host or config.host, config.host
        driver = self.driver_host or os.environ.get("SPARK_LOCAL_IP") or str(
            self.spark.sparkContext.getConf().get("spark.driver.host") or socket.getfqdn())
        if config.host in ("127.0.0.1", "localhost", "::1"):
            config = config.replace(host="0.0.0.0")  # the TM listens on every interface
        return config, driver, ""

    def submit(self, topology: Topology, config: Config | None = None, *,
               resume: bool = False, from_savepoint: str | None = None,
               allow_non_restored_state: bool = False) -> TopologyHandle:
        """Start ``topology``: the TM on the driver, then the workers' barrier job; returns
        the handle once the TM is up (the job starts in a driver thread).

        ``from_savepoint`` starts from a savepoint (possibly another parallelism or new
        code), as ``LocalCluster.submit`` does (docs/savepoints.md).

        Raises:
            ConfigError: Too few task slots for ``Config.workers``, dynamic allocation on, or
                no shared checkpoint storage on a non-local master.
        """
        config = as_config(config)  # a dict is converted, a typo named
        check_submission(topology, config)  # the same checks as LocalCluster, first
        conf = self.spark.sparkContext.getConf()
        if str(conf.get("spark.dynamicAllocation.enabled", "false")).lower() == "true":
            raise ConfigError("Spark dynamic allocation is on: barrier-mode stages (one "
                              "long-lived task per worker) need it off "
                              "(spark.dynamicAllocation.enabled=false)")
        name = topology.name
        if not config.state_backend:
            if not self.local:
                raise ConfigError(
                    f"Spark master {self.master!r} runs workers on other machines: set "
                    "Config.state_backend to shared storage (hdfs://namenode:9870/path)")
            config = config.replace(state_backend=f"file://{self.home / 'checkpoints' / name}")
        elif config.state_backend.startswith("file://") and not self.local:
            log.warning("state_backend %s on a cluster master: it must be a file system every "
                        "executor and the driver share (else use hdfs://)", config.state_backend)
        with submit_lock(self.home, name):  # see deploy/launch_lock.py
            refuse_if_running(name, self.home)
            if from_savepoint:
                from jstormpy.operations.savepoints import prepare_restore

                prepare_restore(from_savepoint, topology, config, allow_non_restored_state)
                resume = True
            if not resume:
                check_fresh_output(topology)
            tm_config, tm_host, worker_host = self._hosts(config)
            run_dir = write_run_dir(self.home, topology, tm_config)
            secret = new_secret()
            port = free_port(tm_config.host)
            sup = _SparkSupervisor(self.spark, name, run_dir, tm_config, secret, port, resume,
                                   tm_host, worker_host, self.slot_wait_s, self.env)
            sup.start()
            Registration(name, sup.address, secret, str(run_dir), os.getpid(),
                         sup.tls_dir).save(self.home)
        handle = TopologyHandle(name, MasterClient(sup.address, secret.encode(), sup.tls_dir),
                                sup)
        self.handles.append(handle)
        return handle

    def shutdown(self) -> None:
        """Kill every topology this cluster started (and stop the session it created)."""
        for handle in self.handles:
            handle.kill()
            with contextlib.suppress(Exception):
                Registration.load(handle.name, self.home).remove(self.home)
        self.handles = []
        if self.owns_session:
            with contextlib.suppress(Exception):
                self.spark.stop()
            self.owns_session = False

    def __enter__(self) -> SparkCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def main(argv: list[str] | None = None) -> int:
    """``python -m jstormpy.deploy.spark FILE`` / ``spark-submit .../spark.py FILE``: run the
    topology FILE defines on Spark (``jstorm run FILE --spark-master`` does the same)."""
    import jstormpy.cli.main as cli

    parser = argparse.ArgumentParser(prog="jstormpy.deploy.spark")
    parser.add_argument("file")
    parser.add_argument("--spark-master", default=None,
                        help="master URL (default: the one spark-submit passes)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    argv2 = ["--log-level", args.log_level, "run", args.file, "--spark-master",
             args.spark_master or "", "--workers", str(args.workers)]
    for item in args.spark_conf:
        argv2 += ["--spark-conf", item]
    if args.resume:
        argv2.append("--resume")
    if args.timeout is not None:
        argv2 += ["--timeout", str(args.timeout)]
    return cli.main(argv2)


if __name__ == "__main__":
    from jstormpy.deploy.spark import main as _main  # the module's own functions pickle by name

    sys.exit(_main())
