"""The tuple a heronpy bolt receives (``heronpy.api.tuple``)."""

from __future__ import annotations

import time
from collections import namedtuple
from typing import Any

Tuple = namedtuple("Tuple", "id component stream task values creation_time roots")
"""A received tuple: ``values`` (the payload, a list or tuple), ``component`` and ``task``
(where it came from), ``stream``; ``id`` and ``roots`` are None here (jstormpy tracks
tuples by checkpoints, not ids); ``creation_time`` is when the bolt received it."""


class TupleHelper:
    """Tick tuples: ``stream == TICK_TUPLE_ID``, from ``TICK_SOURCE_COMPONENT``."""

    TICK_TUPLE_ID = "__tick"
    TICK_SOURCE_COMPONENT = "__system"

    @staticmethod
    def make_tick_tuple() -> Any:
        """A tick tuple (what ``process_tick`` receives)."""
        return Tuple(id=TupleHelper.TICK_TUPLE_ID, component=TupleHelper.TICK_SOURCE_COMPONENT,
                     stream=TupleHelper.TICK_TUPLE_ID, task=None, values=None,
                     creation_time=time.time(), roots=None)
