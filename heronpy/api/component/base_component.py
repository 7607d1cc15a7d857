"""What every heronpy component has (``heronpy.api.component.base_component``)."""

from __future__ import annotations

from typing import Any


class BaseComponent:
    """A heronpy spout or bolt instance: ``delegate`` is the jstormpy task that runs it
    (:mod:`jstormpy.heron`); ``logger`` is that task's logger."""

    def __init__(self, delegate: Any) -> None:
        self.delegate = delegate
        self.logger = delegate.logger

    def log(self, message: Any, level: str | None = None) -> None:
        """Log ``message`` to the task's log (``level``: trace, debug, info (default),
        warn, error)."""
        self.delegate.log(message, level)
