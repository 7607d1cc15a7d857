"""jstormpy: exactly-once, checkpointing stream processing with Storm's spouts and bolts.

Example:
    from jstormpy import TopologyBuilder, Spout, Bolt, Fields, Config, LocalCluster, FileSink
"""

from __future__ import annotations

from jstormpy.grpc_logging import quiet_grpc_logging

quiet_grpc_logging()  # before anything imports gRPC

from jstormpy import compiled  # noqa: E402

compiled.install_fallback()  # JSTORM_PURE_PYTHON=1: before anything imports the record path

from jstormpy import moved_modules
from jstormpy.api.batch import Batch
from jstormpy.api.component import Bolt, Spout, TopologyContext, Tuple
from jstormpy.api.config import Config
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import CustomStreamGrouping, Fields, Topology, TopologyBuilder
from jstormpy.barrier.twophase import Sink
from jstormpy.connectors.sinks import FileSink, read_committed
from jstormpy.connectors.sources import FileSpout, SequenceSpout
from jstormpy.deploy.local import LocalCluster, TopologyHandle
from jstormpy.version import __version__

moved_modules.install()  # old module paths: pickles written before the move into rooms

__all__ = [
    "Batch", "Bolt", "Config", "CustomStreamGrouping", "Fields", "FileSink", "FileSpout",
    "JStormError",
    "LocalCluster", "SequenceSpout", "Sink", "Spout", "Topology", "TopologyBuilder",
    "TopologyContext", "TopologyHandle", "Tuple", "__version__", "read_committed",
]
