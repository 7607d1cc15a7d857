"""What the dataflow's two joins (:mod:`~jstormpy.dataflow.window_join`,
:mod:`~jstormpy.dataflow.interval_join`) share: two keyed inputs, pairs on the default
stream, late records on the ``late`` stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jstormpy.api.component import DEFAULT_STREAM
from jstormpy.dataflow.fusion import DataflowBolt, InputKey, Step
from jstormpy.dataflow.records import (
    ITEM_FIELDS,
    LATE_STREAM,
    Wire,
)


def _join_sides(sides: Mapping[InputKey, int]) -> dict[InputKey, Wire]:
    return {k: Wire.KEYED for k in sides}


class JoinBolt(DataflowBolt):
    """What both joins share: pairs on the default stream, late records on
    :data:`LATE_STREAM` (``.late()``), counted in :attr:`late_records`."""

    def __init__(self, sides: Mapping[InputKey, int], steps: Sequence[Step] = ()) -> None:
        DataflowBolt.__init__(self, _join_sides(sides), steps)
        self.outputs = {DEFAULT_STREAM: ITEM_FIELDS,  # type: ignore[misc]
                        LATE_STREAM: ITEM_FIELDS}
        self.late_records = 0

    def _drop_late(self, item: Any) -> None:
        """``item`` came after every window or partner it belongs to was purged."""
        self.late_records += 1
        self.emit((item,), stream=LATE_STREAM)


__all__ = ["JoinBolt"]
