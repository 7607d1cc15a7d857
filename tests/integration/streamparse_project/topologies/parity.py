"""A streamparse topology using streams, groupings, par and config."""

from parity_parts import NumberSpout, OddLogger, ParityBolt
from streamparse import Grouping, Topology


class Parity(Topology):
    config = {"numbers.limit": 500}
    numbers = NumberSpout.spec(par=1)
    parity = ParityBolt.spec(inputs={numbers: Grouping.SHUFFLE}, par=2)
    odd = OddLogger.spec(inputs={parity["odd"]: Grouping.fields("n")}, par=2,
                         config={"odd.verbose": True})
