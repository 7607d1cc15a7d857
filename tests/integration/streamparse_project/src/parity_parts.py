"""A small streamparse project's components: numbers with ids, split by parity onto two
streams, counted per parity."""

from streamparse import Bolt, Spout, Stream


class NumberSpout(Spout):
    outputs = ["n"]

    def initialize(self, conf, context):
        self.limit = int(conf["numbers.limit"])
        self.next_n = 0

    def next_tuple(self):
        if self.next_n < self.limit:
            self.emit([self.next_n], tup_id=self.next_n)
            self.next_n += 1

    def fail(self, tup_id):
        self.emit([tup_id], tup_id=tup_id)


class ParityBolt(Bolt):
    outputs = [Stream(fields=["n", "parity"], name="default"),
               Stream(fields=["n"], name="odd")]

    def process(self, tup):
        n = tup.values[0]
        self.emit([n, n % 2], stream="default")
        if n % 2:
            self.emit([n], stream="odd")


class OddLogger(Bolt):
    outputs = []

    def process(self, tup):
        if tup.values[0] % 100 == 1:
            self.logger.info(f"odd number {tup.values[0]} from {tup.component}/{tup.stream}")
