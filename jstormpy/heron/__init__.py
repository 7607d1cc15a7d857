"""heronpy topologies on jstormpy: heronpy spouts and bolts run in-process in jstormpy tasks
(docs/coming-from.md, "Heron").

``jstorm run FILE`` runs a heronpy topology file unmodified (:mod:`jstormpy.heron.topology`);
:class:`HeronSpout` / :class:`HeronBolt` also place one heronpy component in a jstormpy
topology, e.g. ahead of a jstormpy sink.

Example:
    >>> from heronpy.api.spout.spout import Spout
    >>> class Words(Spout):
    ...     outputs = ["word"]
    >>> HeronSpout(Words).outputs
    {'default': ('word',)}
"""

from jstormpy.heron.components import HeronBolt, HeronSpout
from jstormpy.heron.topology import topology_from_heron

__all__ = ["HeronBolt", "HeronSpout", "topology_from_heron"]
