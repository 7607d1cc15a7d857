"""The heronpy spout (``heronpy.api.spout.spout``).

Example:
    >>> from heronpy.api.spout.spout import Spout
    >>> class Words(Spout):
    ...     outputs = ["word"]
    ...     def next_tuple(self):
    ...         self.emit(["cat"])
    >>> Words.spec(name="words").is_spout
    True
"""

from __future__ import annotations

from typing import Any

from heronpy.api.spout.base_spout import BaseSpout


class Spout(BaseSpout):
    """Subclass it: ``outputs``, ``initialize(config, context)``, ``next_tuple()``
    (emit 0..n tuples, return quickly), ``ack(tup_id)`` / ``fail(tup_id)``, ``activate``,
    ``deactivate``, ``close``."""

    outputs: Any = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        """Called once per task (after ``init_state`` if stateful)."""

    def next_tuple(self) -> None:
        """Emit the next tuple(s), if any."""
        raise NotImplementedError(f"{type(self).__name__}.next_tuple is not implemented")

    def ack(self, tup_id: Any) -> None:
        """A completed checkpoint covers the tuple emitted with ``tup_id``."""

    def fail(self, tup_id: Any) -> None:
        """Not called on jstormpy: a failure rolls the topology back (docs/coming-from.md)."""

    def activate(self) -> None:
        """The task starts (after ``initialize``)."""

    def deactivate(self) -> None:
        """The task stops (before ``close``)."""

    def close(self) -> None:
        """The task ends."""
