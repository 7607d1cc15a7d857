"""The terminal's Ctrl-C belongs to the launcher (``jstorm run``), not to its children.

A terminal sends SIGINT to its whole foreground process group: the launcher, its fork
server, the Topology Master and the workers. Only the launcher acts on it (it stops the
topology and reports the checkpoint its state is kept at); the processes it started ignore
it and are stopped by the launcher's Kill call (or SIGTERM/SIGKILL), so none of them ends
in a ``KeyboardInterrupt`` traceback or dies before the launcher has asked for its status.
They stay in the launcher's process group, so a signal meant for the whole run (SIGSTOP,
SIGKILL to the group) still reaches them.
"""

from __future__ import annotations

import signal
import threading


def ignore_terminal_interrupt() -> None:
    """Ignore SIGINT in this process (and, as ignored dispositions are inherited across
    ``fork`` and ``exec``, in the processes it starts). Call it first thing in the entry
    point of a process the launcher starts; a no-op off the main thread."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
