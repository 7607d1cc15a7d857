"""The pystorm runner's zygote: an interpreter that has imported pystorm and streamparse
once and forks one runner process per task on request.

Run as a script (``python .../runner_zygote.py FD``) by the host
(:mod:`jstormpy.multilang.zygote`), with ``FD`` its end of a ``SOCK_SEQPACKET`` socket
pair. Packets (JSON): zygote → host ``{"ready": 1}`` once the imports are done; host →
zygote ``{"argv", "cwd", "env"}`` with the child's stdin, stdout and stderr pipe ends
attached (``SCM_RIGHTS``); zygote → host ``{"pid": n}`` once forked, ``{"exit": pid,
"code": n}`` when a child ends (``-signal`` if a signal killed it, as
``Popen.returncode``). The zygote reaps every child (no zombies) and exits when the host
closes its end. Its own fds 0, 1 and 2 are pipes, as a cold runner's are: the ``sys.stdin``
/``stdout``/``stderr`` objects a child inherits (and that pystorm took as default
arguments at import) then suit the child's pipes put in their place.

A forked child starts its own session, puts the three pipes on fds 0, 1 and 2, takes the
request's working directory and environment, and then leaves the zygote's loop: the
script goes on as ``pystorm_runner.py argv`` would from its first line, and ends as that
script ends (exit status, traceback, atexit, the component's own threads).

Like the runner, this file imports only the standard library and pystorm.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
from typing import Any

MAX_PACKET = 1 << 20


def serve(sock: socket.socket) -> dict[str, Any] | None:
    """Fork children until the host goes away (None); in a child, its request."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    sock.send(b'{"ready": 1}')
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        _reap(sock)
        if sock.fileno() not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_PACKET, 3)
        except OSError:
            return None
        if not msg:
            return None  # the host closed its end
        request = json.loads(msg)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            sock.close()
            os.setsid()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            return dict(request)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)})
                      .encode())
        except OSError:
            pass


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    import pystorm  # noqa: F401  (what every child would import: paid once, here)
    try:
        import streamparse  # noqa: F401  (parses Storm's thrift IDL: the big part)
    except ImportError:
        pass
    import pystorm_runner  # this folder: the script's own, first on sys.path

    request = serve(sock)
    if request is None:
        return
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"][1:])  # (argv[0] is the Python executable)
    pystorm_runner.main(sys.argv[1:])


if __name__ == "__main__":
    main()
