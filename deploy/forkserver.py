"""A fork server: one pre-imported interpreter from which the TM and workers are forked.

Starting a Topology Master and N workers cold costs N + 1 interpreter starts and N + 1
imports of gRPC, protobuf, cloudpickle and the engine (about a quarter of a CPU-second
each, on the submit path). ``LocalCluster`` instead starts one *zygote* per topology
(``python -m jstormpy.deploy.forkserver``, with the topology's environment, hash seed
included) that imports those modules once, creates no thread, channel or server, and then
forks each process on request: the TM, every worker, and every respawn after a crash.
A forked process is a separate process like a cold one (own memory, own gRPC state, own
PID); ``ForkedProcess`` gives the supervisor the ``subprocess.Popen`` calls it uses
(``poll``, ``wait``, ``terminate``, ``kill``, ``send_signal``), fed by the exit statuses
the zygote reports. If the zygote is gone, the supervisor starts processes cold.

``LocalCluster()`` starts its zygote when it is created and returns once the zygote has
imported everything (as Storm's ``LocalCluster`` returns once its daemons run), so a
``submit`` only forks. A topology adopts that zygote when its environment is the one the
zygote started with (``start_env``); otherwise it starts its own, as before.

Protocol (one JSON object per line): launcher → zygote
``{"id", "module", "argv", "env", "cwd", "log"}``; zygote → launcher ``{"ready": 1}`` once
the imports are done, ``{"id", "pid"}`` once forked, ``{"exit": pid, "code": n}`` when a
child ends (``-signal`` if killed by a signal, as ``Popen.returncode``).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jstormpy.proctitle import set_process_title
from jstormpy.terminal import ignore_terminal_interrupt

# what the TM and a worker import anyway: the engine, gRPC's channel, the file backend and
# the windowing module (a topology's pickle refers to them), psutil (a worker's heartbeat:
# its first one may be the one reporting the end of a short run's input)
PRELOAD = ("jstormpy.master.__main__", "jstormpy.runtime.worker", "grpc._channel",
           "grpc.experimental", "jstormpy.state_backends.file", "jstormpy.window",
           "jstormpy.window.bolt", "jstormpy.window.operator", "jstormpy.window.sliced",
           "psutil")


def process_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the TM and worker processes: ours, ``extra_env``, and a
    PYTHONPATH that lets them import what the launcher imports (user code included)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    path = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
        [os.getcwd(), *path, *env.get("PYTHONPATH", "").split(os.pathsep)]))
    return env


def zygote_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """:func:`process_env` with the engine's hash seed: what a zygote starts with."""
    from jstormpy.runtime.worker import topology_hash_seed

    env = process_env(extra_env)
    env["PYTHONHASHSEED"] = topology_hash_seed("")
    return env


def preload_launcher() -> None:
    """Import what ``submit()`` and the topology handle need (certificates, gRPC's
    channel) while ``LocalCluster()`` starts, not inside ``submit()``."""
    from jstormpy.security.tls import preload_tls

    preload_tls()
    import grpc._channel  # noqa: F401
    import grpc.experimental  # noqa: F401


def forkserver_enabled() -> bool:
    """False when ``JSTORM_FORKSERVER=0`` asks for cold process starts."""
    return os.environ.get("JSTORM_FORKSERVER", "1") != "0"


class ForkedProcess:
    """A process forked by the zygote, with the ``Popen`` calls the supervisor uses."""

    def __init__(self, pid: int, server: ForkServer) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._server = server

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        if self.returncode is None and not self._server.alive():
            # the zygote is gone: nobody reports this exit; look at the PID instead
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -signal.SIGKILL
            except PermissionError:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until it exits; ``subprocess.TimeoutExpired`` after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._server.cond:
            while self.poll() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
                self._server.cond.wait(0.05 if left is None else min(left, 0.05))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the process (if it still runs)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The launcher's side of one zygote."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        self.cond = threading.Condition()
        self._next_id = 0
        self._started: dict[int, int] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._eof = False
        self.ready = False
        self.start_env = dict(env)
        self.cwd = cwd
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jstormpy.deploy.forkserver"], env=env, cwd=cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, name="forkserver", daemon=True)
        self._reader.start()

    @classmethod
    def start_ready(cls, env: dict[str, str], cwd: str, timeout_s: float,
                    meanwhile: Callable[[], object] | None = None) -> ForkServer | None:
        """A zygote that has finished its imports; None if it cannot start or is not ready
        within ``timeout_s`` (processes then start cold). ``meanwhile`` runs here while
        the zygote imports."""
        try:
            zygote = cls(env, cwd)
        except OSError:
            return None
        if meanwhile is not None:
            meanwhile()
        if zygote.wait_ready(timeout_s):
            return zygote
        zygote.close()
        return None

    def alive(self) -> bool:
        """True while the zygote can fork and report."""
        return not self._eof and self.proc.poll() is None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.cond:
                if "ready" in msg:
                    self.ready = True
                elif "exit" in msg:
                    child = self._children.get(int(msg["exit"]))
                    if child is not None:
                        child.returncode = int(msg["code"])
                else:
                    self._started[int(msg["id"])] = int(msg["pid"])
                self.cond.notify_all()
        with self.cond:
            self._eof = True
            self.cond.notify_all()

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until the zygote has imported its modules; False if it died or
        ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not self.ready:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return False
                self.cond.wait(left)
        return True

    def launch(self, module: str, argv: list[str], env: dict[str, str], cwd: str,
               log: Path, timeout_s: float = 10.0) -> ForkedProcess | None:
        """Fork ``module.main(argv)``; None if the zygote cannot (start it cold then)."""
        if not self.alive() or self.proc.stdin is None:
            return None
        with self.cond:
            self._next_id += 1
            rid = self._next_id
        cmd = {"id": rid, "module": module, "argv": argv, "env": env, "cwd": cwd,
               "log": str(log)}
        try:
            self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            return None
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while rid not in self._started:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return None
                self.cond.wait(left)
            child = ForkedProcess(self._started.pop(rid), self)
            self._children[child.pid] = child
            return child

    def close(self) -> None:
        """Stop the zygote (forked processes are not touched)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the zygote ------------------------------------------------------------------------------
def _child(cmd: dict[str, Any], wake_fds: tuple[int, int]) -> None:
    """In the forked child: become the requested process and run it; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in wake_fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(cmd["env"])
        os.chdir(cmd["cwd"])
        fd = os.open(cmd["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 lives as long as we do
        sys.argv = [cmd["module"], *cmd["argv"]]
        module = importlib.import_module(cmd["module"])
        try:
            code = int(module.main(cmd["argv"]) or 0)
        except SystemExit as exc:
            if isinstance(exc.code, int) or exc.code is None:
                code = int(exc.code or 0)
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        import logging

        with contextlib.suppress(Exception):
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _report(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _report({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def main() -> int:
    """The zygote's loop: import once, then fork on request until stdin closes."""
    ignore_terminal_interrupt()  # and so do the TM and workers it forks
    set_process_title("jstorm zygote (forks the TM and workers)")
    for name in PRELOAD:
        importlib.import_module(name)
    # the start-up heap every process inherits: collected once here, then frozen, so no
    # worker's collection scans it again (its first one runs before Ready: collector.py)
    gc.collect()
    gc.freeze()
    _report({"ready": 1})
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stdin = sys.stdin.buffer
    buf = b""
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            _reap()
        if 0 not in ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            cmd = json.loads(line)
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                _child(cmd, (wake_r, wake_w))
            _report({"id": cmd["id"], "pid": pid})
    del stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
