"""Run a Topology Master: ``python -m jstormpy.master --run-dir DIR --port N [--resume]``.

The run directory holds ``topology.pkl`` (cloudpickle), ``config.json`` and
``descriptor.json`` written by the launcher; the secret comes in ``JSTORM_SECRET`` and
the TLS directory (if TLS is on) in ``JSTORM_TLS_DIR``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

from jstormpy.api.config import Config
from jstormpy.api.failure import MASTER_ERROR_FILE
from jstormpy.leader_lease import FENCED_EXIT_CODE, LEADER_LEASE_ENV, LeaderLease
from jstormpy.master.core import MasterCore
from jstormpy.master.http import start_ops_server
from jstormpy.master.rescale import finish_pending_rescale
from jstormpy.master.service import TopologyMasterService, serve
from jstormpy.proctitle import set_process_title, title_threads
from jstormpy.run_identity import take_over_run
from jstormpy.security.tls import tls_dir_from_env
from jstormpy.security.tokens import secret_from_env
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.deadline import DeadlineBackend
from jstormpy.terminal import ignore_terminal_interrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the Topology Master process."""
    ignore_terminal_interrupt()  # the launcher owns Ctrl-C (jstormpy/terminal.py)
    parser = argparse.ArgumentParser(prog="jstormpy.master")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--launcher-pid", type=int, default=0,
                        help="stop the topology when this process (the launcher) is gone")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the latest completed checkpoint")
    parser.add_argument("--leader-lease", default=os.environ.get(LEADER_LEASE_ENV, ""),
                        metavar="FILE",
                        help="commit only while this leader lease (jstormpy/leader_lease.py, "
                             "renewed by an --ha launcher) is valid; exit when fenced (default: "
                             "$JSTORM_LEADER_LEASE)")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    try:
        return _serve(args, run_dir)
    except Exception as exc:  # e.g. an unreachable state backend: the launcher shows it
        (run_dir / MASTER_ERROR_FILE).write_text(f"{type(exc).__name__}: {exc}")
        raise


def _serve(args: argparse.Namespace, run_dir: Path) -> int:
    config = Config.from_dict(json.loads((run_dir / "config.json").read_text()))
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s master pid={os.getpid()} "
                               "%(name)s: %(message)s")
    backend = DeadlineBackend(open_backend(config.state_backend,
                                           **config.state_backend_options),
                              config.state_backend_timeout_ms)
    if finish_pending_rescale(run_dir, backend):  # a rescale committed before a crash
        config = Config.from_dict(json.loads((run_dir / "config.json").read_text()))
    descriptor_json = (run_dir / "descriptor.json").read_text()
    descriptor = json.loads(descriptor_json)
    set_process_title(f"jstorm TM {descriptor['name']}")
    title_threads()
    core = MasterCore(descriptor["name"], config, descriptor, backend, resume=args.resume)
    if args.leader_lease:
        core.lease = LeaderLease(args.leader_lease)
        if not core.lease.valid():  # a restart by a launcher that may have lost its lead
            return _fenced_at_start(run_dir, "before it took the run over")
    # before serving: workers read it from the backend once GetTopology answers
    core.run = take_over_run(backend, args.resume)
    if core.lease is not None and not core.lease.valid():
        # the epoch may have been written after a standby could lead: it may not count
        return _fenced_at_start(run_dir, "while it took the run over")
    logging.getLogger("jstormpy.master").info(
        "%s: %s", descriptor["name"],
        core.run or "a run started before run identities (no run namespace)")
    core.upgrade.attach_run_dir(run_dir)  # code packages for gray release
    core.rescale.attach_run_dir(run_dir)  # topology files for in-place rescale
    core.resolve_ahead()  # the first generation's restore stores, while the workers start
    stop = threading.Event()
    service = TopologyMasterService(core, (run_dir / "topology.pkl").read_bytes(),
                                    json.dumps(config.to_dict()), descriptor_json, stop.set)
    server = serve(core, service, secret_from_env(), config.host, args.port,
                   tls_dir_from_env())
    (run_dir / "master.port").write_text(str(args.port))
    logging.getLogger("jstormpy.master").info("Topology Master of %s serving on %s:%d",
                                              descriptor["name"], config.host, args.port)
    ui = start_ops_server(core, config.host, config.ui_port, run_dir)  # web UI, /metrics
    next_check = 0.0
    code = 0
    while not stop.wait(0.02):
        if core.fenced_event.is_set():  # a newer leader may exist: stop, commit nothing
            code = FENCED_EXIT_CODE
            break
        core.tick()
        if args.launcher_pid and time.monotonic() >= next_check:
            next_check = time.monotonic() + 1.0
            if not _alive(args.launcher_pid):
                logging.getLogger("jstormpy.master").error(
                    "launcher (pid %d) is gone: nobody supervises this topology any more; "
                    "stopping it (restart with --resume to continue from the last "
                    "checkpoint)", args.launcher_pid)
                core.kill("launcher gone")
                stop.wait(1.0)  # let the shutdown messages reach the workers
                break
    ui.stop()
    server.stop(grace=0 if code else 1.0).wait()
    return code


def _fenced_at_start(run_dir: Path, moment: str) -> int:
    why = f"fenced: no valid leader lease {moment} (its --ha launcher lost ZooKeeper)"
    logging.getLogger("jstormpy.master").error("%s; exiting", why)
    (run_dir / MASTER_ERROR_FILE).write_text(why)
    return FENCED_EXIT_CODE


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    sys.exit(main())
