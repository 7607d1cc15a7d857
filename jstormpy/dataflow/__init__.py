"""A dataflow API compiled onto topologies (docs/dataflow.md).

Example:
    >>> from jstormpy.dataflow import Dataflow
    >>> flow = Dataflow("wordcount")
    >>> # lines = flow.source("lines", SomeSpout())              # items: {field: value}
    >>> # (lines.flat_map(lambda r: r["line"].split())
    >>> #       .key_by(lambda w: w).reduce(lambda n, _: n + 1)  # KeyedValue(key, value)
    >>> #       .sink("counts", FileSink("out/")))
    >>> # topology = flow.build()

The layer sits above the API model and the window layer; neither imports it.
"""

from __future__ import annotations

from jstormpy.dataflow.flow import Dataflow, KeyedStream, Stream, WindowedStream
from jstormpy.dataflow.results import JoinResult, KeyedValue, WindowResult

__all__ = ["Dataflow", "JoinResult", "KeyedStream", "KeyedValue", "Stream", "WindowResult",
           "WindowedStream"]
