"""A worker's task logs and live settings (runtime/taskops.py), on a worker's members.

The operations read the worker through declared members (``WorkerOps``): no defaults in
case a member is missing, and their state lives in the ``TaskOps`` the worker holds.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jstormpy import Bolt, Config
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import OutputCollector
from jstormpy.runtime.task_host import DetachedHost
from jstormpy.runtime.taskops import RUN_DIR_ENV, TaskOps


@dataclass
class Worker:
    """The members of a worker the operations use."""

    worker_id: int = 3
    tasks_generation: int = 7
    config: Config | None = None
    executors: dict[int, TaskExecutor] = field(default_factory=dict)


class Quiet(Bolt):
    outputs = ("k",)


def executor(task_id: int, component: str) -> TaskExecutor:
    collector = OutputCollector(task_id, component, {"default": []}, [], lambda d, i: None)
    return TaskExecutor(task_id, component, "bolt", Quiet(), collector, DetachedHost())


def test_a_task_log_line_names_the_worker_and_the_generation_its_tasks_run_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    worker = Worker(config=Config(log_level="warning"))
    ops = TaskOps(worker)
    logger = ops.task_logger("count", 41)
    try:
        assert logger.level == logging.WARNING  # the run's configured level
        logger.warning("late tuple")
        lines = (tmp_path / "logs" / "tasks" / "count-41.log").read_text().splitlines()
        entry = json.loads(lines[-1])
        assert (entry["message"], entry["worker"], entry["generation"], entry["task"]) == \
            ("late tuple", 3, 7, 41)
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        if ops.router is not None:
            logging.getLogger("jstormpy.task").removeHandler(ops.router)


def test_live_commands_reach_the_running_tasks_and_tasks_built_later(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    worker = Worker(config=Config())
    worker.executors = {1: executor(1, "split"), 2: executor(2, "count")}
    ops = TaskOps(worker)
    ops.apply(pb.MasterMessage(set_log_level=pb.LogLevelCommand(component="count",
                                                                level="debug")))
    assert logging.getLogger("jstormpy.task.count.2").level == logging.DEBUG
    assert ops.task_logger("count", 9).level == logging.DEBUG  # rebuilt later: kept
    assert ops.task_logger("split", 8).level == logging.INFO
    ops.apply(pb.MasterMessage(set_config=pb.ConfigCommand(key="batch_linger_ms",
                                                           value_json="20")))
    assert worker.config is not None and worker.config.batch_linger_ms == 20
    assert [ex.linger_s for ex in worker.executors.values()] == [0.02, 0.02]
    for name in ("count.2", "count.9", "split.8", "split.1"):
        logging.getLogger(f"jstormpy.task.{name}").setLevel(logging.NOTSET)
