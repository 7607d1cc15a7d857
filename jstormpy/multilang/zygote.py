"""Pre-forked starts of the pystorm runner: the host's end of the runner zygote.

A runner subprocess started cold spends most of its start-up importing streamparse
(which parses Storm's thrift IDL at every import): about 0.2 CPU-seconds, per task. A
worker instead starts one zygote (:mod:`jstormpy.multilang.runner_zygote`) per Python
executable and interpreter environment the first time a task needs the runner; the zygote
imports pystorm and streamparse once and forks each later runner. A forked runner is one
OS process per task as before, in its own session, on its own stdin/stdout/stderr pipes
(created here, passed to the zygote), with the task's working directory and environment.
:class:`ForkedRunner` gives :class:`~jstormpy.multilang.protocol.ShellProcess` the
``subprocess.Popen`` calls it uses (``pid``, ``poll``, ``wait``, ``kill``), over a pidfd
of the child and the exit statuses the zygote reports.

If the zygote cannot start or has died, :func:`start_runner` returns None (the caller
starts the runner cold) and logs one line saying so; the runners it forked before keep
running. ``JSTORM_MULTILANG_ZYGOTE=0`` turns the zygote off.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO

log = logging.getLogger("jstormpy.multilang")

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner_zygote.py")
ENABLE_ENV = "JSTORM_MULTILANG_ZYGOTE"
START_TIMEOUT_S = 60.0
"""How long the zygote may take to import pystorm and streamparse."""
FORK_TIMEOUT_S = 10.0
"""How long a fork may take to be answered."""
REPORT_WAIT_S = 1.0
"""How long an exited child's status may take to arrive from the zygote."""


class ZygoteGone(Exception):
    """The zygote cannot fork (it failed to start, or has exited)."""


class RunnerZygote:
    """One zygote process and the host's end of its socket."""

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = host_end
        try:
            self.proc = subprocess.Popen(
                [python, SCRIPT, str(zygote_end.fileno())], pass_fds=[zygote_end.fileno()],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=dict(env), start_new_session=True)
        except OSError as exc:
            host_end.close()
            raise ZygoteGone(f"cannot start {python} {SCRIPT}: {exc}") from exc
        finally:
            zygote_end.close()
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self.proc.stdin.close()  # pipes, as a cold runner's (see runner_zygote), unused
        self.proc.stdout.close()
        threading.Thread(target=self._log_stderr, args=(self.proc.stderr,), daemon=True,
                         name="multilang-zygote-err").start()
        self.lock = threading.Lock()  # one fork request at a time
        self.cond = threading.Condition()
        self.exits: dict[int, int] = {}
        self.forked: list[int] = []
        self.gone: str | None = None
        host_end.settimeout(START_TIMEOUT_S)
        try:
            ready = host_end.recv(4096)
        except OSError as exc:
            ready = b""
            self.gone = f"it did not start ({exc})"
        if ready != b'{"ready": 1}':
            self.close()
            raise ZygoteGone(self.gone or f"it exited at start (exit code {self.proc.wait()})")
        host_end.settimeout(None)
        threading.Thread(target=self._read, daemon=True, name="multilang-zygote").start()

    def _read(self) -> None:
        while True:
            try:
                packet = self.sock.recv(4096)
            except OSError:
                packet = b""
            if not packet:
                break
            msg = json.loads(packet)
            with self.cond:
                if "exit" in msg:
                    self.exits[int(msg["exit"])] = int(msg["code"])
                else:
                    self.forked.append(int(msg["pid"]))
                self.cond.notify_all()
        code = self.proc.wait()  # reaped: no zombie zygote
        with self.cond:
            self.gone = f"it exited (exit code {code})"
            self.cond.notify_all()

    @staticmethod
    def _log_stderr(err: IO[bytes]) -> None:
        with err:
            for raw in iter(err.readline, b""):
                log.warning("pystorm runner zygote: %s", raw.decode(errors="replace").rstrip())

    def fork(self, argv: Sequence[str], cwd: str, env: Mapping[str, str],
             fds: tuple[int, int, int]) -> int:
        """Fork a runner on ``fds`` (its stdin, stdout, stderr): its pid."""
        request = json.dumps({"argv": list(argv), "cwd": cwd, "env": dict(env)}).encode()
        with self.lock:
            if self.gone is not None:
                raise ZygoteGone(self.gone)
            try:
                socket.send_fds(self.sock, [request], list(fds))
            except OSError as exc:
                raise ZygoteGone(f"it does not take requests ({exc})") from exc
            with self.cond:
                if not self.cond.wait_for(lambda: self.forked or self.gone is not None,
                                          FORK_TIMEOUT_S):
                    raise ZygoteGone(f"it did not fork within {FORK_TIMEOUT_S} s")
                if not self.forked:
                    raise ZygoteGone(self.gone or "it exited")
                return self.forked.pop(0)

    def exit_code(self, pid: int, wait_s: float) -> int | None:
        """The exit status the zygote reported for ``pid`` (waiting up to ``wait_s``)."""
        with self.cond:
            self.cond.wait_for(lambda: pid in self.exits or self.gone is not None, wait_s)
            return self.exits.pop(pid, None)

    def close(self) -> int:
        """Close the host's end (the zygote exits; its children go on): its exit status
        (-9: it did not exit within 5 s and was killed)."""
        # shut it down first: a close alone, while the reader thread is blocked in recv on
        # it, releases nothing (the recv holds the socket open), so the zygote never read
        # its end of file and every close waited the 5 s below, then killed it
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # never connected, or the zygote's end is gone already
            pass
        self.sock.close()
        try:
            return self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class ForkedRunner:
    """A runner forked by a zygote, with the ``subprocess.Popen`` calls ShellProcess uses."""

    def __init__(self, pid: int, zygote: RunnerZygote, stdin: IO[bytes], stdout: IO[bytes],
                 stderr: IO[bytes]) -> None:
        self.pid = pid
        self.args = [SCRIPT, str(pid)]
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._zygote = zygote
        self._pidfd: int | None
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # it has exited (and been reaped) already
            self._pidfd = None

    def _exited(self, timeout_s: float) -> bool:
        if self._pidfd is None:
            return True
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(timeout_s * 1000.0))

    def _settle(self) -> int:
        code = self._zygote.exit_code(self.pid, REPORT_WAIT_S)
        self.returncode = -signal.SIGKILL if code is None else code
        """(A child whose zygote died before it: its status is unknown; shown as killed.)"""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None and self._exited(0.0):
            self._settle()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if not self._exited(-1.0 if timeout is None else timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self._settle()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None and self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_zygotes: dict[tuple[str, tuple[tuple[str, str], ...]], RunnerZygote | None] = {}
_lock = threading.Lock()


def _key(python: str, env: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Children of one zygote share what is fixed when an interpreter starts: the
    executable and the ``PYTHON*`` environment variables (the rest is set per child)."""
    return python, tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON")))


def _zygote(python: str, env: Mapping[str, str]) -> RunnerZygote | None:
    key = _key(python, env)
    with _lock:
        if key in _zygotes:
            return _zygotes[key]
        try:
            zygote: RunnerZygote | None = RunnerZygote(python, env)
        except ZygoteGone as exc:
            log.warning("pystorm runner zygote for %s: %s; starting runners cold", python, exc)
            zygote = None
        _zygotes[key] = zygote
        return zygote


def start_runner(command: Sequence[str], cwd: str | None,
                 env: Mapping[str, str]) -> ForkedRunner | None:
    """The runner ``command`` (``[python, pystorm_runner.py, ...]``) forked by the zygote
    for ``python`` and ``env``, or None: start it cold (no zygote, or it is gone)."""
    if os.environ.get(ENABLE_ENV, "1") == "0" or not hasattr(os, "pidfd_open"):
        return None
    if cwd is not None and not os.path.isdir(cwd):
        return None  # the cold start says what is wrong, as before
    python = command[0]
    zygote = _zygote(python, env)
    if zygote is None:
        return None
    ours: list[int] = []
    theirs: list[int] = []
    try:
        for _ in range(3):
            r, w = os.pipe2(os.O_CLOEXEC)
            ours.append(w if not ours else r)
            theirs.append(r if not theirs else w)
        pid = zygote.fork(command, os.path.abspath(cwd or os.getcwd()), env,
                          (theirs[0], theirs[1], theirs[2]))
    except ZygoteGone as exc:
        for fd in ours:
            os.close(fd)
        log.warning("pystorm runner zygote for %s: %s; starting runners cold", python, exc)
        with _lock:
            if _zygotes.get(_key(python, env)) is zygote:
                _zygotes[_key(python, env)] = None
        zygote.close()  # (one that stopped answering is not left behind)
        return None
    finally:
        for fd in theirs:
            os.close(fd)
    stdin = os.fdopen(ours[0], "wb")
    return ForkedRunner(pid, zygote, stdin, os.fdopen(ours[1], "rb"), os.fdopen(ours[2], "rb"))


def zygote_pids() -> dict[str, int]:
    """The running zygotes' pids by Python executable (for tests and diagnostics)."""
    with _lock:
        return {key[0]: z.proc.pid for key, z in _zygotes.items()
                if z is not None and z.gone is None}


def close_all() -> list[int]:
    """Close every zygote (their forked runners go on) and forget any that failed: the
    next runner start starts a new one. The zygotes' exit statuses."""
    with _lock:
        zygotes = [z for z in _zygotes.values() if z is not None]
        _zygotes.clear()
    return [z.close() for z in zygotes]


atexit.register(close_all)  # the zygote reaped by its parent, with its CPU time accounted
