"""Worker-side operations: per-task structured log files and live commands from the TM.

Each task logs to ``$JSTORM_RUN_DIR/logs/tasks/<component>-<task_id>.log`` as JSON lines
(``time``, ``level``, ``task``, ``component``, ``generation``, ``worker``, ``logger``,
``message`` and ``exc`` when there is a traceback). The handler is attached to the task's
logger (``jstormpy.task.<component>.<task_id>``, what ``self.log`` returns in a component);
records the executor logs on the shared ``jstormpy.task`` logger from a task's thread
(user exceptions, crashes) are routed to the same file.

``LogLevelCommand`` and ``ConfigCommand`` (pushed by the TM for ``jstorm loglevel`` /
``jstorm config``) are applied here; overrides are remembered so tasks rebuilt by a later
generation keep them.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.runtime.executor import TaskExecutor

RUN_DIR_ENV = "JSTORM_RUN_DIR"
_THREAD_RE = re.compile(r"^task-(\d+)-")


class TaskLogHandler(logging.Handler):
    """Writes one task's records as JSON lines (the file opens lazily, line-buffered)."""

    def __init__(self, path: Path, component: str, task_id: int, host: WorkerOps) -> None:
        super().__init__()
        self.path = path
        self.component = component
        self.task_id = task_id
        self.host = host
        self._fh: Any = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            entry = {
                "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                    timespec="milliseconds"),
                "level": record.levelname, "task": self.task_id, "component": self.component,
                "generation": self.host.tasks_generation,
                "worker": self.host.worker_id, "logger": record.name,
                "message": record.getMessage()}
            if record.exc_info:
                entry["exc"] = logging.Formatter().formatException(record.exc_info)
            line = json.dumps(entry, default=str) + "\n"
            if self._fh is None:  # Handler.handle holds self.lock around emit
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
            self._fh.write(line)
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        super().close()


class _ThreadRouter(logging.Handler):
    """On ``jstormpy.task``: forwards records logged from a task thread to its handler."""

    def __init__(self, handlers: dict[int, TaskLogHandler]) -> None:
        super().__init__()
        self.handlers = handlers

    def emit(self, record: logging.LogRecord) -> None:
        if record.name != "jstormpy.task":
            return  # per-task loggers have their own handler
        m = _THREAD_RE.match(record.threadName or "")
        handler = self.handlers.get(int(m.group(1))) if m else None
        if handler is not None:
            handler.handle(record)


def log_dir() -> Path | None:
    """Where task logs go (``$JSTORM_RUN_DIR/logs/tasks``), or None outside a run dir."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    return Path(run_dir) / "logs" / "tasks" if run_dir else None


class WorkerOps(Protocol):
    """What a worker's task logs and live settings need of it (members of its
    :class:`~jstormpy.runtime.task_host.TaskHost` but ``executors``)."""

    worker_id: int
    tasks_generation: int
    """The generation the worker's tasks run in (log lines name it)."""
    config: Config | None
    """The run's configuration, replaced by a live setting (None: the defaults apply)."""
    executors: dict[int, TaskExecutor]
    """The worker's task executors by task id."""


class TaskOps:
    """One worker's task logs and live settings: each task's file handler, the log-level
    overrides (kept, so tasks a later generation rebuilds keep them) and the router of the
    shared ``jstormpy.task`` logger. The worker holds one."""

    def __init__(self, worker: WorkerOps) -> None:
        self.worker = worker
        self.handlers: dict[int, TaskLogHandler] = {}
        self.levels: dict[str, str] = {}     # component ("" = all) -> level
        self.router: _ThreadRouter | None = None

    def task_logger(self, component: str, task_id: int) -> logging.Logger:
        """The logger of one task, with its level and its JSON-lines file handler."""
        worker = self.worker
        logger = logging.getLogger(f"jstormpy.task.{component}.{task_id}")
        default = worker.config.log_level if worker.config is not None else "INFO"
        logger.setLevel(self.levels.get(component) or self.levels.get("") or default.upper())
        folder = log_dir()
        if folder is not None and task_id not in self.handlers:
            handler = TaskLogHandler(folder / f"{component}-{task_id}.log", component,
                                     task_id, worker)
            self.handlers[task_id] = handler
            logger.addHandler(handler)
        if folder is not None and self.router is None:
            self.router = _ThreadRouter(self.handlers)
            logging.getLogger("jstormpy.task").addHandler(self.router)
        logger.info("task %d (%s) built on worker %s for generation %s", task_id, component,
                    worker.worker_id, worker.tasks_generation)
        return logger

    def apply_log_level(self, component: str, level: str) -> None:
        """Set the level of ``component``'s task loggers (every component if "")."""
        level = level.upper()
        if component:
            self.levels[component] = level
        else:
            self.levels = {"": level}
        for ex in list(self.worker.executors.values()):
            if not component or ex.component_name == component:
                logging.getLogger(f"jstormpy.task.{ex.component_name}.{ex.task_id}"
                                  ).setLevel(level)

    def apply_config(self, key: str, value: Any) -> None:
        """Apply a live-safe setting to this worker's config and running executors."""
        worker = self.worker
        if worker.config is not None:
            worker.config = worker.config.replace(**{key: value})
        if key == "batch_linger_ms":
            for ex in list(worker.executors.values()):
                ex.linger_s = float(value) / 1000.0

    def apply(self, msg: Any) -> None:
        """Apply a ``set_log_level`` / ``set_config`` MasterMessage."""
        log = logging.getLogger("jstormpy.worker")
        body = msg.WhichOneof("body")
        try:
            if body == "set_log_level":
                self.apply_log_level(msg.set_log_level.component, msg.set_log_level.level)
                log.info("log level of %s set to %s",
                         msg.set_log_level.component or "all tasks", msg.set_log_level.level)
            elif body == "set_config":
                value = json.loads(msg.set_config.value_json)
                self.apply_config(msg.set_config.key, value)
                log.info("config %s set to %r", msg.set_config.key, value)
        except Exception:
            log.exception("cannot apply %s", body)

