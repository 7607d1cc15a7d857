"""CLI for savepoints (docs/savepoints.md).

    jstorm savepoint NAME [--stop] [--to URI]    write a savepoint of a running topology
    jstorm savepoint inspect URI                 print what a savepoint holds
    jstorm run FILE --from-savepoint URI [--allow-non-restored-state]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from jstormpy.api.errors import JStormError
from jstormpy.cli.client import MasterClient, Registration, jstorm_home
from jstormpy.master.topology_state import TopologyState


def _stopper(client: MasterClient, timeout_s: float = 60.0) -> Any:
    def stop() -> None:
        client.kill("stopped with a savepoint")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                state = client.status(timeout=2.0).get("state")
            except JStormError:
                return  # the Topology Master is gone: nothing can commit any more
            if state in (TopologyState.KILLED, TopologyState.FAILED):
                return
            time.sleep(0.1)
        raise JStormError(f"the topology did not stop within {timeout_s:.0f} s")

    return stop


def cmd_savepoint(args: argparse.Namespace) -> int:
    """``jstorm savepoint NAME|inspect [URI]``."""
    from jstormpy.operations.savepoints import describe, savepoint_run

    if args.target == "inspect":
        if not args.uri:
            raise JStormError("jstorm savepoint inspect needs the savepoint URI")
        print(describe(args.uri))
        return 0
    if args.uri:
        raise JStormError(f"unexpected argument {args.uri!r} (use --to URI)")
    reg = Registration.load(args.target)
    client = MasterClient.for_registration(reg)
    force = client.checkpoint_committed if args.stop else client.checkpoint
    uri = savepoint_run(reg.run_dir, lambda: force(args.timeout), args.to,
                        jstorm_home(), _stopper(client) if args.stop else None)
    print(f"savepoint written to {uri}" + (f"; {args.target} stopped" if args.stop else ""))
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``savepoint`` to the CLI."""
    s = sub.add_parser("savepoint", help="write a savepoint (or: savepoint inspect URI)")
    s.add_argument("target", metavar="NAME|inspect")
    s.add_argument("uri", nargs="?", default="", help="with inspect: the savepoint URI")
    s.add_argument("--to", default=None, metavar="URI",
                   help="where to write it (file://, hdfs://, hbase://; default "
                        "$JSTORM_HOME/savepoints/NAME/)")
    s.add_argument("--stop", action="store_true", help="stop the topology with the savepoint")
    s.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for the savepoint's checkpoint (default 30)")
    s.set_defaults(func=cmd_savepoint)


def add_run_flags(run: argparse.ArgumentParser) -> None:
    """``--from-savepoint URI`` and ``--allow-non-restored-state`` of ``jstorm run``."""
    run.add_argument("--from-savepoint", default=None, metavar="URI",
                     help="start from a savepoint (other parallelism / new code allowed)")
    run.add_argument("--allow-non-restored-state", action="store_true",
                     help="drop savepoint state of components the topology no longer has")


def submit_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``submit()`` keywords the savepoint flags of ``jstorm run`` ask for."""
    uri = getattr(args, "from_savepoint", None)
    if not uri:
        return {}
    return {"from_savepoint": uri,
            "allow_non_restored_state": bool(getattr(args, "allow_non_restored_state", False))}
