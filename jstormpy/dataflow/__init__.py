"""A dataflow API compiled onto topologies (docs/dataflow.md).

Example:
    >>> from jstormpy import FileSink
    >>> from jstormpy.connectors.sources import SequenceSpout
    >>> from jstormpy.dataflow import Dataflow
    >>> flow = Dataflow("counts")
    >>> events = flow.source("events", SequenceSpout(keys=3, per_key=10))  # {field: value}
    >>> (events.map(lambda r: (r["key"], r["value"]))
    ...        .key_by(lambda kv: kv[0])
    ...        .reduce(lambda a, b: (a[0], a[1] + b[1]))   # KeyedValue(key, value)
    ...        .sink("sums", FileSink("/tmp/sums")))
    >>> topology = flow.build()                            # an ordinary Topology
    >>> list(topology.components)
    ['events', 'map-2-lambda', 'reduce-4-lambda', 'sums']

The layer sits above the API model and the window layer; neither imports it.
"""

from __future__ import annotations

from jstormpy.dataflow.flow import Dataflow, KeyedStream, Stream, WindowedStream
from jstormpy.dataflow.results import JoinResult, KeyedValue, WindowResult

__all__ = ["Dataflow", "JoinResult", "KeyedStream", "KeyedValue", "Stream", "WindowResult",
           "WindowedStream"]
