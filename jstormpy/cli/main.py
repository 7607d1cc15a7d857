"""The ``jstorm`` command line.

    jstorm run FILE.py [--resume] [--chaos SEED]   run the topology FILE defines, here
    jstorm run FILE.py --spark-master MASTER       ... with its workers in Spark executors
    jstorm run FILE.py --ha zk://HOST:PORT/PATH    ... with standby launchers (ZooKeeper)
    jstorm verify wordcount --input GLOB --output DIR   recompute with Spark, compare
    jstorm list [--prune]                          running topologies (--prune: forget gone)
    jstorm forget NAME                             forget a gone topology
    jstorm status NAME [--json] [--ha URL]         state, workers, checkpoints, errors
    jstorm metrics NAME [--component C] [--watch]  metrics per component/worker/topology
    jstorm checkpoint NAME                         force a checkpoint
    jstorm rollback NAME [--to ID]                 roll back to a completed checkpoint
    jstorm upgrade NAME --code PKG [--workers 1,3 | --component C | -n N | --rescale]
                   NAME --continue | --complete | --rollback | --status
                                                   gray release (docs/upgrade.md)
    jstorm rescale NAME count=4 [split=1 ...]      change running parallelisms
                                                   (docs/rescaling.md)
    jstorm kill NAME                               stop a topology
    jstorm ui NAME [--open]                        web UI URL (and /metrics for Prometheus)
    jstorm loglevel NAME COMPONENT LEVEL           change task log level at run time
    jstorm config NAME KEY VALUE                   change a live-safe setting
    jstorm testing webhdfs|hbase ...               protocol test servers
    jstorm testing cluster up|down|list            hosts as network namespaces (root)
    jstorm chaos [-n N] [--seed S] [--fault F] [--topology T] [--keep DIR]
                                                   seeded exactly-once chaos soak

A topology file defines ``topology`` (a Topology or TopologyBuilder) and optionally
``config`` (a Config) and ``verify(handle) -> bool`` (checked after the run drains).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from jstormpy.api.config import LOG_LEVELS, Config, as_config
from jstormpy.api.errors import ConfigError, JStormError, TopologyStopped
from jstormpy.api.topology import Topology, TopologyBuilder
from jstormpy.cli.client import MasterClient, Registration


def load_topology_file(path: str) -> Any:
    """Import a topology file as a module whose classes ship to workers by value."""
    import cloudpickle

    file = Path(path)
    if not file.is_file():
        raise JStormError(f"topology file {path!r} does not exist")
    name = f"jstorm_topology_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise JStormError(f"cannot import {path!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # a streamparse project's root: its topology file imports components from src/
    project_src = Path.cwd() / "src"
    if (Path.cwd() / "config.json").is_file() and project_src.is_dir() and \
            str(project_src) not in sys.path:
        sys.path.insert(0, str(project_src))
    # like `python FILE.py`: modules next to the file are importable from it (and from the
    # processes this one starts, which inherit sys.path as PYTHONPATH: deploy/forkserver.py)
    folder = str(file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    heron = _imports_heronpy(file)
    submitted: list[type] = []
    try:
        if heron:  # docs/coming-from.md, "Heron": run as `heron submit` runs it
            _exec_heronpy_file(module, file, submitted)
        else:
            spec.loader.exec_module(module)
    except JStormError as exc:  # e.g. a dataflow refused while the file builds it
        where = _line_in_file(exc, file)
        if where:
            exc.args = (f"{exc}\n  at {where}",)
        raise
    cloudpickle.register_pickle_by_value(module)
    topo = getattr(module, "topology", None)
    if heron and (topo is None or isinstance(topo, type)):
        _build_heronpy_topology(module, submitted)
        topo = module.topology
    if topo is None:  # a streamparse project's topology file (docs/coming-from.md)
        from jstormpy.multilang.streamparse_topology import (
            find_streamparse_topology,
            topology_from_streamparse,
        )

        sparse = find_streamparse_topology(vars(module))
        if sparse is not None:
            if not isinstance(getattr(module, "config", None), Config):
                # streamparse spouts often emit without ids: at-least-once, as under Storm
                vars(module)["config"] = Config(guarantee="at_least_once")
            exactly = module.config.guarantee == "exactly_once"
            topo = vars(module)["topology"] = topology_from_streamparse(
                sparse, file.stem, Path.cwd(), spouts_at_least_once=not exactly)
    if isinstance(topo, TopologyBuilder):
        vars(module)["topology"] = topo.build()
    elif not isinstance(topo, Topology):
        raise JStormError(f"{path} must define `topology` (a Topology or TopologyBuilder) "
                          f"or a streamparse or heronpy topology; found {type(topo).__name__}")
    return module


def _imports_heronpy(file: Path) -> bool:
    from jstormpy.heron.topology import uses_heronpy

    return uses_heronpy(file)


def _exec_heronpy_file(module: Any, file: Path, submitted: list[type]) -> None:
    """Run a heronpy topology file as ``heron submit CLUSTER FILE - NAME`` would: as
    ``__main__`` with ``sys.argv`` ``[FILE, NAME]`` (NAME: the file's stem); what its
    ``build_and_submit()`` submits is captured in ``submitted``."""
    from heronpy.api.topology import capture_submissions

    code = compile(file.read_bytes(), str(file), "exec")
    name, argv = module.__name__, sys.argv
    module.__name__, sys.argv = "__main__", [str(file), file.stem]
    try:
        with capture_submissions() as captured:
            exec(code, vars(module))  # the loader refuses the name __main__
        submitted.extend(captured)
    finally:
        module.__name__, sys.argv = name, argv


def _build_heronpy_topology(module: Any, submitted: list[type]) -> None:
    """``topology`` (and ``config``, unless the file set a Config) of a heronpy file."""
    from jstormpy.heron.topology import config_from_heron, find_heron_topology, topology_from_heron

    namespace = vars(module)
    own = namespace.get("topology")
    found = own if isinstance(own, type) else find_heron_topology(namespace, submitted)
    if found is None:
        raise JStormError(f"{module.__file__} imports heronpy but submits no topology: call "
                          "TopologyBuilder(...).build_and_submit() (under `if __name__ == "
                          "'__main__':` is fine) or define a heronpy Topology subclass")
    namespace["topology"] = topology_from_heron(found)
    if not isinstance(namespace.get("config"), Config):
        namespace["config"] = Config(**config_from_heron(found))


def _line_in_file(exc: BaseException, file: Path) -> str:
    """``FILE, line N: source`` of the last line of ``file`` in ``exc``'s traceback: where
    the user's code called what raised (empty if the file is not in it)."""
    import traceback

    target = str(file.resolve())
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename and Path(f.filename).resolve() == Path(target)]
    if not frames:
        return ""
    last = frames[-1]
    source = (last.line or "").strip()
    return f"{file}, line {last.lineno}" + (f": {source}" if source else "")


def _launcher_alive(reg: Registration) -> bool:
    try:
        os.kill(reg.launcher_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _gone_message(reg: Registration) -> str:
    return (f"topology {reg.name!r} is gone: the process that launched it (pid "
            f"{reg.launcher_pid}) has exited, so no Topology Master answers at {reg.address}; "
            f"its logs are in {Path(reg.run_dir) / 'logs'}. `jstorm forget {reg.name}` removes "
            f"it from `jstorm list`; `jstorm run FILE --resume` continues it from its last "
            f"checkpoint")


def _client(name: str) -> MasterClient:
    reg = Registration.load(name)
    if not _launcher_alive(reg):
        raise JStormError(_gone_message(reg))
    return MasterClient.for_registration(reg)


def _print_status(status: dict[str, Any]) -> None:
    from jstormpy.cli.status import format_status

    print(format_status(status))


def _print_metrics(m: dict[str, Any], tasks: bool = False) -> None:
    from jstormpy.cli.ops import print_metrics  # readable tables (operations)

    print_metrics(m, tasks)


def _spark_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise JStormError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def _final_metrics(handle: Any, timeout_s: float = 10.0) -> dict[str, Any]:
    """The metrics once every worker has left: each sends its last heartbeat (the final
    counters) before it closes its control stream, so a table taken right at ``drained``
    would miss the last flush."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not any(w.get("alive") for w in handle.status().get("workers", [])):
                break
        except JStormError:
            break
        time.sleep(0.05)  # polling interval of the condition above
    return dict(handle.metrics())


def cmd_run(args: argparse.Namespace) -> int:
    module = load_topology_file(args.file)
    try:
        config = as_config(getattr(module, "config", None))
    except ConfigError as exc:
        raise ConfigError(f"{args.file}: `config`: {exc}") from None
    if args.workers:
        config = config.replace(workers=args.workers)
    if args.no_tls:  # trusted single-host runs only (docs/security.md)
        config = config.replace(tls=False)
    if args.state_backend:
        config = config.replace(state_backend=args.state_backend)
    topology: Topology = module.topology
    if args.ha:  # leader election through ZooKeeper: lead, or stand by (jstormpy/cli/ha.py)
        from jstormpy.cli.ha import run_with_ha

        if args.spark_master is None:
            return run_with_ha(args, topology.name,
                               lambda launch: launch_run(args, module, config, launch))
        from concurrent.futures import ThreadPoolExecutor

        # the Spark application starts while the launcher contends: a standby's is up
        # when it is elected, and only the Topology Master and the workers' job remain
        # to start (docs/cluster.md, "A standby Topology Master")
        with ThreadPoolExecutor(1, thread_name_prefix="spark-session") as ahead:
            prepared = ahead.submit(_spark_cluster, args)
            try:
                return run_with_ha(args, topology.name, lambda launch: launch_run(
                    args, module, config, launch, prepared.result()))
            finally:
                if prepared.exception() is None:  # (waits for a session still starting)
                    prepared.result().shutdown()
    return launch_run(args, module, config)


def _spark_cluster(args: argparse.Namespace, env: dict[str, str] | None = None) -> Any:
    """``--spark-master``'s cluster: its SparkSession (the driver JVM, the application
    registered with the master, executors as its cores allow) starts here."""
    from jstormpy.deploy.spark import SparkCluster

    cluster = SparkCluster(master=args.spark_master or None,
                           conf=_spark_conf(args.spark_conf), env=env)
    print(f"spark: master {cluster.master}, application "
          f"{cluster.spark.sparkContext.applicationId}", flush=True)
    return cluster


def launch_run(args: argparse.Namespace, module: Any, config: Any,
               launch: Any = None, prepared: Any = None) -> int:
    """Start the topology of ``module`` here and follow it until it ends (``jstorm run``).
    ``launch`` (an ``--ha`` leader's :class:`~jstormpy.cli.ha.Leadership`): resume or not,
    the environment of the Topology Master, and a hook called with the handle.
    ``prepared``: the ``SparkCluster`` started before the election (``--ha``), if any."""
    from jstormpy.deploy.local import LocalCluster

    topology: Topology = module.topology
    if launch is None:  # not --ha: `jstorm status` must not ask an earlier run's ZooKeeper
        from jstormpy.cli.client import jstorm_home
        from jstormpy.ha_view import HA_FILE

        (jstorm_home() / "runs" / topology.name / HA_FILE).unlink(missing_ok=True)
    print(f"running {topology.name!r}: {len(topology.components)} components, "
          f"{config.workers} workers, {config.guarantee}")
    t0 = time.monotonic()
    env = launch.env if launch is not None else None
    resume = launch.resume if launch is not None else args.resume
    cluster: Any
    if prepared is not None:
        cluster = prepared
        cluster.env.update(env or {})  # the leader lease the TM must hold
        print(f"spark: {config.workers} barrier tasks")
    elif args.spark_master is not None:
        cluster = _spark_cluster(args, env)
        print(f"spark: {config.workers} barrier tasks")
    else:
        cluster = LocalCluster(env=env)
    with cluster:
        from jstormpy.cli.savepoint import submit_kwargs

        handle = cluster.submit(topology, config, resume=resume, **submit_kwargs(args))
        if launch is not None:
            launch.started(handle)
        monkey = None
        if args.chaos is not None:
            from jstormpy.testing.chaos import ChaosMonkey, ChaosSchedule

            schedule = ChaosSchedule.random(seed=args.chaos, kills=args.kills,
                                            window_s=(0.3, 1.5), workers=config.workers)
            print(f"chaos: will SIGKILL {schedule.describe().split(': ', 1)[-1]} "
                  f"(seed {args.chaos})")
            monkey = ChaosMonkey(handle, schedule)
            monkey.start()
        try:
            status = handle.wait(timeout=args.for_s or args.timeout)
        except TimeoutError:
            if not args.for_s:
                raise
            return _stop_after(handle, args.for_s)
        except TopologyStopped as exc:  # a planned stop: say so, exit 0 (run --help)
            print(f"stopped: {exc}")
            print(f"continue it with: jstorm run {args.file} --resume")
            return 0
        except KeyboardInterrupt:
            # a terminal's Ctrl-C reached the whole process group; only this launcher acts
            # on it (the TM and workers ignore it: jstormpy/terminal.py). Stop first, then
            # report the checkpoint the final status kept; a second Ctrl-C while stopping
            # (bounded by the kill's waits) would only leave a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            handle.kill("interrupted (Ctrl-C)")
            last = _kept_checkpoint(handle)
            print(f"interrupted: stopping the topology; its state is kept at checkpoint "
                  f"#{last}" if last is not None else
                  "interrupted: stopping the topology (no checkpoint completed yet)")
            print(f"continue it with: jstorm run {args.file} --resume")
            return 130
        finally:
            if monkey is not None:
                monkey.stop()
        took = time.monotonic() - t0
        metrics = _final_metrics(handle)
        status = _keep_late_counts(handle, status, metrics)
        print(f"drained in {took:.1f} s; generation {status['generation']}, "
              f"{status['restarts']} recoveries, last checkpoint "
              f"#{(status['last_completed_checkpoint'] or {}).get('id')}")
        if monkey is not None:
            for event in monkey.done:
                print(f"chaos: {event}")
        if status["restarts"]:
            print(f"(the counters below cover generation {status['generation']}: the work "
                  "since the last recovery)")
        from jstormpy.cli.ops import format_run_summary

        print(format_run_summary(metrics))
        verify = getattr(module, "verify", None)
        if callable(verify):
            ok = bool(verify(handle))
            print("verify: OK" if ok else "verify: FAILED")
            return 0 if ok else 1
    return 0


def _keep_late_counts(handle: Any, status: dict[str, Any],
                      metrics: dict[str, Any]) -> dict[str, Any]:
    """The drained run's final status with ``late_records``: ``{component: records}`` it
    dropped as late (joins, window aggregates), from the workers' last heartbeats; kept
    in the run directory, so `jstorm status NAME` shows them after the run."""
    late = {name: int(a["late_records"]) for name, a in metrics.get("components", {}).items()
            if a.get("late_records")}
    if not late or handle.run_dir is None:
        return status
    from jstormpy.deploy.local import write_final_status

    status = {**status, "late_records": late}
    write_final_status(handle.run_dir, status)
    return status


def _kept_checkpoint(handle: Any) -> int | None:
    """The last completed checkpoint in a stopped run's final status (None: none)."""
    from jstormpy.api.failure import FINAL_STATUS_FILE

    if handle.run_dir is None:
        return None
    try:
        final = json.loads((handle.run_dir / FINAL_STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return (final.get("last_completed_checkpoint") or {}).get("id")


def _stop_after(handle: Any, seconds: float) -> int:
    """``jstorm run --for SECONDS``: one more checkpoint (its output committed), the
    counters, then stop."""
    last = None
    with contextlib.suppress(JStormError, TimeoutError):
        last = handle.checkpoint()
    metrics = _final_metrics(handle)
    handle.kill()
    print(f"ran for {seconds:g} s; stopped after checkpoint #{last}")
    _print_metrics(metrics)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    client = _client(args.name)
    last = None
    with contextlib.suppress(JStormError, TimeoutError):
        last = client.checkpoint_committed()  # what it produced so far is committed
    client.kill("stopped from the CLI")
    print(f"stopped {args.name} after checkpoint #{last}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    regs = Registration.all()
    if not regs:
        print("no topologies")
    gone = []
    for reg in regs:
        try:
            if not _launcher_alive(reg):
                raise JStormError(_gone_message(reg))
            st = MasterClient.for_registration(reg).status(timeout=2.0)
            print(f"{reg.name:<24} {st['state']:<11} gen {st['generation']:<4} {reg.address}")
        except JStormError:
            gone.append(reg)
            if args.prune:
                reg.remove()
                print(f"{reg.name:<24} {'forgotten':<11} {'':<8} (it was gone)")
            else:
                print(f"{reg.name:<24} {'gone':<11} {'':<8} {reg.address}")
    if gone and not args.prune:
        print(f"gone: no Topology Master answers (its launcher exited or it stopped); "
              f"`jstorm forget NAME` or `jstorm list --prune` removes "
              f"{'it' if len(gone) == 1 else 'them'}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    reg = Registration.load(args.name)
    if _launcher_alive(reg):
        client = MasterClient.for_registration(reg)
        try:
            state = client.status(timeout=2.0)["state"]
        except JStormError:
            state = ""
        finally:
            client.close()
        if state:
            raise JStormError(f"topology {args.name!r} is {state}, not gone: stop it with "
                              f"`jstorm kill {args.name}` instead")
    reg.remove()
    print(f"forgot {args.name} (its run files stay in {reg.run_dir})")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from jstormpy.api.failure import FINAL_STATUS_FILE, INTERRUPTED
    from jstormpy.cli.client import jstorm_home

    ha = _ha_status(args)
    try:
        status = _client(args.name).status()
    except JStormError:
        final = jstorm_home() / "runs" / args.name / FINAL_STATUS_FILE
        if not final.exists():
            if ha is None:
                raise
            # a standby's host (no TM here): what ZooKeeper says
            if args.json:
                print(json.dumps({"name": args.name, "ha": ha}, indent=2))
            else:
                from jstormpy.cli.status import format_ha

                print(f"{args.name}: no Topology Master on this host")
                print(format_ha(ha))
            return 0
        status = json.loads(final.read_text())  # the run is over: what it ended with
        if args.json:
            pass
        elif status["state"] == INTERRUPTED:
            kept = (status.get("last_completed_checkpoint") or {}).get("id")
            print(f"{args.name}: not running; its run was {status.get('stopped') or INTERRUPTED}"
                  f" and its state is kept at "
                  f"{'checkpoint #' + str(kept) if kept else 'no checkpoint'}: `jstorm run FILE "
                  f"--resume` continues it (the status below is its last one)")
        else:
            print(f"{args.name}: not running; its run ended {status['state']} (the status "
                  f"below is its last one)")
    if ha is not None:
        status["ha"] = ha
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        _print_status(status)
    return 0


def _ha_status(args: argparse.Namespace) -> dict[str, Any] | None:
    """Leader, standbys and the recorded run from ZooKeeper: with ``--ha URL``, or when this
    host's run of NAME was started with ``--ha`` (its run directory says where)."""
    from jstormpy.cli.client import jstorm_home
    from jstormpy.ha_view import HaView

    url = args.ha
    view = HaView.read(jstorm_home() / "runs" / args.name)
    if not url and view is not None:
        url = view.url
    if not url:
        return None
    from jstormpy.deploy.ha import ha_status

    try:
        return ha_status(url, args.name)
    except JStormError as exc:  # ZooKeeper away: the TM's own status still shows
        return {"url": url, "error": str(exc)}


def cmd_metrics(args: argparse.Namespace) -> int:
    client = _client(args.name)
    while True:
        m = client.metrics(args.component or "")
        if args.json:
            print(json.dumps(m, indent=2))
        else:
            _print_metrics(m, tasks=bool(getattr(args, "tasks", False) or args.component))
        if not args.watch:
            return 0
        time.sleep(args.watch)
        print()


def cmd_checkpoint(args: argparse.Namespace) -> int:
    print(f"checkpoint {_client(args.name).checkpoint(args.timeout)} completed")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    cid, gen = _client(args.name).rollback(args.to)
    print(f"rolled back to checkpoint {cid} (generation {gen})")
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    _client(args.name).kill("killed from the CLI")
    print(f"killed {args.name}")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Gray release: start/continue/complete/roll back, printing progress."""
    from jstormpy.operations.codepkg import build_package

    client = _client(args.name)
    actions = [a for a in ("continue", "complete", "rollback", "status") if getattr(args, a)]
    if len(actions) + bool(args.code) != 1:
        raise JStormError("give --code PKG, or one of --continue/--complete/--rollback/--status")
    action = actions[0] if actions else "start"
    workers = [int(w) for w in args.workers.split(",") if w.strip()] if args.workers else []
    package, entry = build_package(args.code, args.entry) if args.code else (b"", "")
    if args.rescale:
        from jstormpy.cli.rescale import upgrade_with_rescale

        if action != "start" or workers or args.component or args.n:
            raise JStormError("--rescale goes with --code only: every worker switches to the "
                              "new code at the parallelism it declares")
        return upgrade_with_rescale(args, client, package, entry)
    state = client.upgrade(action, package, entry, workers, args.component or "", args.n)

    def show(st: dict[str, Any]) -> None:
        print(f"upgrade    {st['phase']:<10} batch={st['batch'] or '-'} "
              f"target={st['target_version'] or '-'} stable={st['stable_version']}"
              + (f" error: {st['error']}" if st.get("error") else ""), flush=True)

    if action != "status":
        state = client.wait_upgrade(args.timeout, on_progress=show)
    else:
        show(state)
    versions = ", ".join(f"w{w}={v}" for w, v in state["versions"].items())
    print(f"versions   {versions}")
    if state.get("last_pause_ms") is not None:
        print(f"last switch {state['last_switch_ms']} ms; untouched workers paused "
              f"{state['last_pause_ms']} ms")
    return 1 if state.get("error") and action != "status" else 0


def testing_module(server: str) -> Any:
    """The module behind ``jstorm testing SERVER``: a test server of
    :mod:`jstormpy.testing.servers`, or the host cluster (:mod:`jstormpy.testing.cluster`)."""
    package = "jstormpy.testing" if server == "cluster" else "jstormpy.testing.servers"
    return importlib.import_module(f"{package}.{server}")


def cmd_testing(args: argparse.Namespace) -> int:
    module = testing_module(args.server)
    return int(module.main(args.rest, prog=f"jstorm testing {args.server}") or 0)


NAME_HELP = "the topology's name (see `jstorm list`)"


def cmd_version(args: argparse.Namespace) -> int:
    """``jstorm version``: the version and whether the record path runs compiled."""
    from jstormpy import compiled
    from jstormpy.version import __version__

    print(f"jstorm {__version__}, {compiled.describe()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    p = argparse.ArgumentParser(prog="jstorm", description=__doc__.split("\n\n")[0]
                                .replace("``", "") + " Each command has its own --help.")
    p.add_argument("--log-level", default="WARNING", type=str.upper, choices=LOG_LEVELS,
                   help="log level of this command's own messages (default WARNING); a "
                        "running topology's: `jstorm loglevel` or Config.log_level")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version and whether the record path runs "
                   "compiled (docs/performance.md)").set_defaults(func=cmd_version)
    r = sub.add_parser(
        "run", help="run the topology a file defines on this machine",
        description="Run the topology FILE defines, on this machine (or with its workers in "
                    "Spark executors), until it drains. FILE must define `topology` (a "
                    "Topology or TopologyBuilder) and may define `config` (a Config or a "
                    "dict) and `verify(handle) -> bool`, called after it drains. Modules "
                    "next to FILE can be imported from it. In a streamparse project's root, "
                    "FILE may instead be one of its topologies/ files (its Topology class "
                    "runs with multilang components); a file that imports heronpy runs as "
                    "`heron submit` runs it, its build_and_submit() captured "
                    "(docs/coming-from.md).",
        epilog="Run state (registration, logs, default checkpoints and savepoints) lives "
               "under $JSTORM_HOME (default ~/.jstorm): runs/NAME/, checkpoints/NAME/. "
               "Exit status: 0 drained, or stopped on request (jstorm kill, jstorm "
               "savepoint --stop); 1 verify failed; 2 error; 130 Ctrl-C (continue with "
               "--resume).")
    r.add_argument("file", help="a Python file that defines `topology`")
    r.add_argument("--resume", action="store_true",
                   help="continue from the latest completed checkpoint")
    r.add_argument("--workers", type=int, default=0,
                   help="number of worker processes (overrides Config.workers)")
    r.add_argument("--no-tls", action="store_true",
                   help="plaintext gRPC to the Topology Master (Config.tls=False): only for "
                        "trusted single-host runs")
    r.add_argument("--timeout", type=float, default=None, help="give up after N seconds")
    r.add_argument("--for", dest="for_s", type=float, default=None, metavar="SECONDS",
                   help="run a job that never ends (a streamparse or heronpy topology) for "
                        "SECONDS, "
                        "then checkpoint, print its counters and stop (exit 0)")
    r.add_argument("--chaos", type=int, default=None, metavar="SEED",
                   help="SIGKILL workers at seeded random moments while it runs")
    r.add_argument("--kills", type=int, default=1, help="how many kills with --chaos")
    r.add_argument("--spark-master", default=None, metavar="MASTER",
                   help="run the workers inside Spark executors: local[4], "
                        "local-cluster[2,1,1024], spark://..., yarn, k8s://... "
                        "('' = the master spark-submit passes)")
    r.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting (repeatable)")
    r.add_argument("--state-backend", default=None, metavar="URI",
                   help="where checkpoints go, instead of the file's Config.state_backend "
                        "(file:///dir, hdfs://host:port/dir, hbase://host:port/table); on "
                        "a Spark cluster it must be shared storage")
    r.add_argument("--ha", default=None, metavar="zk://HOST:PORT/PATH",
                   help="standby Topology Master: run this on two or more hosts; one leads "
                        "(elected through ZooKeeper), the others take the run over when it "
                        "dies (docs/cluster.md)")
    r.add_argument("--ha-session-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="ZooKeeper session timeout with --ha (default 10): how soon a "
                        "standby takes over; within the server's 2..20 ticks")
    r.set_defaults(func=cmd_run)
    from jstormpy.cli.savepoint import add_parsers as add_savepoint_parsers
    from jstormpy.cli.savepoint import add_run_flags

    add_run_flags(r)  # --from-savepoint, --allow-non-restored-state
    add_savepoint_parsers(sub)  # savepoint NAME | savepoint inspect URI
    from jstormpy.cli.rescale import add_parsers as add_rescale_parsers

    add_rescale_parsers(sub)  # rescale NAME COMPONENT=N ...
    from jstormpy.deploy.verify import add_verify_parser

    add_verify_parser(sub)
    ls = sub.add_parser("list", help="running topologies")
    ls.add_argument("--prune", action="store_true",
                    help="forget the topologies listed as gone (their launcher exited)")
    ls.set_defaults(func=cmd_list)
    fg = sub.add_parser("forget", help="remove a gone topology from `jstorm list`")
    fg.add_argument("name", help=NAME_HELP + "; refused if it still runs")
    fg.set_defaults(func=cmd_forget)
    st = sub.add_parser("status", help="state, workers, checkpoints, backpressure")
    st.add_argument("name", help=NAME_HELP)
    st.add_argument("--json", action="store_true", help="the whole status as JSON")
    st.add_argument("--ha", default=None, metavar="zk://HOST:PORT/PATH",
                    help="also show the leader, the standbys and the recorded run from "
                         "ZooKeeper (default: the URL this host's `jstorm run --ha` used)")
    st.set_defaults(func=cmd_status)
    k = sub.add_parser("kill", help="stop a topology")
    k.add_argument("name", help=NAME_HELP)
    k.set_defaults(func=cmd_kill)
    st = sub.add_parser("stop", help="checkpoint a running topology, then stop it",
                        description="A clean stop of a job that never ends: one more "
                                    "checkpoint, its output committed, then the topology "
                                    "stops (`jstorm run` exits 0).")
    st.add_argument("name", help=NAME_HELP)
    st.set_defaults(func=cmd_stop)
    m = sub.add_parser("metrics", help="metrics per component, worker and topology")
    m.add_argument("name", help=NAME_HELP)
    m.add_argument("--component", help="only this component, with its tasks")
    m.add_argument("--json", action="store_true", help="the metrics as JSON")
    m.add_argument("--watch", type=float, default=0, metavar="SECONDS",
                   help="print again every SECONDS until Ctrl-C")
    m.set_defaults(func=cmd_metrics)
    c = sub.add_parser("checkpoint", help="force a checkpoint")
    c.add_argument("name", help=NAME_HELP)
    c.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for it to complete (default 30)")
    c.set_defaults(func=cmd_checkpoint)
    rb = sub.add_parser("rollback", help="roll back to a completed checkpoint")
    rb.add_argument("name", help=NAME_HELP)
    rb.add_argument("--to", type=int, default=None, metavar="ID",
                    help="the completed checkpoint to roll back to (default: the latest)")
    rb.set_defaults(func=cmd_rollback)
    up = sub.add_parser("upgrade", help="gray release: switch workers to new code")
    up.add_argument("name", help=NAME_HELP)
    up.add_argument("--code", help="new code: a .zip, a directory or a topology .py file")
    up.add_argument("--entry", default="", help="topology file inside the package")
    up.add_argument("--workers", help="comma-separated worker ids, e.g. 1,3")
    up.add_argument("--component", help="the workers hosting this component")
    up.add_argument("-n", type=int, default=0, help="this many workers")
    up.add_argument("--rescale", action="store_true",
                    help="the new code may change parallelism: switch every worker to it in "
                         "one in-place rescale (docs/rescaling.md)")
    for flag, what in (("continue", "switch the next batch of workers to the new code"),
                       ("complete", "switch every remaining worker and make it the stable "
                                    "version"),
                       ("rollback", "switch every worker back to the stable version"),
                       ("status", "print the upgrade's progress")):
        up.add_argument(f"--{flag}", action="store_true", help=what)
    up.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS",
                    help="how long to wait for each step (default 180)")
    up.set_defaults(func=cmd_upgrade)
    from jstormpy.cli.ops import add_parsers as add_ops_parsers

    add_ops_parsers(sub)  # ui, loglevel, config (operations)
    t = sub.add_parser("testing", help="protocol test servers (webhdfs, hbase) and a cluster "
                                       "of network-namespace hosts (cluster up|down|list)",
                       epilog="Each has its own options: jstorm testing webhdfs --help, "
                              "jstorm testing hbase --help, jstorm testing cluster --help.")
    t.add_argument("server", choices=["webhdfs", "hbase", "cluster"],
                   help="which server (or the host cluster) to start")
    t.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    t.set_defaults(func=cmd_testing)
    from jstormpy.testing.chaos.soak import add_arguments as add_chaos_arguments
    from jstormpy.testing.chaos.soak import run_from_args as run_chaos

    ch = sub.add_parser("chaos", help="seeded fault scenarios with an exactly-once check "
                                      "(docs/checkpointing.md)")
    add_chaos_arguments(ch)
    ch.set_defaults(func=run_chaos)
    from jstormpy.testing.simulation.command import add_arguments as add_simulate_arguments
    from jstormpy.testing.simulation.command import run_from_args as run_simulate

    sim = sub.add_parser("simulate", help="deterministic simulation of the checkpoint "
                                          "protocol under faults (docs/simulation.md)")
    add_simulate_arguments(sim)
    sim.set_defaults(func=run_simulate)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``jstorm`` console script."""
    args = build_parser().parse_args(argv)
    level = args.log_level.upper()
    if level in ("DEBUG", "INFO"):  # asked for detail: timestamps and logger names
        logging.basicConfig(level=level,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:  # the console of a run: one readable line per event
        logging.basicConfig(level=level, format="jstorm: %(message)s")
    try:
        return int(args.func(args))
    except JStormError as exc:
        print(f"jstorm: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
