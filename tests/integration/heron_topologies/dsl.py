"""A heronpy topology in the class DSL (the form `heron submit ... ClassName` runs)."""

from heron_components import KeyCount, KeySpout

import heronpy.api.api_constants as constants
from heronpy.api.stream import Grouping
from heronpy.api.topology import Topology


class KeyCounts(Topology):
    config = {constants.TOPOLOGY_RELIABILITY_MODE:
              constants.TopologyReliabilityMode.EFFECTIVELY_ONCE,
              constants.TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS: 0.25,
              "keys.n": 300, "keys.keys": 7}
    keys = KeySpout.spec(par=2)
    count = KeyCount.spec(par=2, inputs={keys: Grouping.fields("key")})
