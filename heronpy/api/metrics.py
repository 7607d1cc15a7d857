"""Metrics a heronpy component registers (``heronpy.api.metrics``).

Example:
    >>> from heronpy.api.metrics import CountMetric, MultiCountMetric
    >>> c = CountMetric(); c.incr(); c.incr(2); c.get_value_and_reset(), c.get_value_and_reset()
    (3, 0)
    >>> m = MultiCountMetric(); m.incr("a"); m.get_value_and_reset()
    {'a': 1}
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any


class IMetric:
    """A metric: its value is read (and reset) once per time bucket."""

    @abstractmethod
    def get_value_and_reset(self) -> Any:
        """The value since the last call."""


class CountMetric(IMetric):
    """A counter."""

    def __init__(self) -> None:
        self.value = 0

    def incr(self, to_add: int = 1) -> None:
        self.value += to_add

    def get_value_and_reset(self) -> int:
        ret, self.value = self.value, 0
        return ret


class MultiCountMetric(IMetric):
    """Counters by key."""

    def __init__(self) -> None:
        self.value: dict[str, int] = {}

    def add_key(self, key: str) -> None:
        self.value.setdefault(key, 0)

    def incr(self, key: str, to_add: int = 1) -> None:
        self.value[key] = self.value.get(key, 0) + to_add

    def get_value_and_reset(self) -> dict[str, int]:
        ret, self.value = self.value, {k: 0 for k in self.value}
        return {k: v for k, v in ret.items() if v}


class MeanReducedMetric(IMetric):
    """The mean of the values updated since the last read (None if none)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def update(self, value: float) -> None:
        self.total += value
        self.count += 1

    def get_value_and_reset(self) -> float | None:
        ret = self.total / self.count if self.count else None
        self.total, self.count = 0.0, 0
        return ret
