"""What a heronpy component knows about its task (``heronpy.api.topology_context``)."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any


class TopologyContext:
    """Given to ``initialize(config, context)``; jstormpy's is
    :class:`jstormpy.heron.context.HeronTopologyContext`."""

    @abstractmethod
    def get_task_id(self) -> int:
        """This task's id."""

    @abstractmethod
    def get_component_id(self) -> str:
        """This component's name."""

    @abstractmethod
    def get_topology_name(self) -> str:
        """The topology's name."""

    @abstractmethod
    def get_cluster_config(self) -> dict[str, Any]:
        """The topology-wide config."""

    @abstractmethod
    def get_component_tasks(self, component_id: str) -> list[int]:
        """The task ids of a component."""

    @abstractmethod
    def register_metric(self, name: str, metric: Any, time_bucket_in_sec: int) -> None:
        """Register a metric (jstormpy keeps it on the context; it is not exported: the
        task's own metrics are, docs/operations.md)."""
