"""The heronpy ``TopologyContext`` of a jstormpy task, and the log levels heronpy names."""

from __future__ import annotations

import logging
from typing import Any

from heronpy.api.topology_context import TopologyContext
from jstormpy.api.component import TopologyContext as TaskContext

LOG_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
              "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}
"""heronpy's ``log(message, level)`` names (default ``info``)."""


class HeronTopologyContext(TopologyContext):
    """What ``initialize(config, context)`` receives: the task's place in the topology."""

    def __init__(self, task: TaskContext, cluster_config: dict[str, Any],
                 logger: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self._task = task
        self._cluster_config = cluster_config
        self._logger = logger
        self.metrics: dict[str, tuple[Any, int]] = {}
        """Registered metrics by name: ``(metric, time bucket in seconds)``."""

    def get_task_id(self) -> int:
        return self._task.task_id

    def get_component_id(self) -> str:
        return self._task.component

    def get_topology_name(self) -> str:
        return self._task.topology

    def get_cluster_config(self) -> dict[str, Any]:
        return dict(self._cluster_config)

    def get_component_tasks(self, component_id: str) -> list[int]:
        return list(self._task.component_tasks.get(component_id, ()))

    def get_this_sources(self) -> list[int]:
        """The task ids this task reads from."""
        return list(self._task.input_tasks)

    def register_metric(self, name: str, metric: Any, time_bucket_in_sec: int) -> None:
        self.metrics[name] = (metric, int(time_bucket_in_sec))

    def add_task_hook(self, task_hook: Any) -> None:
        """Task hooks are not called on jstormpy (its metrics cover emits and executes)."""
        self._logger.warning("heronpy task hook %s is not called on jstormpy",
                             type(task_hook).__name__)
