"""A pystorm bolt that holds its tuples and answers them only on a tick tuple, as
tick-driven batching bolts do: (seq, key) -> (seq, KEY), emitted anchored and acked at each
tick. Writes the most tuples it held at once to the file named by its first argument."""

import sys

from pystorm import Bolt


class TickBatchingBolt(Bolt):
    auto_ack = False

    def initialize(self, conf, context):
        self.held = []
        self.most = 0

    def process(self, tup):
        self.held.append(tup)
        self.most = max(self.most, len(self.held))

    def process_tick(self, tup):
        for held in self.held:
            self.emit([held.values[0], held.values[1].upper()], anchors=[held])
            self.ack(held)
        self.held = []
        self.ack(tup)
        with open(sys.argv[1], "w") as f:
            f.write(str(self.most))


if __name__ == "__main__":
    TickBatchingBolt().run()
