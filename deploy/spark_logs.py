"""Spark's console while topologies run on it: one line per worker failure, not three
stack traces.

A worker killed inside its barrier task fails that task, and so the whole stage. Spark
then logs the task's exception -- our one-line reason wrapped in a Python and a Java
stack trace, some 40 lines -- up to three times: the executor's ``ERROR Exception in
task``, the scheduler's ``WARN Lost task`` and the ``WARN Lost task`` of each sibling task
the failed stage cancels. The launcher already says what happened and what it does in
one line (``jstorm worker 1 (pid 4242) was killed by SIGKILL; ...; resubmitting the
workers' Spark job (restart 1 of max_restarts=3)``), so while at least one topology runs
on a SparkContext those loggers of the driver JVM are raised (table below) and put back
when the last topology on it stops. On a local master the executors run inside the
driver JVM; a cluster's executors log to their own files, which are left as they are.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("jstormpy.deploy.spark")

#: Driver-JVM log4j loggers raised while a topology runs, and to which level.
QUIET_LOGGERS = {
    "org.apache.spark.executor.Executor": "FATAL",  # ERROR "Exception in task" + trace
    "org.apache.spark.scheduler.TaskSetManager": "ERROR",  # WARN "Lost task" + trace
    "org.apache.spark.api.python.PythonRunner": "ERROR",  # WARN "Incomplete task interrupted"
}

_lock = threading.Lock()
_users: dict[int, tuple[int, dict[str, str | None]]] = {}  # id(SparkContext) -> (count, saved)


def _log4j(sc: Any) -> tuple[Any, Any, Any]:
    """(the log4j2 core LoggerContext, Configurator, Level) of the driver JVM."""
    jvm = sc._jvm  # py4j: PySpark has no public API for the driver's log4j2 config
    return (jvm.org.apache.logging.log4j.core.LoggerContext.getContext(False),
            jvm.org.apache.logging.log4j.core.config.Configurator,
            jvm.org.apache.logging.log4j.Level)


def _own_level(context: Any, name: str) -> str | None:
    """The level configured for exactly ``name``, or None if it only inherits one. (A
    logger with its own configuration escapes the console filter of Spark's shells, so
    restoring must remove ours, not set an inherited level on it.)"""
    config = context.getConfiguration().getLoggerConfig(name)
    return str(config.getLevel().name()) if config.getName() == name else None


def quiet_task_failures(sc: Any) -> None:
    """A topology starts on ``sc``: raise :data:`QUIET_LOGGERS` (first user saves them)."""
    with _lock:
        count, saved = _users.get(id(sc), (0, {}))
        if count == 0:
            try:
                context, configurator, level = _log4j(sc)
                saved = {name: _own_level(context, name) for name in QUIET_LOGGERS}
                for name, lvl in QUIET_LOGGERS.items():
                    configurator.setLevel(name, level.toLevel(lvl))
            except Exception as exc:  # no log4j2 in this Spark: keep its logging as is
                log.debug("cannot adjust Spark's log levels: %s", exc)
                saved = {}
        _users[id(sc)] = (count + 1, saved)


def restore_task_logging(sc: Any) -> None:
    """A topology on ``sc`` stopped: the last one puts the saved levels back."""
    with _lock:
        count, saved = _users.get(id(sc), (0, {}))
        if count <= 1:
            _users.pop(id(sc), None)
            try:
                context, configurator, level = _log4j(sc)
                for name, lvl in saved.items():
                    if lvl is None:
                        context.getConfiguration().removeLogger(name)
                    else:
                        configurator.setLevel(name, level.toLevel(lvl))
                context.updateLoggers()
            except Exception as exc:  # the session may be stopped already
                log.debug("cannot restore Spark's log levels: %s", exc)
        else:
            _users[id(sc)] = (count - 1, saved)
