"""User groupings (``heronpy.api.custom_grouping``)."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any


class ICustomGrouping:
    """A grouping written in Python: ``prepare`` once per emitting task, then
    ``choose_tasks(values)`` per tuple returns the target task ids (a subset of
    ``target_tasks``). Use it with ``Grouping.custom(MyGrouping())``."""

    @abstractmethod
    def prepare(self, context: Any, component: str, stream: str,
                target_tasks: list[int]) -> None:
        """Called once per emitting task; ``context`` is None on jstormpy (the grouping
        runs in the emitter's router, not in a component)."""

    @abstractmethod
    def choose_tasks(self, values: Any) -> list[int]:
        """The task ids (from ``target_tasks``) that receive ``values``."""
