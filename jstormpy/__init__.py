"""jstormpy: exactly-once, checkpointing stream processing with Storm's spouts and bolts."""

from __future__ import annotations

from jstormpy.component import Bolt, Spout, TopologyContext, Tuple
from jstormpy.config import Config
from jstormpy.errors import JStormError

__version__ = "0.1.0"

__all__ = ["Bolt", "Config", "JStormError", "Spout", "TopologyContext", "Tuple", "__version__"]
