"""Why a topology failed, in words: what ``handle.wait()`` raises and ``jstorm run`` prints
(docs/errors.md)."""

from __future__ import annotations

from typing import Any

FINAL_STATUS_FILE = "final_status.json"
"""Kept in the run directory (``JSTORM_HOME/runs/NAME``) when a run ends, so that
``jstorm status NAME`` still answers for a failed, killed or drained topology."""
INTERRUPTED = "interrupted"
"""The ``state`` of a final status the launcher wrote when it stopped a run that had not
ended by itself (Ctrl-C, a timeout, the cluster shut down): unlike ``killed`` (a planned
stop) the run is not over — ``--resume`` continues it from the checkpoint it kept."""
MASTER_ERROR_FILE = "master.error"
"""Written by a Topology Master that could not start (e.g. an unreachable state backend):
the launcher puts its text on the console and in the exception."""

TUPLE_CHARS = 300
"""The offending tuple is shown up to this many characters."""
TRACEBACK_LINES = 24
"""The traceback is shown up to its last this many lines (the whole one is in the log)."""


def describe_failure(name: str, status: dict[str, Any]) -> str:
    """The message of a failed or killed topology: the reason, then the user error behind it
    (component, task, exception, tuple, traceback), the restarts and the logs to read."""
    state = status.get("state")
    failure = status.get("failure")
    errors = status.get("errors") or []
    if not failure:
        last = errors[-1]["message"] if errors else "no error recorded"
        return f"topology {name!r} is {state} (last error: {last})"
    lines = [f"topology {name!r} failed: {failure['reason']}"]
    error = failure.get("error")
    plan = status.get("plan") or {}
    if error:
        task = error["task"]
        where = f"task {task}" + (f", worker {plan[str(task)]}" if str(task) in plan else "")
        tup = error.get("tuple") or ""
        if len(tup) > TUPLE_CHARS:
            tup = tup[:TUPLE_CHARS] + f"... ({len(tup)} chars)"
        lines += [f"  component: {error['component']} ({where})",
                  f"  error:     {error['message']}",
                  f"  tuple:     {tup or '-'}"]
    lines.append(f"  restarts:  {failure['restarts']} ({failure['restart_strategy']})")
    if failure.get("logs"):
        lines.append(f"  logs:      {', '.join(failure['logs'])}")
    trace = (error or {}).get("traceback", "").rstrip().splitlines()
    if trace:
        if len(trace) > TRACEBACK_LINES:
            trace = ["  ..."] + trace[-TRACEBACK_LINES:]
        lines += ["  " + line for line in trace]
    return "\n".join(lines)
