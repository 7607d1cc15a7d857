"""The heronpy bolt (``heronpy.api.bolt.bolt``).

Example:
    >>> from heronpy.api.bolt.bolt import Bolt
    >>> class Upper(Bolt):
    ...     outputs = ["word"]
    ...     def process(self, tup):
    ...         self.emit([tup.values[0].upper()])
    >>> Upper.spec(name="upper", inputs=[], par=2).parallelism
    2
"""

from __future__ import annotations

from typing import Any

from heronpy.api.bolt.base_bolt import BaseBolt


class Bolt(BaseBolt):
    """Subclass it: ``outputs`` (field names or Streams), ``initialize(config, context)``,
    ``process(tup)`` per input tuple, ``process_tick(tup)`` per tick tuple
    (``topology.tick.tuple.freq.secs`` in the bolt's or topology's config)."""

    outputs: Any = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        """Called once per task before any tuple (after ``init_state`` if stateful)."""

    def process(self, tup: Any) -> None:
        """Process one input tuple."""
        raise NotImplementedError(f"{type(self).__name__}.process is not implemented")

    def process_tick(self, tup: Any) -> None:
        """Process a tick tuple."""
