"""The ``jstorm`` command line.

    jstorm run FILE.py [--resume] [--chaos SEED]   run the topology FILE defines, here
    jstorm run FILE.py --spark-master MASTER       ... with its workers in Spark executors
    jstorm verify wordcount --input GLOB --output DIR   recompute with Spark, compare
    jstorm list                                    running topologies
    jstorm status NAME [--json]                    state, workers, checkpoints, errors
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
    jstorm chaos [-n N] [--seed S] [--fault F] [--topology T] [--keep DIR]
                                                   seeded exactly-once chaos soak

A topology file defines ``topology`` (a Topology or TopologyBuilder) and optionally
``config`` (a Config) and ``verify(handle) -> bool`` (checked after the run drains).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from jstormpy.client import MasterClient, Registration
from jstormpy.config import Config
from jstormpy.errors import JStormError
from jstormpy.topology import Topology, TopologyBuilder


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
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    topo = getattr(module, "topology", None)
    if isinstance(topo, TopologyBuilder):
        module.topology = topo.build()  # type: ignore[attr-defined]
    elif not isinstance(topo, Topology):
        raise JStormError(f"{path} must define `topology` (a Topology or TopologyBuilder); "
                          f"found {type(topo).__name__}")
    return module


def _client(name: str) -> MasterClient:
    reg = Registration.load(name)
    return MasterClient.for_registration(reg)


def _print_status(status: dict[str, Any]) -> None:
    from jstormpy.cli_status import format_status

    print(format_status(status))


def _print_metrics(m: dict[str, Any], tasks: bool = False) -> None:
    from jstormpy.cli_ops import print_metrics  # readable tables (operations)

    print_metrics(m, tasks)


def _spark_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise JStormError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def cmd_run(args: argparse.Namespace) -> int:
    from jstormpy.deploy.local import LocalCluster

    module = load_topology_file(args.file)
    config = getattr(module, "config", None) or Config()
    if args.workers:
        config = config.replace(workers=args.workers)
    if args.no_tls:  # trusted single-host runs only (docs/security.md)
        config = config.replace(tls=False)
    topology: Topology = module.topology
    print(f"running {topology.name!r}: {len(topology.components)} components, "
          f"{config.workers} workers, {config.guarantee}")
    t0 = time.monotonic()
    cluster: Any
    if args.spark_master is not None:
        from jstormpy.deploy.spark import SparkCluster

        cluster = SparkCluster(master=args.spark_master or None,
                               conf=_spark_conf(args.spark_conf))
        print(f"spark: master {cluster.master}, {config.workers} barrier tasks")
    else:
        cluster = LocalCluster()
    with cluster:
        from jstormpy.cli_savepoint import submit_kwargs

        handle = cluster.submit(topology, config, resume=args.resume, **submit_kwargs(args))
        monkey = None
        if args.chaos is not None:
            from jstormpy.testing.chaos import ChaosMonkey, ChaosSchedule

            schedule = ChaosSchedule.random(seed=args.chaos, kills=args.kills,
                                            window_s=(0.3, 1.5), workers=config.workers)
            print(f"chaos: {schedule.describe()}")
            monkey = ChaosMonkey(handle, schedule)
            monkey.start()
        try:
            status = handle.wait(timeout=args.timeout)
        except KeyboardInterrupt:
            print("interrupted: killing the topology")
            return 130
        finally:
            if monkey is not None:
                monkey.stop()
        took = time.monotonic() - t0
        metrics = handle.metrics()
        print(f"drained in {took:.1f} s; generation {status['generation']}, "
              f"{status['restarts']} recoveries, last checkpoint "
              f"#{(status['last_completed_checkpoint'] or {}).get('id')}")
        if monkey is not None:
            for event in monkey.done:
                print(f"chaos: {event}")
        _print_metrics(metrics)
        verify = getattr(module, "verify", None)
        if callable(verify):
            ok = bool(verify(handle))
            print("verify: OK" if ok else "verify: FAILED")
            return 0 if ok else 1
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    regs = Registration.all()
    if not regs:
        print("no topologies")
    for reg in regs:
        try:
            st = MasterClient.for_registration(reg).status(timeout=2.0)
            print(f"{reg.name:<24} {st['state']:<11} gen {st['generation']:<4} {reg.address}")
        except JStormError:
            print(f"{reg.name:<24} {'gone':<11} {'':<8} {reg.address}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from jstormpy.client import jstorm_home
    from jstormpy.failure import FINAL_STATUS_FILE

    try:
        status = _client(args.name).status()
    except JStormError:
        final = jstorm_home() / "runs" / args.name / FINAL_STATUS_FILE
        if not final.exists():
            raise
        status = json.loads(final.read_text())  # the run is over: what it ended with
        if not args.json:
            print(f"{args.name}: not running; its run ended {status['state']} (the status "
                  f"below is its last one)")
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        _print_status(status)
    return 0


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
    from jstormpy.codepkg import build_package

    client = _client(args.name)
    actions = [a for a in ("continue", "complete", "rollback", "status") if getattr(args, a)]
    if len(actions) + bool(args.code) != 1:
        raise JStormError("give --code PKG, or one of --continue/--complete/--rollback/--status")
    action = actions[0] if actions else "start"
    workers = [int(w) for w in args.workers.split(",") if w.strip()] if args.workers else []
    package, entry = build_package(args.code, args.entry) if args.code else (b"", "")
    if args.rescale:
        from jstormpy.cli_rescale import upgrade_with_rescale

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


def cmd_testing(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"jstormpy.testing.{args.server}")
    return int(module.main(args.rest, prog=f"jstorm testing {args.server}") or 0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    p = argparse.ArgumentParser(prog="jstorm", description=__doc__.split("\n\n")[0])
    p.add_argument("--log-level", default="WARNING")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the topology a file defines on this machine")
    r.add_argument("file")
    r.add_argument("--resume", action="store_true",
                   help="continue from the latest completed checkpoint")
    r.add_argument("--workers", type=int, default=0)
    r.add_argument("--no-tls", action="store_true",
                   help="plaintext gRPC to the Topology Master (Config.tls=False): only for "
                        "trusted single-host runs")
    r.add_argument("--timeout", type=float, default=None, help="give up after N seconds")
    r.add_argument("--chaos", type=int, default=None, metavar="SEED",
                   help="SIGKILL workers at seeded random moments while it runs")
    r.add_argument("--kills", type=int, default=1, help="how many kills with --chaos")
    r.add_argument("--spark-master", default=None, metavar="MASTER",
                   help="run the workers inside Spark executors: local[4], "
                        "local-cluster[2,1,1024], spark://..., yarn, k8s://... "
                        "('' = the master spark-submit passes)")
    r.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting (repeatable)")
    r.set_defaults(func=cmd_run)
    from jstormpy.cli_savepoint import add_parsers as add_savepoint_parsers
    from jstormpy.cli_savepoint import add_run_flags

    add_run_flags(r)  # --from-savepoint, --allow-non-restored-state
    add_savepoint_parsers(sub)  # savepoint NAME | savepoint inspect URI
    from jstormpy.cli_rescale import add_parsers as add_rescale_parsers

    add_rescale_parsers(sub)  # rescale NAME COMPONENT=N ...
    from jstormpy.deploy.verify import add_verify_parser

    add_verify_parser(sub)
    sub.add_parser("list", help="running topologies").set_defaults(func=cmd_list)
    st = sub.add_parser("status", help="state, workers, checkpoints, backpressure")
    st.add_argument("name")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    k = sub.add_parser("kill", help="stop a topology")
    k.add_argument("name")
    k.set_defaults(func=cmd_kill)
    m = sub.add_parser("metrics", help="metrics per component, worker and topology")
    m.add_argument("name")
    m.add_argument("--component")
    m.add_argument("--json", action="store_true")
    m.add_argument("--watch", type=float, default=0, metavar="SECONDS")
    m.set_defaults(func=cmd_metrics)
    c = sub.add_parser("checkpoint", help="force a checkpoint")
    c.add_argument("name")
    c.add_argument("--timeout", type=float, default=30.0)
    c.set_defaults(func=cmd_checkpoint)
    rb = sub.add_parser("rollback", help="roll back to a completed checkpoint")
    rb.add_argument("name")
    rb.add_argument("--to", type=int, default=None)
    rb.set_defaults(func=cmd_rollback)
    up = sub.add_parser("upgrade", help="gray release: switch workers to new code")
    up.add_argument("name")
    up.add_argument("--code", help="new code: a .zip, a directory or a topology .py file")
    up.add_argument("--entry", default="", help="topology file inside the package")
    up.add_argument("--workers", help="comma-separated worker ids, e.g. 1,3")
    up.add_argument("--component", help="the workers hosting this component")
    up.add_argument("-n", type=int, default=0, help="this many workers")
    up.add_argument("--rescale", action="store_true",
                    help="the new code may change parallelism: switch every worker to it in "
                         "one in-place rescale (docs/rescaling.md)")
    for flag in ("continue", "complete", "rollback", "status"):
        up.add_argument(f"--{flag}", action="store_true")
    up.add_argument("--timeout", type=float, default=180.0)
    up.set_defaults(func=cmd_upgrade)
    from jstormpy.cli_ops import add_parsers as add_ops_parsers

    add_ops_parsers(sub)  # ui, loglevel, config (operations)
    t = sub.add_parser("testing", help="protocol test servers (webhdfs, hbase)")
    t.add_argument("server", choices=["webhdfs", "hbase"])
    t.add_argument("rest", nargs=argparse.REMAINDER)
    t.set_defaults(func=cmd_testing)
    from jstormpy.testing.chaos.soak import add_arguments as add_chaos_arguments
    from jstormpy.testing.chaos.soak import run_from_args as run_chaos

    ch = sub.add_parser("chaos", help="seeded fault scenarios with an exactly-once check "
                                      "(docs/checkpointing.md)")
    add_chaos_arguments(ch)
    ch.set_defaults(func=run_chaos)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``jstorm`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except JStormError as exc:
        print(f"jstorm: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
